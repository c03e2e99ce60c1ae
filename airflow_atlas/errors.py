"""Every error the engine raises on purpose. Each names the problem it reports."""


class AtlasError(Exception):
    """Base class of all airflow-atlas errors."""


class InvalidInputError(AtlasError, ValueError):
    """A caller passed a bad argument (name, range, URL, value size...)."""


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
    value below the start timestamp, or out of range). The message names the table and start timestamp."""


class StoreUnavailableError(AtlasError):
    """The backing store could not be reached or refused the request."""


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


class ExecutorEnvironmentError(AtlasError):
    """A Spark executor's Python cannot run the engine: a module is missing there (e.g. cassandra-driver),
    or its Python minor version differs from the driver's. Fix the deployment; retrying cannot help."""


NOT_RETRIABLE = (InvalidInputError, TableNotFoundError, ExecutorEnvironmentError)
"""Errors a retry cannot fix: bad input and a broken executor environment. Everything else (a store
that is down, a lost lease, a crash) may pass on a retry."""


def is_retriable(exc: BaseException) -> bool:
    """Whether retrying the operation that raised ``exc`` may succeed (see :data:`NOT_RETRIABLE`)."""
    return not isinstance(exc, NOT_RETRIABLE)
