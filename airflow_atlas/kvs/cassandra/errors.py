"""Driver exceptions -> the engine's error taxonomy (:mod:`airflow_atlas.errors`).

* CQL rejected (bad request, configuration): InvalidInputError, or TableNotFoundError for a missing table;
* replicas unavailable, timeouts, no host: StoreUnavailableError - retriable (operators retry with backoff,
  the CLI exits 3). An Unavailable error names the consistency settings: with sweep deletes at ALL, one
  replica down makes a sweep fail here, before progress moves;
* a lightweight transaction that failed in any way but Unavailable may or may not have been applied: its
  StoreUnavailableError says to read the cell at SERIAL before retrying.

Messages are scrubbed of the connection's secrets and bounded in length.
"""
from __future__ import annotations

from collections.abc import Sequence

from cassandra import (
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

from ...errors import InvalidInputError, StoreUnavailableError, TableNotFoundError

MAX_MESSAGE = 600
UNAVAILABLE_HINT = (
    " - too few replicas are up for the operation's consistency level (see the consistency_* settings; sweep "
    "deletes run at ALL by default, so a sweep waits until every replica is back)"
)


def says_missing(text: str) -> bool:
    return "does not exist" in text or "doesn't exist" in text or "unconfigured table" in text


def scrub(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE] + "..."
    return text


def translate(
    exc: BaseException, op: str, table: str | None, keyspace: str | None, secrets: Sequence[str], lwt: bool = False
) -> Exception:
    """The engine error for a driver exception raised by ``op`` (on ``table`` of ``keyspace``)."""
    where = f" on table {table!r}" if table else ""
    where += f" (keyspace {keyspace!r})" if keyspace else ""
    detail = scrub(f"{type(exc).__name__}: {exc}", secrets)
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
        return StoreUnavailableError(f"cassandra {op}{where} failed: {detail}{UNAVAILABLE_HINT if unavailable else ''}")
    if isinstance(exc, UnresolvableContactPoints):
        return StoreUnavailableError(f"cassandra {op}{where} failed: no contact point could be resolved")
    if isinstance(exc, (Unauthorized, DriverException)):
        return StoreUnavailableError(f"cassandra {op}{where} was refused: {detail}")
    return StoreUnavailableError(f"cassandra {op}{where} failed unexpectedly: {detail}")
