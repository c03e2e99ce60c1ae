"""Shared machinery of the reliability suite.

* :class:`Model`: an independent record of what writers committed (start, commit, values); the value a
  reader at timestamp ``ts`` must see follows from it alone (MVCC rule: the committed write with the
  greatest start timestamp among writers committed before ``ts``). Compared with the store through
  :func:`airflow_atlas.oracle.observe` (the oracle's own implementation of the read rule), so a sweep that
  removed a visible version, or left wrong data visible, shows up.
* :class:`WriterLoop`: commits transactions of mixed sizes (1..5, 10..40, and 55..90 writes of one shard:
  dedicated queue rows) across tables, plus dead writers and explicit aborts, recording into a Model.
  Used by writer threads and by the writer subprocess (``python -m tests.reliability.writer_process``).
* :func:`sweep_all`, :func:`leaked_queue_rows`, :func:`backlog_below`: sweep every shard/strategy and check
  that the queue is empty below progress and below the sweep timestamp.
"""
from __future__ import annotations

import json
import random
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from airflow_atlas import oracle
from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import (
    StoreUnavailableError,
    TransactionConflictError,
    TransactionError,
)
from airflow_atlas.kvs.api import Cell
from airflow_atlas.oracle import ABSENT, Reader
from airflow_atlas.store import AtlasStore
from airflow_atlas.sweep.commits import ABORTED
from airflow_atlas.sweep.queue.constants import FINE_PARTITION, MAX_BATCH_LIMIT
from airflow_atlas.sweep.queue.partitions import coarse, fine
from airflow_atlas.sweep.queue.queue_tables import (
    SWEEPABLE_CELLS,
    SWEEPABLE_TIMESTAMPS,
    decode_cells_row,
    decode_timestamps_row,
)
from airflow_atlas.sweep.queue.shards import shard_for
from airflow_atlas.workload import dead_writer, stage_writes

STRATEGIES = ("CONSERVATIVE", "THOROUGH")

# unreadable window 0: CONSERVATIVE tables are sweepable right away (no sleeping in tests); long
# transaction leases so readers kept open on purpose stay registered.
CONFIG = StoreConfig(
    unreadable_window_seconds=0.0,
    punch_interval_seconds=0.2,
    lock_lease_seconds=10.0,
    transaction_lease_seconds=600.0,
    running_writer_wait_seconds=2.0,
)


def open_store(url: str, config: StoreConfig | None = None, shards: int = 1) -> AtlasStore:
    store = AtlasStore.open(url, config=config or CONFIG)
    store.initialize(shards=shards)
    return store


def cell(i: int, col: int = 0) -> Cell:
    return Cell(f"row{i:05d}".encode(), f"c{col:02d}".encode())


# ----- the model of committed data ---------------------------------------------------------------------
@dataclass
class Committed:
    start: int
    commit: int
    writes: dict  # table -> {Cell: bytes} (b"" = delete)

    def to_json(self) -> dict:
        return {
            "start": self.start,
            "commit": self.commit,
            "writes": {t: [[c.row.hex(), c.col.hex(), v.hex()] for c, v in cells.items()] for t, cells in self.writes.items()},
        }

    @classmethod
    def from_json(cls, data: dict) -> Committed:
        writes = {
            t: {Cell(bytes.fromhex(r), bytes.fromhex(c)): bytes.fromhex(v) for r, c, v in cells}
            for t, cells in data["writes"].items()
        }
        return cls(int(data["start"]), int(data["commit"]), writes)


