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

Commit, in this order (see :meth:`SnapshotTransaction.commit`):
(a) write-write conflict check, (b) enqueue the writes to the sweep queue (and scrub queue for hard deletes),
(b') check the registration is still live (the reference's order; saves writing cells that must abort),
(c) write the cells at S, (d) post-write conflict check, (e) draw the commit timestamp C, (f) check the
registration is still live, (g) put-unless-exists(S, C), (h) unregister.

Why at most one of two concurrent writers of a cell commits
----------------------------------------------------------
Let A and B both write cell c and be concurrent: neither committed before the other started
(C_A > S_B and C_B > S_A). Each writes its version (c) before its post-write check (d) reads c, and records
its commit (g) only after (d). If B's (d) read does not see A's version, A's write had not completed when
B's read began; B's own write completed before that read, so A's (d) read, which starts after A's write
completes, sees B's version. So at least one of them, say X, sees the other, Y, in (d). X then acts on Y:

* Y committed: C_Y > S_X (concurrency), so X raises TransactionConflictError and never commits;
* Y pending: X puts ABORTED for Y. If that succeeds, Y's own put-unless-exists (g) fails and Y never
  commits. If it fails, Y committed in between, with C_Y > S_X: X raises the conflict;
* Y aborted: Y never commits.

In every case at most one of A and B commits (both may abort, and retry). Pending versions are rolled back in
(d) whatever their start timestamp: ignoring a pending writer with a larger start timestamp in the hope that
it "resolves against us" is unsafe, because that writer's own (d) may have run before our version landed.
(a) is only an early exit that saves writing cells that would conflict anyway.

