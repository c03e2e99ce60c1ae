"""Driver errors that no retry can fix -> the engine's access errors (pure: the driver's exception classes,
no node). The real node's answers are checked in tests/integration/security."""
from __future__ import annotations

import ssl

from cassandra import AuthenticationFailed, Unauthorized
from cassandra.cluster import NoHostAvailable

from airflow_atlas.errors import (
    StoreAuthenticationError,
    StorePermissionError,
    StoreTlsError,
    StoreUnavailableError,
    is_retriable,
)
from airflow_atlas.kvs.cassandra.errors import translate


def test_missing_permission_names_permission_and_resource_and_is_not_retried():
    exc = Unauthorized('Error from server: code=2100 [Unauthorized] message="User sweeper has no MODIFY '
                       'permission on <table ks.atlas_sweep_progress> or any of its parents"')
    err = translate(exc, "put_unless_exists", "_sweep_progress", "ks", ["pw"])
    assert isinstance(err, StorePermissionError)
    assert (err.permission, err.resource) == ("MODIFY", "<table ks.atlas_sweep_progress>")
    assert "no MODIFY permission on <table ks.atlas_sweep_progress>" in str(err)
    assert not is_retriable(err)


def test_refused_credentials_on_every_host_is_an_authentication_error():
    exc = NoHostAvailable("Unable to connect to any servers", {"h1:9042": AuthenticationFailed(
        'Error from server: code=0100 [Bad credentials] message="Provided username sweeper and/or password are incorrect" pw')})
    err = translate(exc, "connect", None, "ks", ["pw"])
    assert isinstance(err, StoreAuthenticationError) and not is_retriable(err)
    assert "pw" not in str(err)


def test_tls_failure_on_every_host_is_a_tls_error():
    exc = NoHostAvailable("Unable to connect to any servers", {
        "h1:9042": ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"),
        "h2:9042": PermissionError(1, "Last error: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"),
    })
    err = translate(exc, "connect", None, "ks", [])
    assert isinstance(err, StoreTlsError) and not is_retriable(err)


def test_an_authentication_the_node_could_not_perform_stays_retriable():
    """While system_auth's replicas come up a node answers AuthenticationFailed without judging the password."""
    exc = NoHostAvailable("Unable to connect to any servers", {"h1:9042": AuthenticationFailed(
        "Failed to authenticate to h1:9042: Error from server: code=0100 [Bad credentials] message=\"Unable to "
        "perform authentication: Cannot achieve consistency level LOCAL_ONE\"")})
    err = translate(exc, "connect", None, "ks", [])
    assert isinstance(err, StoreUnavailableError) and is_retriable(err)


def test_mixed_host_errors_stay_retriable():
    """One host refusing the password while another is down is not proof the password is wrong everywhere."""
    exc = NoHostAvailable("Unable to connect to any servers", {
        "h1:9042": AuthenticationFailed("Bad credentials"), "h2:9042": ConnectionRefusedError(111, "refused"),
    })
    err = translate(exc, "connect", None, "ks", [])
    assert isinstance(err, StoreUnavailableError) and is_retriable(err)


def test_a_connect_that_failed_without_a_reason_is_tried_again_a_refusal_is_not():
    """The driver's Session raises NoHostAvailable with a *list* of hosts (no per-host errors) when the
    control connection was made and every pool then failed - seen in the rotation test: the old password
    still accepted for the control connection, refused for the pools. One more connect gives the reason."""
    from cassandra import OperationTimedOut

    from airflow_atlas.kvs.cassandra.connection import timed_out, unjudged

    no_reason = NoHostAvailable("Unable to connect to any servers", ["127.0.0.6"])
    assert unjudged(no_reason) and not timed_out(no_reason)
    refused = NoHostAvailable("Unable to connect to any servers", {"127.0.0.6:9042": AuthenticationFailed("Bad credentials")})
    assert not unjudged(refused) and not timed_out(refused)
    slow = NoHostAvailable("Unable to connect to any servers", {"127.0.0.6:9042": OperationTimedOut("timed out")})
    assert timed_out(slow) and not unjudged(slow)