class Model:
    """What writers committed; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.committed: list[Committed] = []
        self.uncertain: list[tuple[int, dict]] = []  # commit raised an unknown-outcome error

    def record(self, start: int, commit: int, writes: Mapping) -> None:
        with self._lock:
            self.committed.append(Committed(start, commit, {t: dict(v) for t, v in writes.items()}))

    def record_uncertain(self, start: int, writes: Mapping) -> None:
        with self._lock:
            self.uncertain.append((start, {t: dict(v) for t, v in writes.items()}))

    def extend(self, items: Iterable[Committed]) -> None:
        with self._lock:
            self.committed.extend(items)

    def resolve(self, store: AtlasStore) -> None:
        """Decide transactions whose commit outcome was unknown from the transactions table."""
        with self._lock:
            pending, self.uncertain = self.uncertain, []
        if not pending:
            return
        outcomes = store.transaction_service.get_many([s for s, _ in pending])
        for start, writes in pending:
            commit = outcomes.get(start)
            if commit is not None and commit != -1:
                self.record(start, commit, writes)

    def view(self, ts: int, tables: Iterable[str]) -> dict[str, dict[Cell, bytes | str]]:
        """{table: {cell: value or ABSENT}} a reader at ``ts`` must see (cells ever written)."""
        tables = list(tables)
        best: dict[tuple[str, Cell], tuple[int, bytes]] = {}
        with self._lock:
            items = list(self.committed)
        for txn in items:
            for table, cells in txn.writes.items():
                if table not in tables:
                    continue
                visible = txn.commit < ts and txn.start < ts
                for c, value in cells.items():
                    key = (table, c)
                    if key not in best:
                        best[key] = (-1, b"")  # written at some point: ABSENT unless visible
                    if visible and txn.start > best[key][0]:
                        best[key] = (txn.start, value)
        out: dict[str, dict] = {t: {} for t in tables}
        for (table, c), (_, value) in best.items():
            out[table][c] = ABSENT if value == b"" else value
        return out

    @property
    def writes_committed(self) -> int:
        with self._lock:
            return sum(len(cells) for txn in self.committed for cells in txn.writes.values())


def store_view(store: AtlasStore, ts: int, tables: Iterable[str]) -> dict[str, dict]:
    reader = Reader(ts)
    return oracle.observe(store, [reader], list(tables)).views.get(reader, {})


def model_mismatches(store: AtlasStore, model: Model, ts: int, tables: Iterable[str], limit: int = 20) -> list[str]:
    """Cells where the store (read by the oracle at ``ts``) disagrees with the model."""
    tables = list(tables)
    expected = model.view(ts, tables)
    seen = store_view(store, ts, tables)
    problems = []
    for table in tables:
        want, got = expected.get(table, {}), seen.get(table, {})
        for c in set(want) | set(got):
            a, b = want.get(c, ABSENT), got.get(c, ABSENT)
            if a != b:
                problems.append(f"{table} {c} @ {ts}: model {a!r:.40} store {b!r:.40}")
                if len(problems) >= limit:
                    return problems
    return problems


# ----- writers ---------------------------------------------------------------------------------------------
@dataclass
class WriterStats:
    committed: int = 0
    writes_committed: int = 0
    large: int = 0  # committed transactions with > 50 writes in one shard
    dead_writers: int = 0
    aborted: int = 0
    conflicts: int = 0
    failed: int = 0
    errors: list = field(default_factory=list)

    def add(self, other: WriterStats) -> None:
        for name in ("committed", "writes_committed", "large", "dead_writers", "aborted", "conflicts", "failed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.errors.extend(other.errors)

    def to_json(self) -> dict:
        data = dict(vars(self))
        data["errors"] = [str(e)[:300] for e in self.errors[:10]]
        return data


class WriterLoop:
    """Commits a mix of transactions until ``stop`` is set (or ``transactions`` were attempted).

    ``tables``: {name: strategy}; cells are ``cell(0..rows-1, 0..columns-1)``. Large transactions (55..90
    writes) take cells of ONE shard of one table (under ``shards_for_large`` shards), so the queue gets
    dedicated rows whatever the shard count."""

    def __init__(
        self,
        store: AtlasStore,
        model: Model,
        tables: Mapping[str, str],
        *,
        seed: int,
        rows: int = 150,
        columns: int = 4,
        shards_for_large: int = 1,
        dead_ratio: float = 0.04,
        abort_ratio: float = 0.04,
        large_ratio: float = 0.08,
        medium_ratio: float = 0.15,
        on_commit=None,
    ):
        self.store = store
        self.model = model
        self.tables = dict(tables)
        self.rng = random.Random(seed)
        self.rows, self.columns = rows, columns
        self.dead_ratio, self.abort_ratio = dead_ratio, abort_ratio
        self.large_ratio, self.medium_ratio = large_ratio, medium_ratio
        self.on_commit = on_commit
        self.stats = WriterStats()
        self.domain = [cell(r, c) for r in range(rows) for c in range(columns)]
        self.by_shard: dict[tuple[str, int], list[Cell]] = defaultdict(list)
        for table in self.tables:
            for c in self.domain:
                self.by_shard[(table, shard_for(table, c, shards_for_large))].append(c)

    def _writes(self) -> dict[str, dict[Cell, bytes]]:
        rng = self.rng
        roll = rng.random()
        tables = list(self.tables)
        out: dict[str, dict[Cell, bytes]] = {}
        if roll < self.large_ratio:
            table = rng.choice([t for t in tables if self.tables[t] != "NOTHING"] or tables)
            key = rng.choice([k for k in self.by_shard if k[0] == table])
            pool = self.by_shard[key]
            cells = rng.sample(pool, min(len(pool), rng.randint(55, 90)))
            out[table] = {c: self._value(rng) for c in cells}
            return out
        n = rng.randint(10, 40) if roll < self.large_ratio + self.medium_ratio else rng.randint(1, 5)
        for _ in range(n):
            table = rng.choice(tables)
            out.setdefault(table, {})[rng.choice(self.domain)] = self._value(rng)
        return out

    @staticmethod
    def _value(rng) -> bytes:
        return b"" if rng.random() < 0.12 else rng.randbytes(rng.randint(1, 24))

    def one(self) -> None:
        writes = self._writes()
        size = sum(len(v) for v in writes.values())
        roll = self.rng.random()
        store = self.store
        try:
            if roll < self.dead_ratio:
                dead_writer(store, writes)
                self.stats.dead_writers += 1
                return
            txn = store.transactions.begin()
            stage_writes(txn, writes)
            if roll < self.dead_ratio + self.abort_ratio:
                txn.abort()
                self.stats.aborted += 1
                return
            try:
                commit = txn.commit()
            except TransactionConflictError:
                self.stats.conflicts += 1
                return
            except StoreUnavailableError:
                self.model.record_uncertain(txn.start_timestamp, writes)
                raise
            self.model.record(txn.start_timestamp, commit, writes)
            self.stats.committed += 1
            self.stats.writes_committed += size
            if size > 50:
                self.stats.large += 1
            if self.on_commit is not None:
                self.on_commit(txn.start_timestamp, commit, writes)
        except TransactionError as exc:  # aborted by a reader that rolled it back, lease lost: not committed
            self.stats.failed += 1
            self.stats.errors.append(exc)
        except StoreUnavailableError as exc:
            self.stats.failed += 1
            self.stats.errors.append(exc)

    def run(self, stop: threading.Event, transactions: int | None = None) -> WriterStats:
        done = 0
        while not stop.is_set() and (transactions is None or done < transactions):
            self.one()
            done += 1
        return self.stats


def ensure_tables(store: AtlasStore, tables: Mapping[str, str]) -> None:
    for name, strategy in tables.items():
        if not store.kvs.table_exists(name):
            store.create_table(name, strategy)


# ----- sweeping and queue checks ------------------------------------------------------------------------
def sweep_all(
    store: AtlasStore,
    sweep_ts: Mapping[str, int] | None = None,
    *,
    holder: str | None = None,
    batch_limit: int | None = None,
    max_iterations: int = 100_000,
) -> tuple[dict[str, int], list]:
    """Sweep every shard of both strategies until caught up or blocked. Returns (sweep timestamps, results)."""
    ts = dict(sweep_ts) if sweep_ts is not None else store.sweep_timestamps.all()
    results = []
    for strategy in STRATEGIES:
        for shard in range(store.number_of_shards()):
            r = store.sweeper.sweep_shard(
                shard, strategy, sweep_ts=ts[strategy], holder=holder, batch_limit=batch_limit, max_iterations=max_iterations
            )
            assert r.status in ("caught_up", "blocked"), r
            results.append(r)
    return ts, results


def progress_of(store: AtlasStore) -> dict[tuple[int, str], int]:
    return {
        (shard, s): store.queue.progress.get_progress(shard, s)
        for shard in range(store.number_of_shards())
        for s in STRATEGIES
    }


def leaked_queue_rows(store: AtlasStore) -> list[str]:
    """Queue rows wholly below their shard's progress (one scan of each queue table for all pairs)."""
    progress = progress_of(store)
    leaks = []
    seen: set[bytes] = set()
    for c, _ts, _v in store.kvs.scan(SWEEPABLE_CELLS, page_size=1000):
        if c.row in seen:
            continue
        seen.add(c.row)
        try:
            row = decode_cells_row(c.row)
        except Exception:
            leaks.append(f"undecodable cells row {c.row.hex()}")
            continue
        m = row.metadata
        p = progress.get((m.shard, "CONSERVATIVE" if m.conservative else "THOROUGH"))
        if p is None:
            leaks.append(f"cells row of shard {m.shard} >= shard count")
            continue
        partition = row.timestamp_partition // FINE_PARTITION if m.dedicated_row else row.timestamp_partition
        if partition < fine(p + 1):
            kind = f"dedicated row of {row.timestamp_partition}" if m.dedicated_row else f"cells row of fine {partition}"
            leaks.append(f"{kind} (shard {m.shard}, conservative {m.conservative}) below progress {p}")
    seen.clear()
    for c, _ts, _v in store.kvs.scan(SWEEPABLE_TIMESTAMPS, page_size=1000):
        if c.row in seen:
            continue
        seen.add(c.row)
        try:
            row = decode_timestamps_row(c.row)
        except Exception:
            leaks.append(f"undecodable timestamps row {c.row.hex()}")
            continue
        p = progress.get((row.shard, "CONSERVATIVE" if row.conservative else "THOROUGH"))
        if p is None:
            leaks.append(f"timestamps row of shard {row.shard} >= shard count")
        elif row.coarse_partition < coarse(p + 1):
            leaks.append(f"timestamps row of coarse {row.coarse_partition} (shard {row.shard}) below progress {p}")
    return leaks