Timestamps ordering (start below commit, "committed after our start" = C > S) comes from the timestamp
service being strictly increasing across processes.
"""
from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, TypeVar

from ..errors import (
    InvalidInputError,
    KeyAlreadyExistsError,
    LockNotHeldError,
    RollbackRefusedError,
    ReadOnlyNotAllowedError,
    StoreUnavailableError,
    SweptVersionReadError,
    TransactionAbortedError,
    TransactionClosedError,
    TransactionConflictError,
    TransactionFailedRetriableError,
    TransactionLockExpiredError,
)
from ..kvs.api import (
    MAX_TIMESTAMP,
    MAX_VALUE_BYTES,
    SENTINEL_TIMESTAMP,
    Cell,
    KeyValueService,
    SweepStrategy,
    TableMetadata,
    Value,
    WriteMode,
    validate_cell,
    validate_table_name,
)
from ..sweep.write_info import ScrubQueueHook, SweepQueueHook, WriteInfo
from ..timestamps import TimestampService
from .encoding import ABORTED
from .conflicts import VersionWalk
from .keeper import RegistrationKeeper
from .punch import PunchTable
from .registry import OpenTransaction, OpenTransactionRegistry
from .service import TransactionService, make_transaction_service

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class TransactionConfig:
    """Tuning of a :class:`TransactionManager`. Times are seconds."""

    lease_seconds: float = 60.0
    """Lease of a read-write transaction's registration. While the transaction is open, the manager's
    :class:`~airflow_atlas.transactions.keeper.RegistrationKeeper` thread refreshes it whenever a third of it
    is used (also during a long commit), so a transaction may run longer than this; the lease bounds how
    long a crashed process holds sweep back."""
    punch_interval_seconds: float = 60.0
    """begin() punches the punch table at most this often per manager (0: on every begin)."""
    running_writer_wait_seconds: float = 5.0
    """How long a reader waits for a still-running writer before TransactionFailedRetriableError."""
    max_value_bytes: int = MAX_VALUE_BYTES
    """Largest value a transaction may write (at most the store's limit)."""
    metadata_cache_seconds: float = 10.0
    """How long table metadata (sweep strategy, write mode) is cached by the manager."""
    retry_backoff_seconds: float = 0.02
    """Base of the jittered exponential backoff between retries of run()."""
    spare_timestamp_max_age_seconds: float = 5.0
    """Spare timestamps older than this are not used as provisional registration keys."""

    def __post_init__(self) -> None:
        for name in ("lease_seconds", "metadata_cache_seconds"):
            if not getattr(self, name) > 0:
                raise InvalidInputError(f"TransactionConfig.{name} must be positive, got {getattr(self, name)!r}")
        for name in (
            "punch_interval_seconds",
            "running_writer_wait_seconds",
            "retry_backoff_seconds",
            "spare_timestamp_max_age_seconds",
        ):
            if not getattr(self, name) >= 0:
                raise InvalidInputError(f"TransactionConfig.{name} must be >= 0, got {getattr(self, name)!r}")
        if not 0 < self.max_value_bytes <= MAX_VALUE_BYTES:
            raise InvalidInputError(f"TransactionConfig.max_value_bytes must be in 1..{MAX_VALUE_BYTES}")


_RETRIABLE = (TransactionConflictError, TransactionFailedRetriableError, TransactionAbortedError)


class TransactionManager:
    """Starts transactions and owns what they share: services, metadata cache, punch schedule. Thread-safe."""

    def __init__(
        self,
        kvs: KeyValueService,
        timestamps: TimestampService,
        transaction_service: TransactionService,
        registry: OpenTransactionRegistry,
        punch: PunchTable,
        sweep_queue: SweepQueueHook | None = None,
        scrub_queue: ScrubQueueHook | None = None,
        config: TransactionConfig = TransactionConfig(),
        *,
        holder: str | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.kvs = kvs
        self.timestamps = timestamps
        self.transaction_service = transaction_service
        self.registry = registry
        self.punch = punch
        self.sweep_queue = sweep_queue
        self.scrub_queue = scrub_queue
        self.config = config
        if config.lease_seconds <= 2 * registry.margin_seconds:
            raise InvalidInputError(
                f"lease_seconds ({config.lease_seconds}) must exceed twice the registry's clock margin "
                f"({registry.margin_seconds}s): a lease is refreshed at half-time and refused within the margin"
            )
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}"
        self.clock = clock
        self._lock = threading.Lock()
        self._metadata: dict[str, tuple[TableMetadata, float]] = {}
        self._last_punch: float | None = None
        self._spares: deque[tuple[int, float]] = deque(maxlen=64)
        self._rng = random.Random()
        self._keeper = RegistrationKeeper(config.lease_seconds)

    @classmethod
    def create(
        cls,
        kvs: KeyValueService,
        *,
        version: int = 2,
        config: TransactionConfig = TransactionConfig(),
        sweep_queue: SweepQueueHook | None = None,
        scrub_queue: ScrubQueueHook | None = None,
        clock: Callable[[], float] = time.time,
        holder: str | None = None,
        registry_margin_seconds: float = 1.0,
        install_timestamp_supplier: bool = True,
    ) -> "TransactionManager":
        """Wire every service on ``kvs``, create their tables, and (by default) make the timestamp service the
        store's supplier of fresh timestamps for deletes and sentinels."""
        timestamps = TimestampService(kvs)
        timestamps.ensure_tables()
        registry = OpenTransactionRegistry(kvs, clock, margin_seconds=registry_margin_seconds)
        registry.ensure_tables()
        punch = PunchTable(kvs, clock)
        punch.ensure_tables()
        service = make_transaction_service(kvs, version)
        if install_timestamp_supplier:
            kvs.set_fresh_timestamp_supplier(timestamps.fresh_timestamp)
        return cls(kvs, timestamps, service, registry, punch, sweep_queue, scrub_queue, config, holder=holder, clock=clock)

    # ----- starting ------------------------------------------------------------------------------------
    def begin(self, read_only: bool = False, hard_delete: bool = False) -> "SnapshotTransaction":
        """Start a transaction. Read-write transactions register before their start timestamp is drawn."""
        if hard_delete and read_only:
            raise InvalidInputError("a read-only transaction cannot be a hard delete")
        if hard_delete and self.scrub_queue is None:
            raise InvalidInputError("hard_delete needs a TransactionManager with a scrub_queue")
        if read_only:
            start = self.timestamps.fresh_timestamp()
            self._maybe_punch(start)
            return SnapshotTransaction(self, start, read_only=True, hard_delete=False, registration=None)

        lease = self.config.lease_seconds
        provisional = self._take_spare()
        if provisional is None:
            provisional = self.timestamps.fresh_timestamp()
        # 1. register under a timestamp we own and that is below the start timestamp to come ...
        self.registry.register(provisional, self.holder, lease)
        try:
            # 2. ... only then draw the start timestamp (plus a spare for the next begin) ...
            block = self.timestamps.fresh_timestamps(2)
            start = block[0]
            self._add_spare(block[1])
            # 3. ... and re-key the registration to the start timestamp, which readers look up.
            registration = self.registry.register(start, self.holder, lease)
        finally:
            self._best_effort(self.registry.unregister, provisional)
        self._maybe_punch(start)
        txn = SnapshotTransaction(self, start, read_only=False, hard_delete=hard_delete, registration=registration)
        self._keeper.add(txn)
        return txn

    def run(self, fn: Callable[["SnapshotTransaction"], T], retries: int = 10, *, hard_delete: bool = False) -> T:
        """Run ``fn(txn)`` in a read-write transaction and commit it; on a conflict, a writer still running,
        or a rollback by someone else, start over (at most ``retries`` more times). Other errors abort and
        propagate."""
        return self._run(fn, retries, read_only=False, hard_delete=hard_delete, retriable=_RETRIABLE)

    def run_read_only(self, fn: Callable[["SnapshotTransaction"], T], retries: int = 3) -> T:
        """Run ``fn(txn)`` in a read-only transaction; retried when a writer was still running or a swept
        version was needed (a newer snapshot may not need it)."""
        return self._run(
            fn,
            retries,
            read_only=True,
            hard_delete=False,
            retriable=(TransactionFailedRetriableError, SweptVersionReadError),
        )

    def _run(self, fn, retries, *, read_only, hard_delete, retriable):
        if retries < 0:
            raise InvalidInputError(f"retries must be >= 0, got {retries}")
        attempt = 0
        while True:
            txn = self.begin(read_only=read_only, hard_delete=hard_delete)
            try:
                result = fn(txn)
                if txn.is_open:
                    txn.commit()
                return result
            except retriable as exc:
                txn.abort()
                if attempt >= retries:
                    raise
                attempt += 1
                pause = self._rng.uniform(0, self.config.retry_backoff_seconds * (2 ** min(attempt, 8)))
                log.debug("transaction %d: %s; retry %d/%d in %.3fs", txn.start_timestamp, exc, attempt, retries, pause)
                time.sleep(pause)
            except BaseException:
                txn.abort()
                raise

    # ----- shared services for transactions ------------------------------------------------------------
    def table_metadata(self, table: str) -> TableMetadata:
        """The table's metadata (cached for ``metadata_cache_seconds``). TableNotFoundError if unknown."""
        validate_table_name(table)
        now = time.monotonic()
        with self._lock:
            cached = self._metadata.get(table)
        if cached is not None and now - cached[1] < self.config.metadata_cache_seconds:
            return cached[0]
        metadata = self.kvs.get_metadata(table)
        with self._lock:
            self._metadata[table] = (metadata, now)
        return metadata

    def forget_metadata(self, table: str | None = None) -> None:
        """Drop cached metadata (of one table or all), e.g. after changing a sweep strategy."""
        with self._lock:
            if table is None:
                self._metadata.clear()
            else:
                self._metadata.pop(table, None)

    def commit_timestamps(self, writers: Iterable[int]) -> dict[int, int]:
        """The commit timestamp (or ABORTED) of every writer, resolving the ones without an entry: a writer
        still registered is waited for (TransactionFailedRetriableError past the bound); any other is rolled
        back."""
        writers = set(writers)
        known = self.transaction_service.get_many(writers)
        missing = writers.difference(known)
        if not missing:
            return known
        deadline = time.monotonic() + self.config.running_writer_wait_seconds
        pause = 0.005
        while True:
            running = set()
            for writer in sorted(missing):
                entry = self.registry.get(writer)
                if entry is not None and entry.live_at(self.clock()):
                    running.add(writer)
                else:
                    known[writer] = self.roll_back(writer)
            if not running:
                return known
            if time.monotonic() >= deadline:
                raise TransactionFailedRetriableError(
                    f"transaction(s) {sorted(running)} still running after "
                    f"{self.config.running_writer_wait_seconds}s; retry later"
                )
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.2)
            known.update(self.transaction_service.get_many(running))
            missing = running.difference(known)
            if not missing:
                return known

    def roll_back(self, start: int) -> int:
        """Mark ``start`` aborted unless it already has an outcome; return the outcome (ABORTED or commit).
        Refuses (RollbackRefusedError) when the other schema version's table has an entry for it: the
        transaction may have committed there, and must not be rolled back on this table's silence."""
        other_table, elsewhere = self.transaction_service.other_schema_entries([start])
        if elsewhere:
            raise RollbackRefusedError(
                f"transaction {start} has no entry in {self.transaction_service.table} but has one in {other_table} "
                f"({elsewhere[start]}): some process uses the other transactions schema version; not rolling it back. "
                "Run 'atlas-sweep verify' and stop that process"
            )
        try:
            self.transaction_service.put_unless_exists(start, ABORTED)
            return ABORTED
        except KeyAlreadyExistsError:
            outcome = self.transaction_service.get(start, serial=True)
            if outcome is None:
                raise StoreUnavailableError(
                    f"transaction {start} has an entry that a serial read cannot see; the store is inconsistent"
                ) from None
            return outcome

    # ----- internals -----------------------------------------------------------------------------------
    def _maybe_punch(self, timestamp: int) -> None:
        now = self.clock()
        with self._lock:
            if self._last_punch is not None and now - self._last_punch < self.config.punch_interval_seconds:
                return
            self._last_punch = now
        try:
            self.punch.punch(timestamp)
        except Exception as exc:  # punching helps sweep progress; it must not fail the transaction
            log.warning("could not punch timestamp %d: %s", timestamp, exc)
            with self._lock:
                self._last_punch = None

    def _take_spare(self) -> int | None:
        now = time.monotonic()
        with self._lock:
            while self._spares:
                ts, drawn_at = self._spares.popleft()
                if now - drawn_at <= self.config.spare_timestamp_max_age_seconds:
                    return ts
        return None

    def _add_spare(self, ts: int) -> None:
        with self._lock:
            self._spares.append((ts, time.monotonic()))

    @staticmethod
    def _best_effort(fn: Callable, *args) -> None:
        try:
            fn(*args)
        except Exception as exc:
            log.warning("%s%r failed: %s", getattr(fn, "__name__", fn), args, exc)


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
    ):
        self._m = manager
        self._start = start_timestamp
        self.read_only = read_only
        self.hard_delete = hard_delete
        self._registration = registration
        self._lease_renewed_at = manager.clock()
        # Guards the registration between this thread and the manager's keeper thread: a refresh never
        # runs concurrently with (or after) the unregistration.
        self._lease_lock = threading.Lock()
        self._lease_lost: Exception | None = None
        self._registered = registration is not None
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
            self._keep_lease()
            result.update(self._read_committed(table, self._m.kvs.get(table, {c: self._start for c in remote})))
            self._check_lease_after_read(metadata)
        return result

    def get_row_columns(self, table: str, row: bytes) -> dict[bytes, bytes]:
        """Every visible column of one row, ordered by column bytes (own writes included)."""
        self._ensure_open()
        metadata = self._readable(table)
        if not isinstance(row, (bytes, bytearray)) or not row:
            raise InvalidInputError(f"a row is non-empty bytes, got {row!r}")
        row = bytes(row)
        self._keep_lease()
        latest = self._m.kvs.get_row_columns(table, row, timestamp=self._start)
        found = self._read_committed(table, {Cell(row, col): value for col, value in latest})
        self._check_lease_after_read(metadata)
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
        if self.read_only:
            self._state = "committed"
            return None
        try:
            if not any(self._writes.values()):
                self._verify_registration()
                self._state = "committed"
                self._unregister()
                return None
            return self._commit_writes()
        except BaseException:
            if self._state == "open":
                self._abort(mark_aborted=True)
            raise

    def abort(self) -> None:
        """Abort (nothing was written to the store yet). Idempotent; a no-op on a closed transaction."""
        if self._state != "open":
            return
        self._abort(mark_aborted=False)

    # ----- commit protocol -----------------------------------------------------------------------------
    def _commit_writes(self) -> int:
        m = self._m
        writes = {table: dict(cells) for table, cells in self._writes.items() if cells}
        self._keep_lease()
        # (a) write-write conflicts, before anything is written.
        for table, cells in writes.items():
            self._check_conflicts(table, list(cells), post_write=False)
        # (b) the sweep queue (and scrub queue) learn of every write before any cell is written.
        infos = [
            WriteInfo(table, cell, self._start, value == b"")
            for table, cells in writes.items()
            if m.table_metadata(table).strategy != SweepStrategy.NOTHING
            for cell, value in cells.items()
        ]
        if infos and m.sweep_queue is not None:
            m.sweep_queue.enqueue(infos)
        if infos and self.hard_delete and m.scrub_queue is not None:
            m.scrub_queue.enqueue(infos)
        # (b') as the reference does: a writer whose registration lapsed does not even write its cells
        # (sweep may be past its start timestamp; (f) below is the check that decides).
        self._verify_registration()
        # (c) the cells, at the start timestamp.
        m.kvs.multi_put(writes, self._start)
        # (d) no commit locks: re-check now that our versions are visible to every other writer.
        for table, cells in writes.items():
            self._check_conflicts(table, list(cells), post_write=True)
        # (e) the commit timestamp.
        commit = m.timestamps.fresh_timestamp()
        # (f) sweep must not have passed us (it would have, had the registration expired).
        self._verify_registration()
        # (g) the commit point.
        self._record_commit(commit)
        self._state = "committed"
        self._commit_timestamp = commit
        # (h) done: let the immutable timestamp move on.
        self._unregister()
        return commit

    def _record_commit(self, commit: int) -> None:
        service = self._m.transaction_service
        try:
            service.put_unless_exists(self._start, commit)
            return
        except KeyAlreadyExistsError:
            raise TransactionAbortedError(
                f"transaction {self._start} was rolled back by another transaction or sweep before it could commit"
            ) from None
        except Exception as exc:
            # The write may or may not have been applied: find out before reporting anything.
            try:
                outcome = service.get(self._start, serial=True)
                if outcome is None:
                    outcome = self._m.roll_back(self._start)
            except Exception:
                raise StoreUnavailableError(
                    f"commit of transaction {self._start} at {commit}: outcome unknown ({exc})"
                ) from exc
            if outcome == commit:
                return
            raise TransactionAbortedError(f"transaction {self._start} did not commit: {exc}") from exc

    def _check_conflicts(self, table: str, cells: list[Cell], *, post_write: bool) -> None:
        """Walk each cell's versions from the newest down until one committed before our start (or none is
        left). Conflict: a version committed after our start. Pending versions: before our write, a larger
        start timestamp is a conflict and a smaller one is left for the post-write check; after our write,
        every pending version is rolled back (see the module docstring)."""
        m = self._m
        walk = VersionWalk(m.kvs, table)  # reads grouped by row; see conflicts.py
        bounds = {c: MAX_TIMESTAMP for c in cells}
        while bounds:
            found = walk.latest(bounds)
            writers = {ts for ts in found.values() if ts not in (SENTINEL_TIMESTAMP, self._start)}
            outcomes = m.transaction_service.get_many(writers) if writers else {}
            bounds = {}
            for cell, writer in found.items():
                if writer == SENTINEL_TIMESTAMP:
                    continue  # nothing older
                if writer == self._start:
                    bounds[cell] = writer
                    continue
                outcome = outcomes.get(writer)
                if outcome is None:
                    if not post_write:
                        if writer > self._start:
                            self._conflict(table, cell, f"transaction {writer} (started after us) is writing it")
                        bounds[cell] = writer
                        continue
                    outcome = m.roll_back(writer)
                    outcomes[writer] = outcome
                if outcome == ABORTED:
                    bounds[cell] = writer
                    continue
                if outcome > self._start:
                    self._conflict(table, cell, f"transaction {writer} committed it at {outcome}, after our start")
                # Committed before our start: every older committed version committed even earlier, and no
                # older pending version can still commit (it overlaps this committed one).

    def _conflict(self, table: str, cell: Cell, why: str) -> None:
        raise TransactionConflictError(
            f"write-write conflict: transaction {self._start} wrote {table} row {cell.row!r} column {cell.col!r} "
            f"but {why}"
        )

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

    # ----- leases --------------------------------------------------------------------------------------
    def _keep_lease(self) -> None:
        """Fail if the keeper found the registration lost; refresh it here too once more than half of the
        lease is used (the keeper normally refreshes it at a third)."""
        if self.read_only or self._registration is None:
            return
        lost = self._lease_lost
        if lost is None:
            lease = self._m.config.lease_seconds
            if self._m.clock() - self._lease_renewed_at < lease / 2:
                return
            with self._lease_lock:
                if self._lease_lost is None and self._registered:
                    try:
                        self._registration = self._m.registry.refresh(self._start, lease)
                        self._lease_renewed_at = self._m.clock()
                    except LockNotHeldError as exc:
                        self._lease_lost = exc
                lost = self._lease_lost
        if lost is not None:
            self._abort(mark_aborted=False)
            raise TransactionLockExpiredError(f"transaction {self._start} lost its registration: {lost}") from lost

    def keep_registration_alive(self) -> bool:
        """Called by the manager's keeper thread: refresh the registration once a third of the lease is
        used. Returns False once there is nothing more to keep (closed, unregistered or lost)."""
        lease = self._m.config.lease_seconds
        with self._lease_lock:
            if not self._registered or self._state != "open" or self._lease_lost is not None:
                return False
            if self._m.clock() - self._lease_renewed_at < lease / 3:
                return True
            try:
                self._registration = self._m.registry.refresh(self._start, lease)
                self._lease_renewed_at = self._m.clock()
            except LockNotHeldError as exc:
                self._lease_lost = exc
                log.warning("transaction %d lost its registration: %s", self._start, exc)
                return False
            except Exception as exc:  # a store hiccup: try again at the next tick, while the lease lasts
                log.warning("could not refresh the registration of transaction %d (will retry): %s", self._start, exc)
        return True

    def _unregister(self) -> None:
        with self._lease_lock:
            self._registered = False
        self._m._keeper.remove(self._start)
        self._m._best_effort(self._m.registry.unregister, self._start)

    def _verify_registration(self) -> None:
        """Raise TransactionLockExpiredError unless the stored registration is live with the margin to spare
        and no refresh found it lost (a refresh that found it lapsed may still have written a live value)."""
        if self._lease_lost is not None:
            raise TransactionLockExpiredError(
                f"registration of transaction {self._start} was lost: {self._lease_lost}; sweep may have passed its "
                "start timestamp"
            )
        entry = self._m.registry.get(self._start)
        now = self._m.clock()
        if entry is None or entry.expires_at - self._m.registry.margin_seconds <= now:
            when = "is gone" if entry is None else f"expired at {entry.expires_at:.3f} (now {now:.3f})"
            raise TransactionLockExpiredError(
                f"registration of transaction {self._start} {when}: sweep may have passed its start timestamp"
            )

    def _check_lease_after_read(self, metadata: TableMetadata) -> None:
        """Spec 003: readers of THOROUGH tables must hold a valid lease at read time (sweep removes the
        sentinels that would otherwise reveal a swept version)."""
        if self.read_only or metadata.strategy != SweepStrategy.THOROUGH:
            return
        try:
            self._verify_registration()
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
        self._state = "aborted"
        m = self._m
        if mark_aborted:
            try:
                m.transaction_service.put_unless_exists(self._start, ABORTED)
            except KeyAlreadyExistsError:
                pass  # already rolled back by someone else
            except Exception as exc:  # readers and sweep roll us back once we are unregistered
                log.warning("could not mark transaction %d aborted: %s", self._start, exc)
        if self._registration is not None:
            self._unregister()
