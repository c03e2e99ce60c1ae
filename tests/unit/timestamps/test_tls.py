"""TLS of the timestamp server's gRPC (issue 45), without a store: the settings ``timestamp_tls_ca``,
``timestamp_tls_cert`` and ``timestamp_tls_key`` (parsing, validation, the environment variables, the certificate
and key both or neither and only with a CA), the checks of the CA, certificate and key files (each bad file named),
the Spark job's copies of them (the key's 0600), and the client against real gRPC servers on loopback: a TLS draw,
a server whose certificate another CA signed and a plaintext server fail at once naming the server and TLS, a
plaintext client of a TLS server fails naming the likely cause - never a fallback to plaintext; mutual TLS (a server
requiring client certificates): a client with a certificate its client CA signed draws, one without a certificate
or with another CA's fails naming the server and the likely cause."""
from __future__ import annotations

import os
import socket
import stat
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError, StoreAccessError, StoreUnavailableError, is_retriable
from airflow_atlas.settings_resolver import Rank, resolve, text_layer
from airflow_atlas.spark.ca import TimestampTlsPem, ca_directory, job_timestamp_tls, task_settings
from airflow_atlas.store import AtlasStore
from airflow_atlas.timestamps import timestamps_pb2 as pb
from airflow_atlas.timestamps.client import TimestampClient
from airflow_atlas.timestamps.rpc import service_handler
from airflow_atlas.timestamps.source import shared_client
from airflow_atlas.timestamps.tls import (
    CA_ENV,
    CERT_ENV,
    KEY_ENV,
    ClientTls,
    client_tls,
    is_closed,
    is_handshake_failure,
    path_from_environment,
    read_ca,
    server_credentials,
)
from tests.tls_material import Material, make_material


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> Material:
    return make_material(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory) -> Material:
    return make_material(tmp_path_factory.mktemp("other-tls"), name="another CA")


@pytest.fixture
def no_tls_environment(monkeypatch):
    for name in (CA_ENV, CERT_ENV, KEY_ENV):
        monkeypatch.delenv(name, raising=False)


def mutual(material: Material) -> ClientTls:
    """A client pinning ``material``'s CA and presenting its client certificate."""
    return ClientTls(str(material.ca), str(material.client_cert), str(material.client_key))


# ----- the setting ---------------------------------------------------------------------------------------
def test_the_setting_is_null_by_default_and_takes_an_absolute_path(tls):
    assert StoreConfig().timestamp_tls_ca is None
    assert StoreConfig(timestamp_tls_ca=str(tls.ca)).timestamp_tls_ca == str(tls.ca)
    resolved = resolve(text_layer(Rank.COMMAND_LINE, {"timestamp_tls_ca": f" {tls.ca} "}, "--set"))
    assert resolved.timestamp_tls_ca == str(tls.ca)
    assert resolve(text_layer(Rank.COMMAND_LINE, {"timestamp_tls_ca": "null"}, "--set")).timestamp_tls_ca is None
    assert StoreConfig(timestamp_tls_ca=str(tls.ca)).to_json()["timestamp_tls_ca"] == str(tls.ca)


@pytest.mark.parametrize("value", ["ca.pem", "./certs/ca.pem", "", 3, True])
def test_a_relative_path_or_a_non_text_is_refused_naming_the_setting(value):
    with pytest.raises(InvalidInputError, match="timestamp_tls_ca") as refused:
        StoreConfig(timestamp_tls_ca=value)
    assert "absolute file path" in str(refused.value) or "got" in str(refused.value)


def test_a_relative_path_from_the_command_line_is_refused_naming_the_layer():
    with pytest.raises(InvalidInputError, match=r"timestamp_tls_ca must be an absolute file path.*--set"):
        resolve(text_layer(Rank.COMMAND_LINE, {"timestamp_tls_ca": "ca.pem"}, "--set"))