def first_blocking_start(store: AtlasStore, shard: int, strategy: str, progress: int, sweep_ts: int) -> int | None:
    """The lowest start timestamp queued in ``(progress, sweep_ts)`` whose writer committed at or after
    ``sweep_ts``, or None. Such a writer spanned the sweep timestamp (likely for CONSERVATIVE, whose sweep
    timestamp trails by the unreadable window): it must not be swept yet, and the sweeper may not move
    past it, so entries from it up to ``sweep_ts`` legitimately wait (spec 000, step 3). Worked out here
    from the queue and the transactions table alone, without the sweeper's own bookkeeping."""
    cursor = progress
    while cursor < sweep_ts - 1:
        batch = store.queue.reader.read_batch(shard, strategy, cursor, sweep_ts, MAX_BATCH_LIMIT)
        if batch.fine_partition is None:
            return None
        starts = sorted({w.start_ts for w in batch.entries})
        commits = dict(store.transaction_service.get_many(starts)) if starts else {}
        for start in starts:
            commit = commits.get(start)
            if commit is not None and commit != ABORTED and commit >= sweep_ts:
                return start
        if batch.read_to_end:
            cursor = (batch.fine_partition + 1) * FINE_PARTITION - 1
        else:
            cursor = batch.last_start_ts
    return None


def backlog_below(store: AtlasStore, sweep_ts: Mapping[str, int]) -> dict[str, int]:
    """Queued entries still waiting where a sweep at ``sweep_ts`` must have reached, per pair with any:
    below the sweep timestamp, or below the first writer that committed at or after it
    (:func:`first_blocking_start`)."""
    out = {}
    for (shard, s), p in progress_of(store).items():
        limit = first_blocking_start(store, shard, s, p, sweep_ts[s]) or sweep_ts[s]
        n = store.queue.reader.count_entries(shard, s, p, limit)
        if n:
            out[f"{s}/{shard}"] = n
    return out


def versions(store: AtlasStore, tables: Iterable[str]) -> int:
    return sum(1 for t in tables for _ in store.kvs.scan(t))


def dump(path, data) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True, default=str)
        f.write("\n")


def wait_until(predicate, timeout: float, what: str, interval: float = 0.1):
    """Poll ``predicate`` (a guard against hanging, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting ({timeout:.0f}s) for {what}")
        time.sleep(interval)
