"""Shared machinery of the sweep safety suite (issue 4, section 7).

:class:`Harness` wraps one :class:`~airflow_atlas.store.AtlasStore` and gives the tests short verbs:
make a table, commit / abort / leave open a transaction, play a dead writer, let the read-only window pass,
sweep every shard of both strategies, and check the three safety properties:

* the oracle (:mod:`airflow_atlas.oracle`): every read an open transaction, a new transaction or a young
  read-only transaction can make is the same before and after sweeping; an older read-only transaction on
  a CONSERVATIVE table may fail (sentinel), never read different data;
* once nothing is open and sweep caught up: no obsolete version is left;
* no queue row is left below progress (no leaked rows).

Time: the read-only window is real configuration (``unreadable_window_seconds``), but the *punch table* of
each store reads a :class:`VirtualClock` (wall time plus an offset the test can advance), so "let the
window pass" costs no sleeping. Everything else (leases, registrations) uses the real clock.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping

from airflow_atlas import oracle
from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import TransactionConflictError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.kvs.tables import SweepStrategy
from airflow_atlas.oracle import Reader
from airflow_atlas.store import AtlasStore
from airflow_atlas.sweep.queue.write_info import WriteInfo
from airflow_atlas.transactions.encoding import ABORTED
from airflow_atlas.transactions.punch import PunchTable
from airflow_atlas.workload import stage_writes

STRATEGIES = (SweepStrategy.CONSERVATIVE, SweepStrategy.THOROUGH)
CONS, THOR = SweepStrategy.CONSERVATIVE, SweepStrategy.THOROUGH
FINE = 50_000
COARSE = 10_000_000

CONFIG = StoreConfig(
    # Wide, because "young" must stay young on a loaded machine (a reader begun before a sweep is inside
    # the window when that sweep computes its timestamp); passing it costs nothing (settle() moves the
    # punch clock, no test waits for it in real time).
    unreadable_window_seconds=5.0,
    punch_interval_seconds=0.05,
    lock_lease_seconds=10.0,
    running_writer_wait_seconds=1.0,
    transaction_lease_seconds=60.0,
    # The suite's stores are no application clients (a store that published would make every sweep of the
    # package's shared keyspace see a resting application); the pace tests open stores that publish.
    app_latency_publish=False,
)


class VirtualClock:
    """Wall-clock time plus an offset that only grows."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


def open_store(url: str, config: StoreConfig = CONFIG) -> tuple[AtlasStore, VirtualClock]:
    """An initialized store whose punch table reads a :class:`VirtualClock`."""
    store = AtlasStore.open(url, config)
    clock = VirtualClock()
    # Before anything builds the transaction manager or the sweep timestamp provider from it.
    store.__dict__["punch"] = PunchTable(store.kvs, clock=clock)
    store.initialize()
    return store, clock


def cell(i: int, col: int = 0) -> Cell:
    return Cell(f"row{i:06d}".encode(), f"c{col:02d}".encode())