def test_the_environment_names_the_ca_when_the_setting_is_null(tls, tmp_path, monkeypatch, no_tls_environment):
    assert path_from_environment(CA_ENV) is None and client_tls(None, None, None) is None
    monkeypatch.setenv(CA_ENV, f" {tls.ca} ")
    assert path_from_environment(CA_ENV) == str(tls.ca)
    with AtlasStore.open(f"sqlite:///{tmp_path / 'a.db'}") as store:
        assert store.timestamp_tls == ClientTls(str(tls.ca))
    with AtlasStore.open(f"sqlite:///{tmp_path / 'a.db'}", StoreConfig(timestamp_tls_ca=str(other_path(tmp_path)))) as store:
        assert store.timestamp_tls == ClientTls(str(other_path(tmp_path)))  # the setting wins
    monkeypatch.setenv(CA_ENV, "relative/ca.pem")
    with pytest.raises(InvalidInputError, match=rf"\${CA_ENV} must be an absolute file path, got 'relative/ca.pem'"):
        path_from_environment(CA_ENV)


# ----- the client certificate's settings --------------------------------------------------------------------
def test_the_client_certificate_settings_are_null_by_default_and_take_absolute_paths(tls):
    assert StoreConfig().timestamp_tls_cert is None and StoreConfig().timestamp_tls_key is None
    config = StoreConfig(timestamp_tls_cert=str(tls.client_cert), timestamp_tls_key=f" {tls.client_key}")
    assert (config.timestamp_tls_cert, config.timestamp_tls_key) == (str(tls.client_cert), str(tls.client_key))
    resolved = resolve(text_layer(Rank.COMMAND_LINE, {"timestamp_tls_cert": f"{tls.client_cert}",
                                                      "timestamp_tls_key": "null"}, "--set"))
    assert resolved.timestamp_tls_cert == str(tls.client_cert) and resolved.timestamp_tls_key is None
    for name in ("timestamp_tls_cert", "timestamp_tls_key"):
        with pytest.raises(InvalidInputError, match=rf"{name} must be an absolute file path.*--set"):
            resolve(text_layer(Rank.COMMAND_LINE, {name: "client.pem"}, "--set"))


def test_the_settings_and_the_environment_make_one_client_tls_value(tls, other_ca, tmp_path, monkeypatch,
                                                                   no_tls_environment):
    ca, cert, key = str(tls.ca), str(tls.client_cert), str(tls.client_key)
    assert client_tls(ca, None, None) == ClientTls(ca)
    assert client_tls(ca, cert, key) == ClientTls(ca, cert, key) == mutual(tls)
    monkeypatch.setenv(CA_ENV, ca)
    monkeypatch.setenv(CERT_ENV, cert)
    monkeypatch.setenv(KEY_ENV, key)
    assert client_tls(None, None, None) == mutual(tls)  # each null setting from its variable
    other = (str(other_ca.ca), str(other_ca.client_cert), str(other_ca.client_key))
    assert client_tls(*other) == mutual(other_ca)  # the settings win
    config = StoreConfig(timestamp_tls_cert=other[1], timestamp_tls_key=other[2])
    with AtlasStore.open(f"sqlite:///{tmp_path / 'a.db'}", config) as store:
        assert store.timestamp_tls == ClientTls(ca, other[1], other[2])
    monkeypatch.setenv(KEY_ENV, "client.key")
    with pytest.raises(InvalidInputError, match=rf"\${KEY_ENV} must be an absolute file path, got 'client.key'"):
        client_tls(None, None, None)


