"""Benchmark 5: peak resident memory of one targeted-sweep shard iteration with a full batch.

Per repetition the parent writes a backlog of exactly ``batch`` queue entries into one fine partition of
shard 0 (committed transactions of 1,000 writes, so the reader also follows dedicated rows), then starts
a fresh Python process that opens the store, records its resident set size (RSS), resets the kernel's
peak-RSS mark (``/proc/self/clear_refs``), runs ONE ``run_iteration(shard=0, CONSERVATIVE,
batch_limit=batch)`` - read the batch, look up commit timestamps, write sentinels and ranged tombstones,
clean the queue, persist progress - and reads the peak (``VmHWM``) again. The figure is the process's
peak RSS over its life (imports, driver, store and the iteration: what an executor process needs) / the
512 MB budget; the iteration's own increment (its peak - RSS before it) is reported beside it.
``ru_maxrss`` is not used: Linux carries it over from the parent across fork+exec.
"""
from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import time

from bench.lib.load import cell, commit_synthetic, value
from bench.lib.log import log
from bench.lib.machine import load_average, machine_info
from bench.lib.paths import REPO_ROOT
from bench.lib.results import Stopwatch, goal, result_document
from bench.lib.stats import median
from bench.lib.stores import cassandra_url, drop_store, open_backend_store
from bench.lib.timing import timed

NAME = "memory"
BUDGET_MB = 512
TXN_WRITES = 1_000


def _vm(field: str) -> int | None:
    """``VmHWM`` (peak resident set of this process image) or ``VmRSS`` in bytes, from /proc/self/status."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _child(url: str, sweep_ts: int, batch: int) -> None:
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.kvs.tables import SweepStrategy
    from airflow_atlas.store import AtlasStore

    store = AtlasStore.open(url, StoreConfig(batch_limit=batch))
    _built = (store.sweeper, store.queue)  # build the components before measuring the baseline
    peak_open = _vm("VmHWM")
    rss_before = _vm("VmRSS")
    # Reset the peak to the current RSS, so the peak read afterwards is the iteration's own.
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        reset = True
    except OSError:
        reset = False
    started = time.perf_counter()
    result = store.sweeper.run_iteration(0, SweepStrategy.CONSERVATIVE, sweep_ts=sweep_ts, batch_limit=batch)
    seconds = time.perf_counter() - started
    peak_iteration = _vm("VmHWM")
    store.close()
    print(
        json.dumps(
            {
                "peak_before_iteration_bytes": peak_open,
                "rss_before_bytes": rss_before,
                "peak_reset": reset,
                "peak_iteration_bytes": peak_iteration,
                "peak_rss_bytes": max(peak_open or 0, peak_iteration or 0),
                "ru_maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "iteration_seconds": seconds,
                "entries_read": result.counts.entries_read,
                "cells_tombstoned": result.counts.cells_tombstoned,
                "status": result.status,
            }
        )
    )


def _align_to_fresh_partition(store, needed: int) -> None:
    """Make sure the next ``needed`` timestamps stay inside one fine partition (one reader batch)."""
    from airflow_atlas.sweep.queue.constants import FINE_PARTITION

    bound = store.timestamps.current_bound()
    if bound % FINE_PARTITION + needed >= FINE_PARTITION - 10:
        store.timestamps.fresh_timestamps(FINE_PARTITION - bound % FINE_PARTITION + 1)


def run(*, quick: bool, reps: int, backend: str = "cassandra", tmpdir: str = "/tmp", name: str = NAME) -> dict:
    from airflow_atlas.kvs.tables import SweepStrategy


    watch = Stopwatch()
    batch = 5_000 if quick else 100_000
    store = open_backend_store(backend, "mem", tmpdir)
    url = (
        cassandra_url(store.kvs.keyspace) if backend == "cassandra" else f"sqlite:///{store.kvs.path}"
    )
    runs: list[dict] = []
    try:
        machine = machine_info(store.kvs.session if backend == "cassandra" else None)
        store.create_table("mem", SweepStrategy.CONSERVATIVE)
        rng = random.Random(9)
        offset = 0
        for rep in range(reps):
            _align_to_fresh_partition(store, 4 * batch // TXN_WRITES + 100)
            cells = [cell(offset + i, "mem") for i in range(batch)]
            offset += batch
            values = {c: value(rng) for c in cells}
            items = list(values.items())
            txns = [dict(items[i : i + TXN_WRITES]) for i in range(0, len(items), TXN_WRITES)]
            rec: dict = {"rep": rep, "batch": batch, "load_avg_1m": load_average()["1m"]}
            log(f"{name}: rep {rep}: loading {batch:,} queue entries")
            with timed(rec, "load_seconds"):
                commit_synthetic(store, "mem", txns, threads=4 if backend == "cassandra" else 1)
            sweep_ts = store.sweep_timestamps.immutable_timestamp()
            log(f"{name}: rep {rep}: one iteration in a fresh process")
            proc = subprocess.run(
                [sys.executable, "-m", "bench.memory", "--child", url, str(sweep_ts), str(batch)],
                capture_output=True, text=True, cwd=str(REPO_ROOT), timeout=1800,
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            )
            if proc.returncode != 0:
                raise RuntimeError(f"memory child failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
            child = json.loads(proc.stdout.strip().splitlines()[-1])
            rec.update(child)
            rec["peak_rss_mb"] = child["peak_rss_bytes"] / 2**20
            rec["rss_before_mb"] = child["rss_before_bytes"] / 2**20
            rec["iteration_increment_mb"] = (child["peak_iteration_bytes"] - child["rss_before_bytes"]) / 2**20
            rec["peak_over_budget"] = rec["peak_rss_mb"] / BUDGET_MB
            rec["check"] = child["entries_read"] == batch and child["cells_tombstoned"] == batch
            runs.append(rec)
    finally:
        drop_store(store)
    results = {
        "batch": batch,
        "peak_rss_mb": median(r["peak_rss_mb"] for r in runs),
        "rss_before_iteration_mb": median(r["rss_before_mb"] for r in runs),
        "iteration_increment_mb": median(r["iteration_increment_mb"] for r in runs),
        "peak_over_budget": median(r["peak_over_budget"] for r in runs),
        "iteration_seconds": median(r["iteration_seconds"] for r in runs),
        "bytes_per_entry": median((r["peak_iteration_bytes"] - r["rss_before_bytes"]) / batch for r in runs),
        "checks_ok": all(r["check"] for r in runs),
        "repetitions": len(runs),
    }
    goals = [goal(f"peak RSS of one iteration with a {batch:,}-entry batch", results["peak_rss_mb"], BUDGET_MB, "<=", "MB")]
    return result_document(
        name, quick=quick, backend=backend, watch=watch, machine=machine,
        params={"batch": batch, "transaction_writes": TXN_WRITES, "budget_mb": BUDGET_MB, "repetitions": reps, "strategy": "CONSERVATIVE"},
        results=results, goals=goals, runs=runs, method=__doc__,
    )
