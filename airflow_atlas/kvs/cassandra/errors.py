"""Driver exceptions -> the engine's error taxonomy (:mod:`airflow_atlas.errors`).

* CQL rejected (bad request, configuration): InvalidInputError, or TableNotFoundError for a missing table;
* refused credentials, an untrusted/expired/mismatched certificate, a missing permission:
  StoreAuthenticationError / StoreTlsError / StorePermissionError (naming the permission and the resource) -
  never retried, since no retry can fix them (CLI exit 5);
* replicas unavailable, timeouts, no host: StoreUnavailableError - retriable (operators retry with backoff,
  the CLI exits 3). An Unavailable error names the consistency settings: with sweep deletes at ALL, one
  replica down makes a sweep fail here, before progress moves;
* a lightweight transaction that failed in any way but Unavailable may or may not have been applied: its
  StoreUnavailableError says to read the cell at SERIAL before retrying.

Messages are scrubbed of the connection's secrets and bounded in length.
"""
from __future__ import annotations

import re
import ssl
from collections.abc import Sequence

from cassandra import (
    AuthenticationFailed,
    ConfigurationException,
    CoordinationFailure,
    DriverException,
    InvalidRequest,
    OperationTimedOut,
    Timeout,
    Unauthorized,
    Unavailable,
    UnresolvableContactPoints,
)
from cassandra.cluster import NoHostAvailable

from ...errors import (
    InvalidInputError,
    StoreAuthenticationError,
    StorePermissionError,
    StoreTlsError,
    StoreUnavailableError,
    TableNotFoundError,
)
from ..scrub import scrub

MAX_MESSAGE = 600
UNAVAILABLE_HINT = (
    " - too few replicas are up for the operation's consistency level (see the consistency_* settings; sweep "
    "deletes run at ALL by default, so a sweep waits until every replica is back)"
)


def says_missing(text: str) -> bool:
    return "does not exist" in text or "doesn't exist" in text or "unconfigured table" in text


_PERMISSION = re.compile(r"has no (\w+) permission on (<[^>]*>)")
TLS_FAILURES = ("CERTIFICATE_VERIFY_FAILED", "certificate verify failed", "WRONG_VERSION_NUMBER", "SSLV3_ALERT",
                "TLSV1_ALERT", "wrong version number", "Hostname mismatch", "doesn't match")
"""Texts of TLS handshake failures (an ``ssl`` error may reach us wrapped in an OSError by the driver)."""
PLAIN_TO_TLS_HINT = (
    " - if the node requires client encryption, connect with ssl=true (URL) / the connection's ssl extras"
)


def _host_errors(exc: NoHostAvailable) -> list[BaseException]:
    errors = exc.errors if isinstance(getattr(exc, "errors", None), dict) else {}
    return [e for e in errors.values() if isinstance(e, BaseException)]


def _refused_credentials(exc: BaseException) -> bool:
    """An authentication failure that judged the credentials (wrong password, a role without LOGIN), not one
    where the node could not check them yet ("Unable to perform authentication: Cannot achieve consistency
    level ..." while system_auth's replicas come up; the server files both under code 0100 "Bad
    credentials"): only the first is final."""
    return "Unable to perform authentication" not in str(exc)


def access_error(exc: BaseException, op: str, where: str, detail: str) -> Exception | None:
    """The non-retriable access error behind ``exc`` (every host refused us for the same reason), or None."""
    if isinstance(exc, Unauthorized):
        match = _PERMISSION.search(str(exc))
        permission, resource = (match.group(1), match.group(2)) if match else (None, None)
        named = f"the role has no {permission} permission on {resource}; grant it" if match else "permission denied"
        return StorePermissionError(f"cassandra {op}{where}: {named} ({detail})", permission=permission, resource=resource)
    if not isinstance(exc, NoHostAvailable):
        return None
    errors = _host_errors(exc)
    if errors and all(isinstance(e, AuthenticationFailed) and _refused_credentials(e) for e in errors):
        return StoreAuthenticationError(f"cassandra {op}{where}: the store refused the credentials ({detail})")
    if errors and all(isinstance(e, ssl.SSLError) or any(t in str(e) for t in TLS_FAILURES) for e in errors):
        return StoreTlsError(
            f"cassandra {op}{where}: TLS handshake failed - the node's certificate is not trusted by the "
            f"configured CA (ssl_ca), has expired, or does not name the host ({detail})"
        )
    return None


def _shorten(text: str) -> str:
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE] + "..."
    return text


def translate(
    exc: BaseException, op: str, table: str | None, keyspace: str | None, secrets: Sequence[str], lwt: bool = False
) -> Exception:
    """The engine error for a driver exception raised by ``op`` (on ``table`` of ``keyspace``)."""
    where = f" on table {table!r}" if table else ""
    where += f" (keyspace {keyspace!r})" if keyspace else ""
    detail = _shorten(scrub(f"{type(exc).__name__}: {exc}", secrets))
    denied = access_error(exc, op, where, detail)
    if denied is not None:
        return denied
    if isinstance(exc, (ConfigurationException, InvalidRequest)):
        if table and says_missing(str(exc)):
            return TableNotFoundError(f"table {table!r} does not exist in keyspace {keyspace!r}")
        return InvalidInputError(f"cassandra {op}{where} was rejected: {detail}")
    if lwt and not isinstance(exc, (Unavailable, UnresolvableContactPoints)):
        # Timeouts, lost connections, CAS contention or unknown server errors: Paxos may have committed.
        return StoreUnavailableError(
            f"cassandra {op}{where} timed out: the lightweight transaction may or may not have been applied; "
            f"read the cell at SERIAL consistency before retrying ({detail})"
        )
    if isinstance(exc, (NoHostAvailable, OperationTimedOut, Unavailable, Timeout, CoordinationFailure)):
        unavailable = isinstance(exc, Unavailable) or "Cannot achieve consistency level" in detail
        reset = isinstance(exc, NoHostAvailable) and any(isinstance(e, ConnectionResetError) for e in _host_errors(exc))
        hint = UNAVAILABLE_HINT if unavailable else PLAIN_TO_TLS_HINT if reset else ""
        return StoreUnavailableError(f"cassandra {op}{where} failed: {detail}{hint}")
    if isinstance(exc, UnresolvableContactPoints):
        return StoreUnavailableError(f"cassandra {op}{where} failed: no contact point could be resolved")
    if isinstance(exc, DriverException):
        return StoreUnavailableError(f"cassandra {op}{where} was refused: {detail}")
    return StoreUnavailableError(f"cassandra {op}{where} failed unexpectedly: {detail}")