@pytest.mark.parametrize("given", ["cert", "key"])
def test_the_certificate_and_key_go_together_naming_both_settings(tls, given, monkeypatch, no_tls_environment):
    cert, key = (str(tls.client_cert), None) if given == "cert" else (None, str(tls.client_key))
    for attempt in (lambda: ClientTls(str(tls.ca), cert, key), lambda: client_tls(str(tls.ca), cert, key)):
        with pytest.raises(InvalidInputError) as refused:
            attempt()
        text = str(refused.value)
        assert "timestamp_tls_cert and timestamp_tls_key go together" in text and (cert or key) in text, text
        assert f"timestamp_tls_{given} is set" in text and CERT_ENV in text and KEY_ENV in text, text
    monkeypatch.setenv(CERT_ENV if given == "key" else KEY_ENV, str(tls.client_cert if given == "key" else tls.client_key))
    assert client_tls(str(tls.ca), cert, key) == mutual(tls)  # the other half from the environment


def test_a_client_certificate_without_a_ca_is_refused_naming_the_settings(tls, no_tls_environment):
    with pytest.raises(InvalidInputError, match=r"timestamp_tls_cert and timestamp_tls_key .* need timestamp_tls_ca"):
        client_tls(None, str(tls.client_cert), str(tls.client_key))


def test_the_embedded_store_ignores_the_timestamp_tls_files(tmp_path, monkeypatch, no_tls_environment):
    monkeypatch.setenv(CERT_ENV, "/no/key/for/this.pem")  # a broken rule: no key, no CA
    with AtlasStore.open(f"sqlite:///{tmp_path / 'a.db'}") as store:
        store.initialize()
        assert store.timestamps.fresh_timestamp() >= 1
        with pytest.raises(InvalidInputError, match="go together|need timestamp_tls_ca"):
            store.timestamp_tls  # noqa: B018 - what a Cassandra store of this process would be refused


def other_path(tmp_path: Path) -> Path:
    return tmp_path / "elsewhere" / "ca.pem"


# ----- the files -------------------------------------------------------------------------------------------
def test_a_missing_empty_or_invalid_ca_file_is_refused_naming_it(tls, tmp_path):
    assert read_ca(str(tls.ca)).startswith(b"-----BEGIN CERTIFICATE-----")
    missing = tmp_path / "missing.pem"
    with pytest.raises(InvalidInputError, match=f"cannot read the timestamp servers' CA file .*{missing}"):
        read_ca(str(missing))
    empty = tmp_path / "empty.pem"
    empty.write_text("")
    with pytest.raises(InvalidInputError, match=f"{empty} holds no PEM certificate"):
        read_ca(str(empty))
    broken = tmp_path / "broken.pem"
    broken.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    with pytest.raises(InvalidInputError, match=f"{broken} is not a valid PEM certificate bundle"):
        read_ca(str(broken))
    with pytest.raises(InvalidInputError, match=str(missing)):
        TimestampClient("ks", ["127.0.0.1:1"], lambda: "", tls=ClientTls(str(missing)))  # at construction, before a draw


def test_the_servers_certificate_and_key_are_checked_naming_the_file(tls, other_ca, tmp_path):
    assert server_credentials(str(tls.cert), str(tls.key)) is not None
    missing = tmp_path / "missing.pem"
    with pytest.raises(InvalidInputError, match=f"certificate file \\(--cert-file\\) {missing}"):
        server_credentials(str(missing), str(tls.key))
    with pytest.raises(InvalidInputError, match=f"key file \\(--key-file\\) {missing}"):
        server_credentials(str(tls.cert), str(missing))
    with pytest.raises(InvalidInputError, match=f"--cert-file\\) {tls.key} holds no PEM certificate"):
        server_credentials(str(tls.key), str(tls.key))
    with pytest.raises(InvalidInputError, match=f"--key-file\\) {tls.cert} has mode|--key-file\\) {tls.cert} holds no"):
        server_credentials(str(tls.cert), str(tls.cert))
    with pytest.raises(InvalidInputError, match=f"{tls.cert} and key {other_ca.key} are not a valid pair"):
        server_credentials(str(tls.cert), str(other_ca.key))
    readable = tmp_path / "readable.key"
    readable.write_bytes(tls.key.read_bytes())
    readable.chmod(0o644)
    with pytest.raises(InvalidInputError, match=f"{readable} has mode 644: it must not be readable"):
        server_credentials(str(tls.cert), str(readable))
    assert server_credentials(str(tls.cert), str(tls.key), str(tls.ca)) is not None
    with pytest.raises(InvalidInputError, match=f"cannot read the timestamp server's client CA file \\(--client-ca-file\\) {missing}"):
        server_credentials(str(tls.cert), str(tls.key), str(missing))
    with pytest.raises(InvalidInputError, match=f"client CA file \\(--client-ca-file\\) {tls.key} holds no PEM certificate"):
        server_credentials(str(tls.cert), str(tls.key), str(tls.key))


