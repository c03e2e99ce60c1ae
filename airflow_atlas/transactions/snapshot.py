"""Snapshot-isolated transactions over the key-value store (AtlasDB's SnapshotTransaction, without commit locks).

A transaction reads the snapshot at its start timestamp S and buffers its writes; at commit it writes every
cell at S and then records ``S -> commit timestamp`` in the transaction service with put-unless-exists.

Reading a cell: take the latest version below S. Its writer W is

* committed before S: visible (the empty value is a delete, so the cell is absent);
* committed after S, or aborted: invisible; look at the next older version;
* without an entry: if W's registration is live (W is still committing) wait for it, up to
  ``running_writer_wait_seconds``, then fail with TransactionFailedRetriableError; else W died: roll it back
  with put-unless-exists(W, ABORTED) (losing that race means W just committed: read its commit timestamp);
* the sentinel (timestamp -1, left by sweep): absent for a read-write transaction; a read-only transaction
  fails with SweptVersionReadError, because a version it needed may have been swept.

Read-write transactions register in the open-transaction registry (see ``registry.py`` for why they register
*before* drawing S), so sweep never passes them while their lease is live; read-only transactions do not
register, the unreadable timestamp of the punch table protects them instead, and they may not read THOROUGH
tables at all.

A transaction is composed of what it holds: its registration's lease is
:class:`~airflow_atlas.transactions.lease.RegistrationLease` (``lease.py``: refreshed, never revived, verified);
committing its buffered writes is :class:`~airflow_atlas.transactions.commit.CommitProtocol` (``commit.py``: the
commit order and why at most one of two concurrent writers of a cell commits); starting, resolving other
transactions and retrying is :class:`~airflow_atlas.transactions.manager.TransactionManager` (``manager.py``).

Crash safety of a transaction: until step (g) of the commit protocol it has no commit entry, so a crash at
any point before leaves only versions that readers and sweep roll back (put-unless-exists(S, ABORTED))
once its registration lapses; the registration is dropped only after (g) or on abort, and an abort after
cells may have been written records ABORTED first.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ..errors import (
    InvalidInputError,
    KeyAlreadyExistsError,
    ReadOnlyNotAllowedError,
    SweptVersionReadError,
    TransactionClosedError,
    TransactionLockExpiredError,
)
from ..kvs.api import SENTINEL_TIMESTAMP, Cell, Value, validate_cell
from ..kvs.tables import SweepStrategy, TableMetadata, WriteMode
from .commit import CommitProtocol
from .encoding import ABORTED
from .latency_recorder import ABORT, COMMIT, READ
from .lease import RegistrationLease
from .registry import OpenTransaction

if TYPE_CHECKING:
    from .manager import TransactionManager

log = logging.getLogger(__name__)


class SnapshotTransaction:
    """One transaction. Use it from one thread at a time; it is closed by commit() or abort()."""

    def __init__(
        self,
        manager: TransactionManager,
        start_timestamp: int,
        *,
        read_only: bool,
        hard_delete: bool,
        registration: OpenTransaction | None,
        began_at: float | None = None,
    ):
        self._m = manager
        # perf_counter() when begin() was called: the application's latency of this transaction starts there.
        self._began_at = time.perf_counter() if began_at is None else began_at
        self._start = start_timestamp
        self.read_only = read_only
        self.hard_delete = hard_delete
        self._lease = None if read_only else RegistrationLease(manager, start_timestamp, registration)
        self._writes: dict[str, dict[Cell, bytes]] = {}
        self._state = "open"
        self._commit_timestamp: int | None = None

    # ----- properties ----------------------------------------------------------------------------------
    @property
    def start_timestamp(self) -> int:
        return self._start

    @property
    def commit_timestamp(self) -> int | None:
        return self._commit_timestamp

    @property
    def is_open(self) -> bool:
        return self._state == "open"

    @property
    def state(self) -> str:
        """``open``, ``committed`` or ``aborted``."""
        return self._state

    def __repr__(self) -> str:
        kind = "read-only" if self.read_only else "read-write"
        return f"<SnapshotTransaction {self._start} {kind} {self._state}>"

    # ----- reads ---------------------------------------------------------------------------------------
    def get(self, table: str, cells: Iterable[Cell]) -> dict[Cell, bytes]:
        """The committed value of each cell in this snapshot (own writes included); absent or deleted cells
        are omitted."""
        self._ensure_open()
        metadata = self._readable(table)
        wanted = self._cells(cells)
        local = self._writes.get(table, {})
        result = {c: local[c] for c in wanted if c in local and local[c] != b""}
        remote = [c for c in wanted if c not in local]
        if remote:
            began = time.perf_counter()
            self._keep_lease()
            result.update(self._read_committed(table, self._m.kvs.get(table, {c: self._start for c in remote})))
            self._check_lease_after_read(metadata)
            self._m.record_latency(READ, began)
        return result

    def get_row_columns(self, table: str, row: bytes) -> dict[bytes, bytes]:
        """Every visible column of one row, ordered by column bytes (own writes included)."""
        self._ensure_open()
        metadata = self._readable(table)
        if not isinstance(row, (bytes, bytearray)) or not row:
            raise InvalidInputError(f"a row is non-empty bytes, got {row!r}")
        row = bytes(row)
        began = time.perf_counter()
        self._keep_lease()
        latest = self._m.kvs.get_row_columns(table, row, timestamp=self._start)
        found = self._read_committed(table, {Cell(row, col): value for col, value in latest})
        self._check_lease_after_read(metadata)
        self._m.record_latency(READ, began)
        visible = {cell.col: value for cell, value in found.items()}
        for cell, value in self._writes.get(table, {}).items():
            if cell.row == row:
                if value == b"":
                    visible.pop(cell.col, None)
                else:
                    visible[cell.col] = value
        return dict(sorted(visible.items()))

    # ----- writes --------------------------------------------------------------------------------------
    def put(self, table: str, values: Mapping[Cell, bytes]) -> None:
        """Buffer writes; they reach the store at commit. Writing ``b""`` deletes the cell."""
        self._ensure_open()
        if self.read_only:
            raise InvalidInputError(f"read-only transaction {self._start} cannot write to {table!r}")
        self._writable(table)
        if not isinstance(values, Mapping):
            raise InvalidInputError(f"put takes a mapping of Cell -> bytes, got {type(values).__name__}")
        checked: dict[Cell, bytes] = {}
        for cell, value in values.items():
            cell = validate_cell(cell)
            checked[cell] = self._check_value(table, cell, value)
        self._keep_lease()
        self._writes.setdefault(table, {}).update(checked)

    def delete(self, table: str, cells: Iterable[Cell]) -> None:
        """Delete cells (an Atlas delete writes the empty value)."""
        self.put(table, {c: b"" for c in self._cells(cells)})

    # ----- ending --------------------------------------------------------------------------------------
    def commit(self) -> int | None:
        """Commit; returns the commit timestamp, or None when nothing was written (read-only, or no writes).

        Raises TransactionConflictError (write-write conflict), TransactionLockExpiredError (registration
        lost), TransactionAbortedError (rolled back by someone else); the transaction is aborted then.
        """
        self._ensure_open()
        if self._lease is None:  # read-only
            self._state = "committed"
            self._m.record_latency(COMMIT, self._began_at)
            return None
        try:
            if not any(self._writes.values()):
                self._lease.verify()
                self._state = "committed"
                self._lease.release()
                commit = None
            else:
                writes = {table: dict(cells) for table, cells in self._writes.items() if cells}
                self._keep_lease()
                protocol = CommitProtocol(self._m, self._start, self._lease, hard_delete=self.hard_delete)
                commit = protocol.commit(writes, committed=self._committed)
        except BaseException:
            if self._state == "open":
                self._abort(mark_aborted=True)
            raise
        self._m.record_latency(COMMIT, self._began_at)
        return commit

    def _committed(self, commit: int) -> None:
        """The commit point (g) passed: the transaction is committed whatever happens next."""
        self._state = "committed"
        self._commit_timestamp = commit

    def abort(self) -> None:
        """Abort (nothing was written to the store yet). Idempotent; a no-op on a closed transaction."""
        if self._state != "open":
            return
        self._abort(mark_aborted=False)

    # ----- read protocol -------------------------------------------------------------------------------
    def _read_committed(self, table: str, found: dict[Cell, Value]) -> dict[Cell, bytes]:
        """Resolve candidate versions (each the latest below some bound) to the visible committed values."""
        m = self._m
        result: dict[Cell, bytes] = {}
        while found:
            writers = {v.timestamp for v in found.values() if v.timestamp != SENTINEL_TIMESTAMP}
            outcomes = m.commit_timestamps(writers) if writers else {}
            older: dict[Cell, int] = {}
            for cell, version in found.items():
                if version.timestamp == SENTINEL_TIMESTAMP:
                    if self.read_only:
                        raise SweptVersionReadError(
                            f"read-only transaction {self._start} met a sweep sentinel in {table} row {cell.row!r} "
                            f"column {cell.col!r}: the version it needs may have been swept; start a new transaction"
                        )
                    continue  # a read-write transaction's snapshot is never swept: nothing older exists for it
                outcome = outcomes[version.timestamp]
                if outcome == ABORTED or outcome > self._start:
                    older[cell] = version.timestamp
                elif version.contents != b"":
                    result[cell] = version.contents
            found = m.kvs.get(table, older) if older else {}
        return result

    # ----- the registration's lease --------------------------------------------------------------------
    def _keep_lease(self) -> None:
        """Fail (aborted) if the registration was found lost; refresh it here too once more than half of the
        lease is used (:meth:`RegistrationLease.keep`)."""
        if self._lease is None:
            return
        lost = self._lease.keep()
        if lost is not None:
            self._abort(mark_aborted=False)
            raise TransactionLockExpiredError(f"transaction {self._start} lost its registration: {lost}") from lost

    def keep_registration_alive(self) -> bool:
        """Called by the manager's keeper thread: refresh the registration once a third of the lease is
        used. Returns False once there is nothing more to keep (closed, unregistered or lost)."""
        if self._lease is None:
            return False
        return self._lease.keep_alive(lambda: self._state == "open")

    def _check_lease_after_read(self, metadata: TableMetadata) -> None:
        """Spec 003: readers of THOROUGH tables must hold a valid lease at read time (sweep removes the
        sentinels that would otherwise reveal a swept version)."""
        if self._lease is None or metadata.strategy != SweepStrategy.THOROUGH:
            return
        try:
            self._lease.verify()
        except TransactionLockExpiredError:
            self._abort(mark_aborted=False)
            raise

    # ----- validation and state ------------------------------------------------------------------------
    def _ensure_open(self) -> None:
        if self._state != "open":
            raise TransactionClosedError(f"transaction {self._start} is {self._state}")

    def _readable(self, table: str) -> TableMetadata:
        metadata = self._logical(table)
        if self.read_only and metadata.strategy == SweepStrategy.THOROUGH:
            raise ReadOnlyNotAllowedError(
                f"read-only transactions may not read THOROUGH table {table!r} (its sentinels are swept)"
            )
        return metadata

    def _writable(self, table: str) -> TableMetadata:
        return self._logical(table)

    def _logical(self, table: str) -> TableMetadata:
        metadata = self._m.table_metadata(table)
        if metadata.write_mode != WriteMode.LOGICAL:
            raise InvalidInputError(
                f"table {table!r} is a {metadata.write_mode.value} table: transactions only use logical tables"
            )
        return metadata

    @staticmethod
    def _cells(cells: Iterable[Cell]) -> list[Cell]:
        if isinstance(cells, (bytes, bytearray, str)) or not isinstance(cells, Iterable):
            raise InvalidInputError(f"expected an iterable of cells, got {type(cells).__name__}")
        if isinstance(cells, Cell):
            raise InvalidInputError("expected an iterable of cells, got a single Cell: wrap it in a list")
        return list(dict.fromkeys(validate_cell(c) for c in cells))

    def _check_value(self, table: str, cell: Cell, value: object) -> bytes:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise InvalidInputError(
                f"value for {table} row {cell.row!r} column {cell.col!r} must be bytes, got {type(value).__name__}"
            )
        value = bytes(value)
        limit = self._m.config.max_value_bytes
        if len(value) > limit:
            raise InvalidInputError(
                f"value for {table} row {cell.row!r} column {cell.col!r} is {len(value)} bytes, "
                f"over the limit of {limit} bytes"
            )
        return value

    def _abort(self, *, mark_aborted: bool) -> None:
        """Close as aborted. ``mark_aborted`` records ABORTED (needed once cells may have been written)."""
        was_open = self._state == "open"
        self._state = "aborted"
        m = self._m
        if mark_aborted:
            try:
                m.transaction_service.put_unless_exists(self._start, ABORTED)
            except KeyAlreadyExistsError:
                pass  # already rolled back by someone else
            except Exception as exc:  # readers and sweep roll us back once we are unregistered
                log.warning("could not mark transaction %d aborted: %s", self._start, exc)
        if self._lease is not None and self._lease.registered:
            self._lease.release()
        if was_open:
            m.record_latency(ABORT, self._began_at)
