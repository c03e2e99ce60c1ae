"""Every error the engine raises on purpose. Each names the problem it reports."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .kvs.cells import Cell


class AtlasError(Exception):
    """Base class of all airflow-atlas errors."""


class InvalidInputError(AtlasError, ValueError):
    """A caller passed a bad argument (name, range, URL, value size...)."""


class StoreNotInitializedError(InvalidInputError):
    """The store was opened with "must exist" and is not an initialized Atlas store (a missing file or
    keyspace, or no registry): nothing was created; run ``init`` first."""


class TableNotFoundError(AtlasError, KeyError):
    """The named table does not exist in the store."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else "table not found"


class KeyAlreadyExistsError(AtlasError):
    """put_unless_exists found an existing value for one or more cells."""

    def __init__(self, message: str, existing: dict | None = None):
        super().__init__(message)
        self.existing = existing or {}


class CorruptTransactionDataError(AtlasError):
    """A transactions-table entry is not a valid commit timestamp for its start timestamp (garbage bytes, a
    value below the start timestamp, or out of range). The message names the table, the start timestamp and
    the entry's cell, and says what to do; the same facts are attributes (None when unknown)."""

    def __init__(self, message: str, *, table: str | None = None, start_ts: int | None = None,
                 row_hex: str | None = None, col_hex: str | None = None, value_hex: str | None = None):
        super().__init__(message)
        self.table = table
        self.start_ts = start_ts
        self.row_hex = row_hex
        self.col_hex = col_hex
        self.value_hex = value_hex
        self.user_table: str | None = None  # a cell the transaction wrote, when the caller knows one
        self.user_row_hex: str | None = None
        self.user_col_hex: str | None = None
        self.cells: list[tuple[str, Cell]] = []  # (table, cell) of the versions it wrote, as verify collects them

    def to_json(self) -> dict:
        return {"error": str(self), "table": self.table, "start_ts": self.start_ts, "row_hex": self.row_hex,
                "col_hex": self.col_hex, "value_hex": self.value_hex, "user_table": self.user_table,
                "user_row_hex": self.user_row_hex, "user_col_hex": self.user_col_hex}


class StoreUnavailableError(AtlasError):
    """The backing store could not be reached or refused the request."""


class StoreAccessError(AtlasError):
    """The store refused who we are or what we asked for, in a way no retry can fix: fix the credentials,
    the certificate or the role's grants (CLI exit 5; an Airflow task fails without retry)."""


class StoreAuthenticationError(StoreAccessError):
    """The store refused the credentials (wrong user or password, or none given to a node that needs them)."""


class StoreTlsError(StoreAccessError):
    """The TLS handshake with the store failed: its certificate is not trusted by the configured CA, has
    expired, or does not name the host connected to."""


class StorePermissionError(StoreAccessError):
    """The role lacks a permission; ``permission`` and ``resource`` name it (None when the server's
    message did not)."""

    def __init__(self, message: str, *, permission: str | None = None, resource: str | None = None):
        super().__init__(message)
        self.permission = permission
        self.resource = resource


class TransactionError(AtlasError):
    """Base class of transaction failures."""


class TransactionConflictError(TransactionError):
    """Write-write conflict: another transaction committed a write to the same cell after our start."""


class TransactionAbortedError(TransactionError):
    """The transaction was rolled back (by itself, by a conflict, or by sweep)."""


class TransactionLockExpiredError(TransactionAbortedError):
    """The transaction's open-transaction registration expired; sweep may have passed its start timestamp."""


class TransactionClosedError(TransactionError):
    """A read or write was attempted on a transaction that already committed or aborted."""


class TransactionFailedRetriableError(TransactionError):
    """A transaction read a version from a writer still running past the wait bound; retry later."""


class SweptVersionReadError(TransactionError):
    """A read-only transaction met a garbage-collection sentinel: the version it needed may have been swept."""


class ReadOnlyNotAllowedError(TransactionError):
    """Read-only transactions are refused on THOROUGH tables (their sentinels are removed by sweep)."""


class LockNotHeldError(AtlasError):
    """A lock operation needed a lease the caller does not hold (lost, expired or taken over)."""


class CorruptQueueDataError(AtlasError):
    """A sweep-queue cell could not be decoded or references missing data."""


class RollbackRefusedError(AtlasError):
    """Sweep refused to roll back transactions it found no commit entry for: they have one in the other
    schema's transactions table, or far more of them than the rollback guard allows (nothing was changed)."""


class ExecutorEnvironmentError(AtlasError):
    """A Spark executor's Python cannot run the engine: a module is missing there (e.g. cassandra-driver),
    or its Python minor version differs from the driver's. Fix the deployment; retrying cannot help."""


NOT_RETRIABLE = (InvalidInputError, TableNotFoundError, ExecutorEnvironmentError, StoreAccessError)
"""Errors a retry cannot fix: bad input, a broken executor environment, and a store that refuses our
credentials, certificate or permissions. Everything else (a store that is down, a lost lease, a crash) may
pass on a retry."""


def is_retriable(exc: BaseException) -> bool:
    """Whether retrying the operation that raised ``exc`` may succeed (see :data:`NOT_RETRIABLE`)."""
    return not isinstance(exc, NOT_RETRIABLE)