def test_the_clients_certificate_and_key_are_checked_naming_the_file_and_setting(tls, other_ca, tmp_path):
    assert mutual(tls).credentials() is not None
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(InvalidInputError, match=f"client's certificate file \\(timestamp_tls_cert\\) {missing}"):
        ClientTls(str(tls.ca), missing, str(tls.client_key)).credentials()
    with pytest.raises(InvalidInputError, match=f"client's key file \\(timestamp_tls_key\\) {missing}"):
        ClientTls(str(tls.ca), str(tls.client_cert), missing).credentials()
    with pytest.raises(InvalidInputError, match=f"timestamp_tls_cert\\) {tls.client_key} holds no PEM certificate"):
        ClientTls(str(tls.ca), str(tls.client_key), str(tls.client_key)).credentials()
    with pytest.raises(InvalidInputError, match=f"client's certificate {tls.client_cert} and key {other_ca.client_key} "
                                                "are not a valid pair"):
        ClientTls(str(tls.ca), str(tls.client_cert), str(other_ca.client_key)).credentials()
    readable = tmp_path / "readable.key"
    readable.write_bytes(tls.client_key.read_bytes())
    readable.chmod(0o640)
    with pytest.raises(InvalidInputError, match=f"\\(timestamp_tls_key\\) {readable} has mode 640: it must not be "
                                                "readable by group/others"):
        ClientTls(str(tls.ca), str(tls.client_cert), str(readable)).credentials()
    with pytest.raises(InvalidInputError, match=str(missing)):  # the client reads them at construction
        TimestampClient("ks", ["127.0.0.1:1"], lambda: "", tls=ClientTls(str(tls.ca), str(tls.client_cert), missing))


def test_a_spark_job_ships_the_timestamp_ca_to_its_executors(tls, monkeypatch, tmp_path, no_tls_environment):
    assert job_timestamp_tls({"timestamp_tls_ca": None}) is None
    assert task_settings({"a": 1}, None) == {"a": 1}
    shipped = job_timestamp_tls({"timestamp_tls_ca": str(tls.ca)})
    assert shipped == TimestampTlsPem(tls.ca.read_text())
    monkeypatch.setenv(CA_ENV, str(tls.ca))
    assert job_timestamp_tls({"timestamp_tls_ca": None}) == shipped  # the driver's environment, shipped
    copied = task_settings({"timestamp_tls_ca": "/only/on/the/driver.pem", "a": 1}, shipped)
    assert copied["a"] == 1 and Path(copied["timestamp_tls_ca"]).read_text() == tls.ca.read_text()
    assert "timestamp_tls_cert" not in copied and "timestamp_tls_key" not in copied
    with pytest.raises(InvalidInputError, match="missing.pem"):
        job_timestamp_tls({"timestamp_tls_ca": str(tmp_path / "missing.pem")})