class Harness:
    def __init__(self, store: AtlasStore, clock: VirtualClock, backend: str):
        self.store = store
        self.clock = clock
        self.backend = backend
        self.tables: list[str] = []
        self.open: list = []  # read-write transactions left open on purpose
        self.read_only_readers: list[int] = []
        self.leases: list = []  # shard locks a test took by hand: released at teardown whatever happens

    # ----- tables ------------------------------------------------------------------------------------
    def table(self, strategy: SweepStrategy | str, prefix: str = "t") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        self.store.create_table(name, strategy)
        self.tables.append(name)
        return name

    def strategy_of(self, table: str) -> SweepStrategy:
        return self.store.kvs.get_metadata(table).strategy

    def live_tables(self, strategy: SweepStrategy | None = None) -> list[str]:
        out = []
        for t in self.tables:
            if not self.store.kvs.table_exists(t):
                continue
            if strategy is None or self.strategy_of(t) is strategy:
                out.append(t)
        return out

    # ----- transactions ------------------------------------------------------------------------------
    def begin(self):
        txn = self.store.transactions.begin()
        self.open.append(txn)
        return txn

    @staticmethod
    def stage(txn, table: str, values: Mapping[Cell, bytes]) -> None:
        stage_writes(txn, {table: values})

    def commit(self, txn) -> int | None:
        if txn in self.open:
            self.open.remove(txn)
        return txn.commit()

    def abort(self, txn) -> None:
        if txn in self.open:
            self.open.remove(txn)
        txn.abort()

    def write(self, table: str, values: Mapping[Cell, bytes]) -> tuple[int, int]:
        """One committed transaction writing ``values`` (b"" = delete). Returns (start, commit)."""
        txn = self.store.transactions.begin()
        self.stage(txn, table, values)
        commit = txn.commit()
        return txn.start_timestamp, commit

    def write_many(self, writes: Mapping[str, Mapping[Cell, bytes]]) -> tuple[int, int]:
        txn = self.store.transactions.begin()
        for table, values in writes.items():
            self.stage(txn, table, values)
        return txn.start_timestamp, txn.commit()

    def try_commit(self, txn) -> bool:
        try:
            self.commit(txn)
            return True
        except TransactionConflictError:
            return False

    def dead_writer(self, writes: Mapping[str, Mapping[Cell, bytes]]) -> int:
        """A writer that enqueued and wrote its cells, then died before committing (workload's own)."""
        from airflow_atlas.workload import dead_writer

        return dead_writer(self.store, {t: dict(v) for t, v in writes.items()})

    def raw_write(self, table: str, values: Mapping[Cell, bytes], *, start: int | None = None) -> int:
        """The first half of a commit, in the protocol's order (enqueue, then write the cells at the start
        timestamp) without the per-cell conflict checks: for transactions of 100,000+ writes to fresh
        cells and for start timestamps placed exactly. Commit with :meth:`raw_commit`, or never (a dead
        writer). ``start`` is drawn fresh unless given (then it must be the next fresh timestamp)."""
        store = self.store
        drawn = store.timestamps.fresh_timestamp()
        assert start is None or drawn == start, (drawn, start)
        store.queue.writer.enqueue([WriteInfo(table, c, drawn, v == b"") for c, v in values.items()])
        store.kvs.put(table, dict(values), drawn)
        return drawn

    def raw_commit(self, start: int) -> int:
        commit = self.store.timestamps.fresh_timestamp()
        self.store.transaction_service.put_unless_exists(start, commit)
        return commit

    def close_all(self) -> None:
        for txn in list(self.open):
            self.abort(txn)
        for lease in self.leases:
            if lease is not None:
                self.store.locks.release(lease)  # no-op unless that lease still holds the lock
        self.leases.clear()

    def acquire(self, name: str, holder: str, seconds: float):
        lease = self.store.locks.acquire(name, holder, seconds)
        self.leases.append(lease)
        return lease

    def commit_of(self, start: int) -> int | None:
        return self.store.transaction_service.get_many([start]).get(start)

    def is_aborted(self, start: int) -> bool:
        return self.commit_of(start) == ABORTED

    # ----- time --------------------------------------------------------------------------------------
    def settle(self) -> int:
        """Let the read-only window pass for everything up to now: punch a fresh timestamp, then move the
        punch clock past the window. Returns the punched timestamp."""
        ts = self.store.timestamps.fresh_timestamp()
        self.store.punch.punch(ts)
        self.clock.advance(self.store.config.unreadable_window_seconds + 0.01)
        return ts

    def jump_to(self, target: int) -> None:
        """Make the next fresh timestamp exactly ``target`` (reserving the block in between)."""
        current = self.store.timestamps.current_bound()
        assert current < target, f"timestamps already at {current}, cannot jump to {target}"
        if target - 1 - current > 0:
            self.store.timestamps.fresh_timestamps(target - 1 - current)
        assert self.store.timestamps.current_bound() == target - 1

    def begin_at(self, target: int, *, warm: bool = True):
        """A read-write transaction whose start timestamp is exactly ``target``.

        ``begin`` registers under a spare timestamp it drew before (or a fresh one) and then draws two:
        its start timestamp and the next spare. A warm-up transaction leaves a spare (usable for 5 s),
        the jump makes ``target`` the next fresh timestamp. ``warm=False`` when :meth:`warm_up` was
        called just before (to place something else at ``target - 1`` first)."""
        if warm:
            self.warm_up()
        if self.store.timestamps.current_bound() != target - 1:
            self.jump_to(target)
        txn = self.begin()
        assert txn.start_timestamp == target, (txn.start_timestamp, target)
        return txn

    def warm_up(self) -> None:
        self.store.transactions.begin().abort()

    def dead_writer_at(self, target: int, writes: Mapping[str, Mapping[Cell, bytes]]) -> int:
        self.jump_to(target)
        start = self.dead_writer(writes)
        assert start == target
        return start

    def cells_in_shard(self, table: str, shard: int, n: int, offset: int = 0) -> list[Cell]:
        """``n`` cells of ``table`` (from ``cell(offset)`` on) that the queue puts into ``shard``."""
        from airflow_atlas.sweep.queue.shards import shard_for

        shards = self.shards
        out, i = [], offset
        while len(out) < n:
            c = cell(i)
            if shard_for(table, c, shards) == shard:
                out.append(c)
            i += 1
        return out

    def next_boundary(self, width: int, margin: int = 10) -> int:
        """The smallest multiple of ``width`` at least ``margin`` above the current timestamp bound."""
        current = self.store.timestamps.current_bound() + margin
        return (current // width + 1) * width

    # ----- sweeping ----------------------------------------------------------------------------------
    @property
    def shards(self) -> int:
        return self.store.number_of_shards()

    def sweep_timestamps(self) -> dict[str, int]:
        return self.store.sweep_timestamps.all()

    def sweep_all(
        self,
        sweep_ts: Mapping[str, int] | None = None,
        *,
        batch_limit: int | None = None,
        max_iterations: int = 10_000,
        unpaced: bool = False,
    ) -> tuple[dict[str, int], list]:
        """Sweep every shard of both strategies until caught up (or blocked), at one sweep timestamp per
        strategy. Returns (sweep timestamps used, shard results). ``unpaced``: at the sweeper's own speed (a
        fixed rate of 0, unlimited) instead of the store's pace, for a test of a backlog so large that the
        pace's waits would be most of its time (the pace has tests of its own)."""
        ts = dict(sweep_ts) if sweep_ts is not None else self.sweep_timestamps()
        pace = {"latency_target": 0, "max_entries_per_second": 0} if unpaced else {}
        results = []
        for strategy in STRATEGIES:
            for shard in range(self.shards):
                r = self.store.sweeper.sweep_shard(
                    shard, strategy, sweep_ts=ts[strategy.value], batch_limit=batch_limit, max_iterations=max_iterations,
                    **pace,
                )
                assert r.status in ("caught_up", "blocked"), r
                results.append(r)
        return ts, results

    def iterate_all(self, *, batch_limit: int | None = None, iterations: int = 1) -> tuple[dict[str, int], list]:
        """A few single iterations on every shard and strategy (each computing its own sweep timestamp).
        Returns (highest sweep timestamp used per strategy, results)."""
        used = {s.value: 0 for s in STRATEGIES}
        results = []
        for _ in range(iterations):
            for strategy in STRATEGIES:
                for shard in range(self.shards):
                    r = self.store.sweeper.run_iteration(shard, strategy, batch_limit=batch_limit)
                    results.append(r)
                    if r.sweep_ts is not None:
                        used[strategy.value] = max(used[strategy.value], r.sweep_ts)
        return used, results

    def progress(self) -> dict[tuple[int, str], int]:
        p = self.store.queue.progress
        return {(sh, s.value): p.get_progress(sh, s) for s in STRATEGIES for sh in range(self.shards)}

    def drain(self) -> None:
        """Close what is open and sweep everything queued so far (a shared keyspace starts clean)."""
        self.close_all()
        self.store.queue.writer.invalidate_caches()  # an earlier test may have raised the shard count
        self.settle()
        # at the sweeper's own speed: what an earlier test left (the application pace's tests leave tens of
        # thousands of entries) is housekeeping, not the pace under test - at the safe pace it took a minute
        ts, results = self.sweep_all(unpaced=True)
        assert all(r.status == "caught_up" for r in results), results

    # ----- the three safety properties ---------------------------------------------------------------
    def readers(self) -> tuple[list[Reader], list[Reader]]:
        """(read-write readers: the open transactions and a transaction starting now;
        read-only readers: those recorded with :meth:`read_only_reader` plus one starting now)."""
        now = self.store.timestamps.fresh_timestamp()
        rw = [Reader(t.start_timestamp) for t in self.open if t.is_open] + [Reader(now)]
        ro = [Reader(ts, read_only=True) for ts in self.read_only_readers] + [Reader(now, read_only=True)]
        return rw, ro

    def read_only_reader(self) -> int:
        """Record the snapshot of a read-only transaction starting now (it stays a reader)."""
        ts = self.store.timestamps.fresh_timestamp()
        self.read_only_readers.append(ts)
        return ts

    def observe(self, tables: Iterable[str] | None = None):
        """What every reader sees. Read-only readers only look at CONSERVATIVE tables (they may not read
        THOROUGH ones)."""
        tables = list(tables) if tables is not None else self.live_tables()
        rw, ro = self.readers()
        cons = [t for t in tables if self.strategy_of(t) is CONS]
        return (
            oracle.observe(self.store, rw, tables),
            oracle.observe(self.store, ro, cons),
            tables,
        )

    def check(self, before, sweep_ts: Mapping[str, int]) -> None:
        """Compare ``before`` (from :meth:`observe`) with what the same readers see now."""
        rw_before, ro_before, tables = before
        rw_readers = list(rw_before.views)
        ro_readers = list(ro_before.views)
        cons = [t for t in tables if self.store.kvs.table_exists(t) and self.strategy_of(t) is CONS]
        live = [t for t in tables if self.store.kvs.table_exists(t)]
        rw_after = oracle.observe(self.store, rw_readers, live)
        ro_after = oracle.observe(self.store, ro_readers, cons)
        problems = oracle.compare(_only(rw_before, live), rw_after, dict(sweep_ts))
        problems += oracle.compare(_only(ro_before, cons), ro_after, dict(sweep_ts))
        assert not problems, "sweep changed what a protected reader sees:\n" + "\n".join(problems[:30])

    def assert_no_obsolete(self, sweep_ts: Mapping[str, int], tables: Iterable[str] | None = None) -> None:
        tables = list(tables) if tables is not None else self.live_tables()
        left = oracle.obsolete_versions(self.store, dict(sweep_ts), tables)
        assert not left, "obsolete versions left after a complete sweep:\n" + "\n".join(left[:30])

    def assert_no_leaks(self) -> None:
        cleaner = self.store.queue.cleaner
        leaks = {}
        for (shard, strategy), p in self.progress().items():
            rows = cleaner.queue_rows_below(shard, strategy, p)
            if rows:
                leaks[(shard, strategy, p)] = rows
        assert not leaks, f"queue rows left below progress: {leaks}"

    def queue_rows(self, shard: int, strategy: SweepStrategy, below: int):
        """Every queue row of the shard and strategy below ``below`` (a timestamp)."""
        return self.store.queue.cleaner.queue_rows_below(shard, strategy, below)

    def queue_columns(self, shard: int, strategy: SweepStrategy, start_ts: int) -> list[tuple[int, int]]:
        """(write_index, dedicated reference count or -1) of every cell of ``start_ts`` in its
        non-dedicated ``_sweep_cells`` row: write indexes 0, 1, ... inline, one negative reference else."""
        from airflow_atlas.sweep.queue.queue_tables import (
            SWEEPABLE_CELLS,
            decode_cells_column,
            decode_dedicated_reference,
            non_dedicated_row,
        )

        row = non_dedicated_row(start_ts // FINE, shard, strategy is CONS)
        out = []
        for col, value in self.store.kvs.get_row_columns(SWEEPABLE_CELLS, row):
            column = decode_cells_column(col)
            if column.timestamp_modulus == start_ts % FINE:
                count = decode_dedicated_reference(value.contents) if column.write_index < 0 else -1
                out.append((column.write_index, count))
        return out

    def versions(self, table: str, c: Cell) -> list[tuple[int, bytes]]:
        """Every stored version of one cell, ascending timestamp (sentinel = -1)."""
        found = self.store.kvs.get_all_timestamps(table, [c]).get(c, [])
        out = []
        for ts in found:
            value = self.store.kvs.get(table, {c: ts + 1}).get(c)
            out.append((ts, value.contents if value is not None else None))
        return out


def _only(obs: oracle.Observation, tables: list[str]) -> oracle.Observation:
    out = oracle.Observation(strategies={t: s for t, s in obs.strategies.items() if t in tables})
    for reader, views in obs.views.items():
        out.views[reader] = {t: v for t, v in views.items() if t in tables}
    return out
