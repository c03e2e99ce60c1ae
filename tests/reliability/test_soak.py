"""Soak: concurrent writers and the repeated scheduled sweep, for a bounded time, then a full audit.

Load: writer threads in this process and a writer in its own process commit transactions of mixed sizes
(1..5, 10..40, and 55..90 writes into one shard: dedicated queue rows), plus dead writers (enqueued and
written, never committed) and explicit aborts, across two CONSERVATIVE tables, a THOROUGH table and a
NOTHING table (4 shards). Two sweeper threads play the scheduled sweep: each round computes the sweep
timestamps once and sweeps every (shard, strategy) pair (contending for the shard locks; each pair's run
reconciles its queue under its lease, as in the DAG's sweep task). A reader thread keeps opening a read-write transaction,
reading every cell twice a few seconds apart while everything runs: both reads must be identical (sweep
never changes what an open transaction sees).

Audit at the end (writers stopped, sweepers stopped, one last sweep):

* the oracle: fresh readers read the same before and after the last sweep;
* nothing lost or wrong: the store, read by the oracle, holds exactly the latest committed value of every
  cell per the model of all committed transactions (threads and process); each rotating reader's reads
  equal the model's view at its start timestamp;
* no obsolete version left, the backlog below the sweep timestamp is empty, no queue row below progress;
* the report (printed, and written to ``test-artifacts/soak-report.json``): writes and transactions
  committed, entries swept, sweep rounds, the maximum sweep lag observed (in timestamps and, from
  timestamp/wall-clock samples, seconds), failures seen and the checks' results.

The default run has a short variant (12 s of load, prolonged by at most 90 s until the sweepers have swept
during the load and the reader has closed a snapshot: on a busy machine one snapshot can take the whole 12 s);
``-m reliability`` runs the long one (default 150 s; ``--soak-seconds N`` or ``ATLAS_SOAK_SECONDS=N``).
"""
from __future__ import annotations

import bisect
import dataclasses
import json
import os
import random
import subprocess
import sys
import threading
import time

import pytest

from airflow_atlas.errors import StoreUnavailableError, TransactionError
from airflow_atlas.oracle import ABSENT, Reader, compare, observe, obsolete_versions
from tests.conftest import REPO_ROOT

from .helpers import (
    CONFIG,
    STRATEGIES,
    Model,
    WriterLoop,
    WriterStats,
    backlog_below,
    dump,
    ensure_tables,
    leaked_queue_rows,
    model_mismatches,
    progress_of,
    sweep_all,
    versions,
)
from .writer_process import load

pytestmark = pytest.mark.cassandra

TABLES = {"soak_c1": "CONSERVATIVE", "soak_c2": "CONSERVATIVE", "soak_t": "THOROUGH", "soak_n": "NOTHING"}
SHARDS = 4
ROWS, COLUMNS = 200, 4
LOAD_GRACE_SECONDS = 90.0  # the most the load runs past its length for the sweepers and the reader