def test_a_spark_job_ships_the_client_certificate_and_key_the_keys_copy_0600(tls, monkeypatch, no_tls_environment):
    settings = {"timestamp_tls_ca": None, "timestamp_tls_cert": None, "timestamp_tls_key": None, "a": 1}
    monkeypatch.setenv(CA_ENV, str(tls.ca))
    monkeypatch.setenv(CERT_ENV, str(tls.client_cert))
    monkeypatch.setenv(KEY_ENV, str(tls.client_key))
    shipped = job_timestamp_tls(settings)  # the driver's files, read and checked there
    assert shipped == TimestampTlsPem(tls.ca.read_text(), tls.client_cert.read_text(), tls.client_key.read_text())
    assert "PRIVATE KEY" not in repr(shipped), "the key is never shown"
    for name in (CA_ENV, CERT_ENV, KEY_ENV):
        monkeypatch.delenv(name)  # the executor's machine: none of the driver's files or variables
    copied = task_settings(settings, shipped)
    for name, source in (("timestamp_tls_ca", tls.ca), ("timestamp_tls_cert", tls.client_cert),
                         ("timestamp_tls_key", tls.client_key)):
        path = Path(copied[name])
        assert path.parent == ca_directory() and path != source and path.read_bytes() == source.read_bytes()
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, f"{path} readable by group/others"
    key = Path(copied["timestamp_tls_key"])
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and stat.S_IMODE(ca_directory().stat().st_mode) == 0o700
    tls_files = client_tls(copied["timestamp_tls_ca"], copied["timestamp_tls_cert"], copied["timestamp_tls_key"])
    assert tls_files is not None and tls_files.credentials() is not None  # what the task's client accepts
    key.chmod(0o644)  # a copy someone opened up is written anew, 0600
    assert Path(task_settings(settings, shipped)["timestamp_tls_key"]) == key
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.read_bytes() == tls.client_key.read_bytes()


def test_a_spark_job_refuses_a_bad_client_key_on_the_driver(tls, tmp_path, no_tls_environment):
    readable = tmp_path / "readable.key"
    readable.write_bytes(tls.client_key.read_bytes())
    os.chmod(readable, 0o644)
    settings = {"timestamp_tls_ca": str(tls.ca), "timestamp_tls_cert": str(tls.client_cert),
                "timestamp_tls_key": str(readable)}
    with pytest.raises(InvalidInputError, match=f"{readable} has mode 644"):
        job_timestamp_tls(settings)
    with pytest.raises(InvalidInputError, match="go together"):
        job_timestamp_tls({**settings, "timestamp_tls_key": None})


def test_what_grpc_reports_for_a_failed_handshake_is_recognised():
    assert is_handshake_failure("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Tls "
                                "handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: CERTIFICATE_VERIFY_FAILED")
    assert not is_handshake_failure("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: "
                                    "Failed to connect to remote host: Connection refused")
    assert not is_handshake_failure("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Tls "
                                    "handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SYSCALL")  # I/O: retried
    assert not is_handshake_failure("")
    # what grpc 1.85 reports to a client a server requiring client certificates refuses (none, or another CA's):
    assert is_closed("failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:1: Socket closed")
    assert not is_closed("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: "
                         "Failed to connect to remote host: Connection refused")


# ----- the client against real gRPC servers ------------------------------------------------------------
class Server:
    def __init__(self, tls: Material | None, *, client_ca: Path | None = None, port: int = 0):
        self.next = 1
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers((service_handler({
            "FreshTimestamps": self._fresh, "CurrentBound": self._bound,
            "Describe": lambda r, c: pb.DescribeResponse(server="x")}),))
        port = (self.server.add_insecure_port(f"127.0.0.1:{port}") if tls is None else
                self.server.add_secure_port(f"127.0.0.1:{port}", server_credentials(
                    str(tls.cert), str(tls.key), str(client_ca) if client_ca else None)))
        self.address = f"127.0.0.1:{port}"
        self.server.start()

    def _fresh(self, request, context):
        start, self.next = self.next, self.next + request.count
        return pb.FreshTimestampsResponse(start=start, count=request.count, epoch=1)

    def _bound(self, request, context):
        return pb.CurrentBoundResponse(issued=self.next - 1, epoch=1)


@pytest.fixture(scope="module")
def tls_server(tls):
    server = Server(tls)
    yield server
    server.server.stop(0).wait()


