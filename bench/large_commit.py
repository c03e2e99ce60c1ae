"""Benchmark: commit time of large transactions (issue 16, item 3) on the local node.

One transaction writes N new cells of 32-byte values to a CONSERVATIVE table (N = 1,000, 10,000 and
100,000; quick mode 1,000 and 5,000) and commits; the figure is the wall time of ``commit()`` (the
puts are buffered and cost nothing), median of the repetitions, with the time spent in each phase of the
commit protocol: conflict checks (before and after the write, both in ``_check_conflicts``), enqueueing
to the sweep queue, and writing the cells. Two shapes: rows of 100 cells (a bulk load: the conflict
checks read one row slice per row) and, for the two smallest sizes, one cell per row (every cell read on
its own). Each repetition writes new cells, so every commit does the same work; sizes are interleaved.

The phases are measured by wrapping the methods of this process's objects in the benchmark (nothing in
the engine is instrumented). The goal of the issue: a 100,000-cell commit under 60 s on the local node.
"""
from __future__ import annotations

import collections
import time

from . import common as C

NAME = "large_commit"
PER_ROW = 100


def _sizes(quick: bool) -> list[int]:
    return [1_000, 5_000] if quick else [1_000, 10_000, 100_000]


def _wrap(obj, name: str, label: str, times: dict) -> None:
    original = getattr(obj, name)

    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            times[label] += time.perf_counter() - started

    setattr(obj, name, timed)


def run(*, quick: bool, reps: int, backend: str = "cassandra", tmpdir: str = "/tmp", name: str = NAME) -> dict:
    from airflow_atlas.kvs.api import Cell, SweepStrategy
    from airflow_atlas.transactions import snapshot

    from .targeted_vs_legacy import open_backend_store

    watch = C.Stopwatch()
    sizes = _sizes(quick)
    shapes = {"rows_of_100": PER_ROW, "one_per_row": 1}
    store = open_backend_store(backend, "lc", tmpdir, shards=8)
    runs: list[dict] = []
    original_check = snapshot.SnapshotTransaction._check_conflicts
    try:
        machine = C.machine_info(store.kvs.session if backend == "cassandra" else None)
        store.create_table("lc", SweepStrategy.CONSERVATIVE)
        manager = store.transactions
        times: dict = collections.defaultdict(float)
        _wrap(snapshot.SnapshotTransaction, "_check_conflicts", "conflict_checks_s", times)
        _wrap(manager.sweep_queue, "enqueue", "enqueue_s", times)
        _wrap(store.kvs, "multi_put", "writes_s", times)
        counter = [0]
        manager.run(lambda txn: txn.put("lc", {Cell(b"warm", b"up"): b"x"}))  # prepared statements, caches
        for rep in range(reps):
            for n in C.rotated(sizes, rep):
                for shape, per_row in shapes.items():
                    if per_row == 1 and n > sizes[1]:
                        continue  # 100k single-cell rows: minutes of point reads; the two smaller sizes show the rate
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
                           "load_avg_1m": C.load_average()["1m"]}
                    runs.append(rec)
                    C.log(f"{name}: rep {rep} {n:,} cells ({shape}) commit {took:.2f}s "
                          + " ".join(f"{k}={v:.2f}" for k, v in times.items()))
    finally:
        snapshot.SnapshotTransaction._check_conflicts = original_check
        C.drop_store(store)
    results = {}
    for shape in shapes:
        for n in sizes:
            rs = [r for r in runs if r["cells"] == n and r["shape"] == shape]
            if not rs:
                continue
            results[f"{shape}/{n}"] = {
                "cells": n,
                "shape": shape,
                **{k: C.median(r.get(k, 0.0) for r in rs) for k in ("commit_s", "conflict_checks_s", "enqueue_s", "writes_s")},
                "cells_per_s": n / C.median(r["commit_s"] for r in rs),
                "repetitions": len(rs),
            }
    biggest = f"rows_of_100/{sizes[-1]}"
    goals = [C.goal(f"commit of {sizes[-1]:,} cells (rows of 100)", results[biggest]["commit_s"], 60.0, "<=", "s",
                    binding=not quick)]
    return C.result_document(
        name, quick=quick, backend=backend, watch=watch, machine=machine,
        params={"sizes": sizes, "shapes": shapes, "value_bytes": 32, "repetitions": reps, "shards": 8,
                "strategy": "CONSERVATIVE"},
        results=results, goals=goals, runs=runs, method=__doc__,
    )
