"""Benchmark: commit time of large transactions (issue 16, item 3) on the local node.

One transaction writes N new cells of 32-byte values to a CONSERVATIVE table (N = 1,000, 10,000 and
100,000; quick mode 1,000 and 5,000) and commits; the figure is the wall time of ``commit()`` (the
puts are buffered and cost nothing), median of the repetitions, with the time spent in each phase of the
commit protocol: conflict checks (before and after the write, both in ``_check_conflicts``), enqueueing
to the sweep queue, and writing the cells. Two shapes, every size: rows of 100 cells (a bulk load: the
conflict checks read one row slice per row) and one cell per row (the checks read the cells of one column
``IN_READ_PARTITIONS`` rows per request). Each repetition writes new cells, so every commit does the same
work; sizes are interleaved.

Check reads, before/after in one run: after each one-cell-per-row commit of the middle size, the version
timestamps of its cells (what the pre-write check reads) are read twice, interleaved, on the same node
and load: with ``get_all_timestamps`` (multi-row reads) and with the former strategy, one prepared
``get_ts`` query per cell run concurrently through the service's own statement and concurrency. Their
ratio is ``check_reads.speedup`` (former / current); absolute times move with the shared machine's load.

The phases are measured by wrapping the methods of this process's objects in the benchmark (nothing in
the engine is instrumented). The goal of the issue: a 100,000-cell commit under 60 s on the local node.
"""
from __future__ import annotations

import collections
import time

from bench.lib.log import log
from bench.lib.machine import load_average, machine_info
from bench.lib.results import Stopwatch, goal, result_document
from bench.lib.stats import median, rotated
from bench.lib.stores import drop_store, open_backend_store
from bench.lib.timing import time_calls

NAME = "large_commit"
PER_ROW = 100


def _sizes(quick: bool) -> list[int]:
    return [1_000, 5_000] if quick else [1_000, 10_000, 100_000]


def run(*, quick: bool, reps: int, backend: str = "cassandra", tmpdir: str = "/tmp", name: str = NAME) -> dict:
    from airflow_atlas.kvs.api import Cell
    from airflow_atlas.kvs.tables import SweepStrategy
    from airflow_atlas.transactions.commit import CommitProtocol


    watch = Stopwatch()
    sizes = _sizes(quick)
    shapes = {"rows_of_100": PER_ROW, "one_per_row": 1}
    store = open_backend_store(backend, "lc", tmpdir, shards=8)
    runs: list[dict] = []
    reads: list[dict] = []
    original_check = CommitProtocol._check_conflicts
    try:
        machine = machine_info(store.kvs.session if backend == "cassandra" else None)
        store.create_table("lc", SweepStrategy.CONSERVATIVE)
        manager = store.transactions
        times: dict = collections.defaultdict(float)
        time_calls(CommitProtocol, "_check_conflicts", "conflict_checks_s", times)
        time_calls(manager.sweep_queue, "enqueue", "enqueue_s", times)
        time_calls(store.kvs, "multi_put", "writes_s", times)
        counter = [0]
        manager.run(lambda txn: txn.put("lc", {Cell(b"warm", b"up"): b"x"}))  # prepared statements, caches
        for rep in range(reps):
            for n in rotated(sizes, rep):
                for shape, per_row in shapes.items():
                    base = counter[0]
                    counter[0] += n
                    cells = {Cell(b"r%09d" % ((base + i) // per_row), b"c%03d" % ((base + i) % per_row)): b"v" * 32
                             for i in range(n)}
                    txn = manager.begin()
                    txn.put("lc", cells)
                    times.clear()
                    started = time.perf_counter()
                    txn.commit()
                    took = time.perf_counter() - started
                    rec = {"rep": rep, "cells": n, "shape": shape, "commit_s": took, **dict(times),
                           "load_avg_1m": load_average()["1m"]}
                    runs.append(rec)
                    log(f"{name}: rep {rep} {n:,} cells ({shape}) commit {took:.2f}s "
                          + " ".join(f"{k}={v:.2f}" for k, v in times.items()))
                    if backend == "cassandra" and per_row == 1 and n == sizes[1]:
                        reads.append(_compare_check_reads(store.kvs, "lc", list(cells)))
                        log(f"{name}: check reads of {n:,} cells: per cell {reads[-1]['per_cell_s']:.2f}s, "
                              f"multi-row {reads[-1]['multi_row_s']:.2f}s")
    finally:
        CommitProtocol._check_conflicts = original_check
        drop_store(store)
    results = {}
    for shape in shapes:
        for n in sizes:
            rs = [r for r in runs if r["cells"] == n and r["shape"] == shape]
            if not rs:
                continue
            results[f"{shape}/{n}"] = {
                "cells": n,
                "shape": shape,
                **{k: median(r.get(k, 0.0) for r in rs) for k in ("commit_s", "conflict_checks_s", "enqueue_s", "writes_s")},
                "cells_per_s": n / median(r["commit_s"] for r in rs),
                "repetitions": len(rs),
            }
    goals = [goal(f"commit of {sizes[-1]:,} cells ({shape.replace('_', ' ')})", results[f"{shape}/{sizes[-1]}"]["commit_s"],
                    60.0, "<=", "s", binding=not quick) for shape in shapes]
    doc = result_document(
        name, quick=quick, backend=backend, watch=watch, machine=machine,
        params={"sizes": sizes, "shapes": shapes, "value_bytes": 32, "repetitions": reps, "shards": 8,
                "strategy": "CONSERVATIVE"},
        results=results, goals=goals, runs=runs, method=__doc__,
    )
    if reads:
        per_cell, multi_row = median(r["per_cell_s"] for r in reads), median(r["multi_row_s"] for r in reads)
        doc["check_reads"] = {"cells": sizes[1], "per_cell_s": per_cell, "multi_row_s": multi_row,
                              "speedup": per_cell / multi_row, "repetitions": len(reads), "runs": reads}
    return doc


def _compare_check_reads(kvs, table: str, cells: list) -> dict:
    """The version timestamps of ``cells`` read both ways (interleaved, current first), checked equal."""
    from airflow_atlas.kvs.api import MAX_TIMESTAMP

    started = time.perf_counter()
    current = kvs.get_all_timestamps(table, cells)
    multi_row = time.perf_counter() - started
    started = time.perf_counter()
    cql = kvs.cql  # the former strategy: the same statement on the service's CqlSession, one request per cell
    ps = cql.prepare(table, "get_ts")
    results = cql.concurrent("get_all_timestamps", table, [(ps, (c.row, c.col, MAX_TIMESTAMP)) for c in cells])
    former = {c: [r[0] for r in cql.rows("get_all_timestamps", table, rs)] for c, rs in zip(cells, results, strict=True)}
    per_cell = time.perf_counter() - started
    if {c: v for c, v in former.items() if v} != current:
        raise AssertionError("multi-row reads disagree with per-cell reads")
    return {"per_cell_s": per_cell, "multi_row_s": multi_row, "load_avg_1m": load_average()["1m"]}