@pytest.fixture(scope="module")
def mutual_server(tls):
    """A server requiring client certificates that ``tls``'s CA signed."""
    server = Server(tls, client_ca=tls.ca)
    yield server
    server.server.stop(0).wait()


@pytest.fixture(scope="module")
def plain_server():
    server = Server(None)
    yield server
    server.server.stop(0).wait()


def test_a_client_with_the_ca_draws_over_tls(tls, tls_server):
    client = TimestampClient("ks", [tls_server.address], lambda: "", tls=ClientTls(str(tls.ca)))
    first = client.fresh_timestamps(3)
    assert client.fresh_timestamp() > first[-1] and client.current_bound() >= 4
    client.close()


def test_a_server_whose_certificate_another_ca_signed_fails_at_once_naming_it(other_ca, tls_server):
    client = TimestampClient("ks", [tls_server.address], lambda: "", retry_seconds=20, tls=ClientTls(str(other_ca.ca)))
    started = time.monotonic()
    with pytest.raises(StoreAccessError) as refused:
        client.fresh_timestamp()
    assert time.monotonic() - started < 10, "a certificate problem was retried as if the server were down"
    text = str(refused.value)
    assert f"timestamp server {tls_server.address}: TLS handshake failed" in text and str(other_ca.ca) in text, text
    assert not is_retriable(refused.value)
    client.close()


def test_a_tls_client_of_a_plaintext_server_fails_at_once_never_falling_back(tls, plain_server):
    client = TimestampClient("ks", [plain_server.address], lambda: "", retry_seconds=20, tls=ClientTls(str(tls.ca)))
    with pytest.raises(StoreAccessError, match=f"timestamp server {plain_server.address}: TLS handshake failed"):
        client.fresh_timestamp()
    assert plain_server.next == 1, "the plaintext server answered a request"
    client.close()


def test_a_tls_failure_does_not_hide_a_server_that_answers(tls, plain_server, tls_server):
    client = TimestampClient("ks", [plain_server.address, tls_server.address], lambda: "", tls=ClientTls(str(tls.ca)))
    assert client.fresh_timestamp() >= 1
    client.close()


def test_a_plaintext_client_of_a_tls_server_fails_naming_the_likely_cause(tls_server):
    client = TimestampClient("ks", [tls_server.address], lambda: "", retry_seconds=1)
    with pytest.raises(StoreUnavailableError) as failed:
        client.fresh_timestamp()
    text = str(failed.value)
    assert tls_server.address in text and "timestamp_tls_ca" in text and CA_ENV in text, text
    client.close()


# ----- mutual TLS: a server requiring client certificates ----------------------------------------------------
def test_a_client_with_a_certificate_the_client_ca_signed_draws(tls, mutual_server, tls_server):
    client = TimestampClient("ks", [mutual_server.address], lambda: "", tls=mutual(tls))
    first = client.fresh_timestamps(3)
    assert client.fresh_timestamp() > first[-1] and client.current_bound() >= 4
    client.close()
    # a certificate is harmless to a server that asks for none
    other = TimestampClient("ks", [tls_server.address], lambda: "", tls=mutual(tls))
    assert other.fresh_timestamp() >= 1
    other.close()


def test_a_client_without_a_certificate_fails_naming_the_server_and_the_settings(tls, mutual_server):
    client = TimestampClient("ks", [mutual_server.address], lambda: "", retry_seconds=1.5, tls=ClientTls(str(tls.ca)))
    before = mutual_server.next
    started = time.monotonic()
    with pytest.raises(StoreAccessError) as refused:
        client.fresh_timestamp()
    took = time.monotonic() - started
    assert 1.5 <= took < 8, f"{took:.1f}s: not within the retry bound"  # 'Socket closed' is retried, then named
    text = str(refused.value)
    assert f"timestamp server {mutual_server.address} closed the TLS connection" in text, text
    assert "require a client certificate" in text and "presents none" in text, text
    assert "timestamp_tls_cert" in text and "timestamp_tls_key" in text and CERT_ENV in text, text
    assert not is_retriable(refused.value) and mutual_server.next == before, "the server answered the request"
    client.close()


