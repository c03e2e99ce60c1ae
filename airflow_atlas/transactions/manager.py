"""The transaction manager: starts transactions and owns what they share (services, metadata cache, punch
schedule, the registration keeper), resolves other transactions' fates, and retries ``run()``.

Read-write transactions register in the open-transaction registry *before* their start timestamp is drawn
(see ``registry.py``): :meth:`TransactionManager.begin` registers under a provisional timestamp it owns,
draws the start timestamp, re-keys the registration to it and only then drops the provisional one, so at
every moment a timestamp at or below the start timestamp is registered and sweep cannot pass it. The
manager's :class:`~airflow_atlas.transactions.keeper.RegistrationKeeper` refreshes open registrations
(also during a long commit).

A writer without a commit entry is rolled back (put-unless-exists(start, ABORTED)) only once its
registration is not live; :meth:`TransactionManager.roll_back` refuses when the other schema version's
transactions table has an entry for it (it may have committed there). The transactions themselves, and
why the commit protocol is safe, are in ``snapshot.py`` and ``commit.py``.
"""
from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from ..errors import (
    InvalidInputError,
    KeyAlreadyExistsError,
    RollbackRefusedError,
    StoreUnavailableError,
    SweptVersionReadError,
    TransactionAbortedError,
    TransactionConflictError,
    TransactionFailedRetriableError,
)
from ..kvs.api import MAX_VALUE_BYTES, KeyValueService
from ..kvs.tables import TableMetadata, validate_table_name
from ..sweep.queue.write_info import ScrubQueueHook, SweepQueueHook
from ..timestamps import TimestampSource, open_timestamps
from .encoding import ABORTED
from .keeper import RegistrationKeeper
from .latency_publisher import LatencyPublication, LatencyPublisher
from .latency_table import ensure_table as ensure_latency_table
from .punch import PunchTable
from .registry import OpenTransactionRegistry
from .service import TransactionService, make_transaction_service
from .snapshot import SnapshotTransaction

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
    latency: LatencyPublication | None = None
    """Record the application's latency and publish it into the application-latency table (None: neither;
    ``AtlasStore`` sets it from the ``app_latency_*`` settings; see ``latency_publisher.py``)."""

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
        timestamps: TimestampSource,
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
        self.latency: LatencyPublisher | None = (
            None if config.latency is None else LatencyPublisher(kvs, self.holder, config.latency)
        )

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
    ) -> TransactionManager:
        """Wire every service on ``kvs``, create their tables, and (by default) make the timestamp service the
        store's supplier of fresh timestamps for deletes and sentinels."""
        timestamps = open_timestamps(kvs)  # the store's server once adopted, else its cell
        timestamps.ensure_tables()
        registry = OpenTransactionRegistry(kvs, clock, margin_seconds=registry_margin_seconds,
                                          striped=lambda: timestamps.served)
        registry.ensure_tables()
        punch = PunchTable(kvs, clock)
        punch.ensure_tables()
        if config.latency is not None:
            ensure_latency_table(kvs)
        service = make_transaction_service(kvs, version)
        if install_timestamp_supplier:
            kvs.set_fresh_timestamp_supplier(timestamps.fresh_timestamp)
        return cls(kvs, timestamps, service, registry, punch, sweep_queue, scrub_queue, config, holder=holder, clock=clock)

    def close(self) -> None:
        """Stop publishing the application latency (publishing what is left). Transactions still work."""
        if self.latency is not None:
            self.latency.close()

    # ----- starting ------------------------------------------------------------------------------------
    def begin(self, read_only: bool = False, hard_delete: bool = False) -> SnapshotTransaction:
        """Start a transaction. Read-write transactions register before their start timestamp is drawn."""
        began = time.perf_counter()
        if hard_delete and read_only:
            raise InvalidInputError("a read-only transaction cannot be a hard delete")
        if hard_delete and self.scrub_queue is None:
            raise InvalidInputError("hard_delete needs a TransactionManager with a scrub_queue")
        if read_only:
            start = self.timestamps.fresh_timestamp()
            self._maybe_punch(start)
            return SnapshotTransaction(
                self, start, read_only=True, hard_delete=False, registration=None, began_at=began
            )

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
        txn = SnapshotTransaction(
            self, start, read_only=False, hard_delete=hard_delete, registration=registration, began_at=began
        )
        self._keeper.add(txn)
        return txn

    def run(self, fn: Callable[[SnapshotTransaction], T], retries: int = 10, *, hard_delete: bool = False) -> T:
        """Run ``fn(txn)`` in a read-write transaction and commit it; on a conflict, a writer still running,
        or a rollback by someone else, start over (at most ``retries`` more times). Other errors abort and
        propagate."""
        return self._run(fn, retries, read_only=False, hard_delete=hard_delete, retriable=_RETRIABLE)

    def run_read_only(self, fn: Callable[[SnapshotTransaction], T], retries: int = 3) -> T:
        """Run ``fn(txn)`` in a read-only transaction; retried when a writer was still running or a swept
        version was needed (a newer snapshot may not need it)."""
        return self._run(
            fn,
            retries,
            read_only=True,
            hard_delete=False,
            retriable=(TransactionFailedRetriableError, SweptVersionReadError),
        )

    def _run(
        self,
        fn: Callable[[SnapshotTransaction], T],
        retries: int,
        *,
        read_only: bool,
        hard_delete: bool,
        retriable: tuple[type[BaseException], ...],
    ) -> T:
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

    def record_latency(self, kind: str, began: float) -> None:
        """Record ``perf_counter() - began`` as the application's latency of ``kind`` (when publishing)."""
        latency = self.latency
        if latency is not None:
            latency.record(kind, time.perf_counter() - began)

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
    def _best_effort(fn: Callable[..., object], *args: object) -> None:
        try:
            fn(*args)
        except Exception as exc:
            log.warning("%s%r failed: %s", getattr(fn, "__name__", fn), args, exc)