class Clock:
    """(fresh timestamp, wall time) samples, to turn a timestamp lag into seconds."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ts: list[int] = []
        self.wall: list[float] = []

    def sample(self, store) -> int:
        ts = store.timestamps.fresh_timestamp()
        with self.lock:
            self.ts.append(ts)
            self.wall.append(time.time())
        return ts

    def age(self, ts: int, now: float) -> float:
        """Seconds since ``ts`` was (at the latest) a fresh timestamp; 0 when it is newer than every sample."""
        with self.lock:
            i = bisect.bisect_left(self.ts, ts)
            return 0.0 if i >= len(self.ts) else max(0.0, now - self.wall[i])


class Sweeper:
    def __init__(self, store, name: str, clock: Clock, seed: int):
        self.store, self.name, self.clock = store, name, clock
        self.rng = random.Random(seed)
        self.rounds = 0
        self.entries_swept = 0
        self.cells_tombstoned = 0
        self.skipped_locked = 0
        self.failures: list[str] = []
        self.max_lag_ts = 0
        self.max_lag_seconds = 0.0
        self.errors: list[BaseException] = []

    def _lag(self, ts: dict) -> None:
        now = time.time()
        for (_shard, s), p in progress_of(self.store).items():
            self.max_lag_ts = max(self.max_lag_ts, ts[s] - 1 - p)
            self.max_lag_seconds = max(self.max_lag_seconds, self.clock.age(p + 1, now) - self.clock.age(ts[s], now))

    def run(self, stop: threading.Event) -> None:
        store = self.store
        try:
            while not stop.is_set():
                try:
                    self.clock.sample(store)
                    ts = store.sweep_timestamps.all()  # once per run, like compute_sweep_timestamps
                    self._lag(ts)
                    pairs = [(shard, s) for shard in range(store.number_of_shards()) for s in STRATEGIES]
                    self.rng.shuffle(pairs)
                    for shard, s in pairs:
                        r = store.sweeper.sweep_shard(shard, s, sweep_ts=ts[s], holder=self.name, batch_limit=500, max_iterations=20)
                        if r.status == "skipped_locked":
                            self.skipped_locked += 1
                            continue
                        self.entries_swept += r.counts.entries_read
                        self.cells_tombstoned += r.counts.cells_tombstoned
                    self.rounds += 1
                    self._lag(ts)
                except StoreUnavailableError as exc:  # a retried task: the next round takes over
                    self.failures.append(str(exc)[:200])
        except BaseException as exc:  # anything else is a finding
            self.errors.append(exc)


class RotatingReader:
    """Opens a transaction, reads every cell, waits, reads again (both must match), closes it; repeats."""

    def __init__(self, store, domain, hold_seconds: float):
        self.store, self.domain, self.hold = store, domain, hold_seconds
        self.snapshots: list[tuple[int, dict]] = []
        self.unstable: list[str] = []
        self.retried_reads = 0
        self.errors: list[BaseException] = []

    def _read(self, txn) -> dict:
        for _ in range(20):
            try:
                return {t: txn.get(t, self.domain) for t in TABLES}
            except TransactionError:  # a writer still committing past the wait bound: read again
                self.retried_reads += 1
        raise AssertionError("could not read a snapshot")

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                txn = self.store.transactions.begin()
                first = self._read(txn)
                stop.wait(self.hold)
                second = self._read(txn)
                if first != second:
                    self.unstable.append(f"reader {txn.start_timestamp}: reads changed while it was open")
                self.snapshots.append((txn.start_timestamp, first))
                txn.abort()
        except BaseException as exc:
            self.errors.append(exc)


def _soak(stores, seconds: float, artifacts_dir, *, writer_threads: int, variant: str) -> dict:
    started = time.monotonic()
    store, url = stores(config=dataclasses.replace(CONFIG, lock_lease_seconds=20.0), shards=SHARDS)
    ensure_tables(store, TABLES)
    model = Model()
    clock = Clock()
    stop_writers, stop_sweepers = threading.Event(), threading.Event()
    loops = [
        WriterLoop(store, model, TABLES, seed=1000 + i, rows=ROWS, columns=COLUMNS, shards_for_large=SHARDS)
        for i in range(writer_threads)
    ]
    sweepers = [Sweeper(store, f"soak-sweeper-{i}", clock, seed=i) for i in range(2)]
    reader = RotatingReader(store, loops[0].domain, hold_seconds=min(4.0, seconds / 5))
    out_file = artifacts_dir / f"soak-writer-{variant}.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.writer_process", url, str(seconds), "77", json.dumps(TABLES),
         str(SHARDS), str(out_file)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    threads = [threading.Thread(target=loop.run, args=(stop_writers,), daemon=True) for loop in loops]
    threads.append(threading.Thread(target=reader.run, args=(stop_writers,), daemon=True))
    threads += [threading.Thread(target=s.run, args=(stop_sweepers,), daemon=True) for s in sweepers]
    load_started = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(seconds)
    # On a busy machine the reader's first snapshot can take the whole load: its open transaction holds the
    # sweep timestamp below every commit, so nothing is sweepable yet. Keep the load on, boundedly, until the
    # sweepers have swept during it and the reader has closed a snapshot.
    deadline = time.monotonic() + LOAD_GRACE_SECONDS
    while time.monotonic() < deadline and not (
        sum(s.entries_swept for s in sweepers) > 0 and len(reader.snapshots) > 0
    ):
        time.sleep(0.2)
    stop_writers.set()
    process_output, _ = process.communicate(timeout=600)
    for t in threads[: writer_threads + 1]:
        t.join(300)
    stop_sweepers.set()
    for t in threads[writer_threads + 1 :]:
        t.join(600)
    load_seconds = time.monotonic() - load_started
    assert not any(t.is_alive() for t in threads), "a writer, reader or sweeper thread hung"
    assert process.returncode == 0, process_output[-3000:]
    committed, process_stats = load(str(out_file))
    model.extend(committed)
    model.resolve(store)
    for s in sweepers:
        assert s.errors == [], s.errors
    assert reader.errors == [], reader.errors

    # Audit: one last sweep at one fixed timestamp, the oracle around it.
    ts = store.sweep_timestamps.all()
    fresh = store.timestamps.fresh_timestamp()
    readers = [Reader(fresh), Reader(fresh, read_only=True)]
    before = observe(store, readers)
    versions_before = versions(store, TABLES)
    _, final = sweep_all(store, ts, batch_limit=5000)
    final_entries = sum(r.counts.entries_read for r in final)
    checks = {
        "oracle_violations": compare(before, observe(store, readers), ts),
        "obsolete_versions_left": obsolete_versions(store, ts)[:20],
        "backlog_below_sweep_ts": backlog_below(store, ts),
        "leaked_queue_rows": leaked_queue_rows(store)[:20],
        "model_mismatches": model_mismatches(store, model, store.timestamps.fresh_timestamp(), TABLES),
        "unstable_open_readers": reader.unstable[:20],
        "reader_vs_model": _reader_mismatches(model, reader.snapshots),
    }
    stats = WriterStats()
    for loop in loops:
        stats.add(loop.stats)
    report = {
        "variant": variant,
        "load_seconds": round(load_seconds, 1),
        "total_seconds": round(time.monotonic() - started, 1),
        "tables": TABLES,
        "shards": SHARDS,
        "writers": {"threads": writer_threads, "processes": 1},
        "transactions_committed": stats.committed + process_stats.get("committed", 0),
        "writes_committed": model.writes_committed,
        "large_transactions_committed": stats.large + process_stats.get("large", 0),
        "dead_writers": stats.dead_writers + process_stats.get("dead_writers", 0),
        "aborted": stats.aborted + process_stats.get("aborted", 0),
        "conflicts": stats.conflicts + process_stats.get("conflicts", 0),
        "writer_failures": stats.failed + process_stats.get("failed", 0),
        "entries_swept": sum(s.entries_swept for s in sweepers) + final_entries,
        "entries_swept_during_load": sum(s.entries_swept for s in sweepers),
        "entries_swept_by_final_sweep": final_entries,
        "final_sweep_blocked_by": {f"{r.strategy}/{r.shard}": r.blocked_by for r in final if r.status == "blocked"},
        "cells_tombstoned": sum(s.cells_tombstoned for s in sweepers) + sum(r.counts.cells_tombstoned for r in final),
        "sweep_rounds": sum(s.rounds for s in sweepers),
        "pairs_skipped_locked": sum(s.skipped_locked for s in sweepers),
        "sweep_failures_retried": sum(len(s.failures) for s in sweepers),
        "max_sweep_lag_timestamps": max(s.max_lag_ts for s in sweepers),
        "max_sweep_lag_seconds": round(max(s.max_lag_seconds for s in sweepers), 2),
        "open_readers_checked": len(reader.snapshots),
        "versions_before_final_sweep": versions_before,
        "versions_after_final_sweep": versions(store, TABLES),
        "checks": checks,
        "ok": not any(checks.values()),
    }
    dump(artifacts_dir / "soak-report.json", report)
    print("SOAK REPORT", json.dumps(report, indent=1, sort_keys=True))
    assert report["ok"], {k: v for k, v in checks.items() if v}
    assert report["transactions_committed"] > 0 and report["large_transactions_committed"] > 0
    assert report["entries_swept_during_load"] > 0 and len(reader.snapshots) > 0
    return report


def _reader_mismatches(model: Model, snapshots) -> list[str]:
    problems = []
    for start, snapshot in snapshots:
        expected = model.view(start, TABLES)
        for table, cells in snapshot.items():
            want = {c: v for c, v in expected[table].items() if v is not ABSENT}
            if cells != want:
                diff = sorted(set(cells.items()) ^ set(want.items()))[:3]
                problems.append(f"reader {start} {table}: {diff}")
    return problems[:20]


def test_soak_short(shared_stores, artifacts_dir):
    _soak(shared_stores, float(os.environ.get("ATLAS_SOAK_SHORT_SECONDS", "12")), artifacts_dir,
          writer_threads=2, variant="short")


@pytest.mark.reliability
def test_soak(shared_stores, artifacts_dir, soak_seconds):
    _soak(shared_stores, soak_seconds, artifacts_dir, writer_threads=3, variant="long")