def test_a_client_with_another_cas_certificate_fails_naming_it(tls, other_ca, mutual_server):
    # it pins the right CA for the server, but its own certificate is another CA's
    foreign = ClientTls(str(tls.ca), str(other_ca.client_cert), str(other_ca.client_key))
    client = TimestampClient("ks", [mutual_server.address], lambda: "", retry_seconds=1, tls=foreign)
    with pytest.raises(StoreAccessError) as refused:
        client.fresh_timestamp()
    text = str(refused.value)
    assert mutual_server.address in text and f"do not trust this client's certificate {other_ca.client_cert}" in text
    assert "--client-ca-file" in text and "timestamp_tls_cert" in text, text
    client.close()


def test_a_refused_client_does_not_hide_a_server_that_answers(tls, mutual_server, tls_server):
    client = TimestampClient("ks", [mutual_server.address, tls_server.address], lambda: "", retry_seconds=5,
                             tls=ClientTls(str(tls.ca)))
    assert client.fresh_timestamp() >= 1
    client.close()


def test_only_a_server_that_closed_every_attempt_is_named_refusing(tls, mutual_server):
    nothing = f"127.0.0.1:{free_port()}"  # nothing listens: refused connections, not a refused certificate
    client = TimestampClient("ks", [nothing, mutual_server.address], lambda: "", retry_seconds=1,
                             tls=ClientTls(str(tls.ca)))
    with pytest.raises(StoreAccessError) as refused:
        client.fresh_timestamp()
    text = str(refused.value)
    assert f"timestamp server {mutual_server.address} closed the TLS connection" in text and nothing + "," not in text
    client.close()


def test_a_server_that_comes_up_refusing_the_client_is_retriable_and_hinted(tls):
    """An address that refused connections before it closed them (a server starting) may be a restart, not a
    refusal: the draw fails retriable after the bound, still naming the likely cause."""
    port = free_port()
    client = TimestampClient("ks", [f"127.0.0.1:{port}"], lambda: "", retry_seconds=3, tls=ClientTls(str(tls.ca)))
    started: list[Server] = []
    timer = threading.Timer(0.5, lambda: started.append(Server(tls, client_ca=tls.ca, port=port)))
    timer.start()
    try:
        with pytest.raises(StoreUnavailableError) as failed:
            client.fresh_timestamp()
    finally:
        timer.join()
        for server in started:
            server.server.stop(0).wait()
        client.close()
    assert started, "the server never started"
    text = str(failed.value)
    assert "Socket closed" in text and "presents none" in text and is_retriable(failed.value), text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_plaintext_client_of_a_mutual_tls_server_is_told_about_the_ca(mutual_server):
    client = TimestampClient("ks", [mutual_server.address], lambda: "", retry_seconds=1)
    with pytest.raises(StoreUnavailableError, match="timestamp_tls_ca"):
        client.fresh_timestamp()
    client.close()


def test_stores_with_other_client_certificates_never_share_a_client(tls, other_ca, mutual_server):
    class Kvs:
        backend = "cassandra"
        keyspace = "ks"

        def describe(self) -> str:
            return "cassandra ks (a stand-in)"

    kvs = Kvs()
    servers = (mutual_server.address,)
    same = shared_client(kvs, servers, 5, mutual(tls))
    assert shared_client(kvs, servers, 5, mutual(tls)) is same
    other = shared_client(kvs, servers, 5, ClientTls(str(tls.ca), str(other_ca.client_cert), str(other_ca.client_key)))
    assert other is not same and other.tls != same.tls
    plain_cert = shared_client(kvs, servers, 5, ClientTls(str(tls.ca)))
    assert plain_cert is not same and plain_cert is not other
    assert same.fresh_timestamp() >= 1
    for client in (same, other, plain_cert):
        client.close()
