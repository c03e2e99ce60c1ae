"""Benchmark 3: commit latency with the sweep queue on and off.

Two TransactionManagers on the same store and services: the store's own (its commits enqueue every write
into the sweep queue before writing the cells) and one built with ``sweep_queue=None``. For transactions
of 1, 10 and 100 writes (each on fresh cells, so both see the same conflict-check work), every
repetition runs M transactions per manager, alternating on/off one transaction at a time (the first of
each pair alternates too), and takes the median latency of each; the figure is median(on) / median(off),
then the median of that ratio over the repetitions. Latency is the whole ``TransactionManager.run``:
begin (registration, start timestamp), buffered puts, commit.
"""
from __future__ import annotations

import random
import time

from . import common as C

NAME = "commit_overhead"
SIZES = (1, 10, 100)


def run(*, quick: bool, reps: int, backend: str = "cassandra", tmpdir: str = "/tmp", name: str = NAME) -> dict:
    from airflow_atlas.kvs.tables import SweepStrategy

    from .targeted_vs_legacy import open_backend_store

    watch = C.Stopwatch()
    per_rep = 4 if quick else 30
    store = open_backend_store(backend, "co", tmpdir)
    runs: list[dict] = []
    try:
        machine = C.machine_info(store.kvs.session if backend == "cassandra" else None)
        store.create_table("co", SweepStrategy.CONSERVATIVE)
        managers = {"on": store.transactions, "off": C.queueless_manager(store)}
        rng = random.Random(5)
        counter = [0]

        def writes(k: int) -> dict:
            base = counter[0]
            counter[0] += k
            return {C.cell(base + i, "co"): C.value(rng) for i in range(k)}

        # Warm up both (prepared statements, metadata caches, shard count).
        for m in managers.values():
            for k in SIZES:
                w = writes(k)
                m.run(lambda txn, w=w: txn.put("co", w))
        for rep in range(reps):
            for k in C.rotated(SIZES, rep):
                lat = {"on": [], "off": []}
                for i in range(per_rep):
                    order = ("on", "off") if (i + rep) % 2 == 0 else ("off", "on")
                    for mode in order:
                        w = writes(k)
                        started = time.perf_counter()
                        managers[mode].run(lambda txn, w=w: txn.put("co", w))
                        lat[mode].append(time.perf_counter() - started)
                on, off = C.median(lat["on"]), C.median(lat["off"])
                runs.append(
                    {
                        "rep": rep,
                        "writes": k,
                        "transactions_per_mode": per_rep,
                        "median_on_ms": on * 1000,
                        "median_off_ms": off * 1000,
                        "ratio": on / off,
                        "load_avg_1m": C.load_average()["1m"],
                    }
                )
                C.log(f"{name}: rep {rep} writes={k} on={on * 1000:.1f}ms off={off * 1000:.1f}ms")
    finally:
        C.drop_store(store)
    results = {}
    for k in SIZES:
        rs = [r for r in runs if r["writes"] == k]
        results[str(k)] = {
            "median_on_ms": C.median(r["median_on_ms"] for r in rs),
            "median_off_ms": C.median(r["median_off_ms"] for r in rs),
            "ratio": C.median(r["ratio"] for r in rs),
            "repetitions": len(rs),
        }
    goals = [C.goal(f"commit latency queue on / off, {k} write(s)", results[str(k)]["ratio"], 1.25, "<=", "x") for k in SIZES]
    return C.result_document(
        name, quick=quick, backend=backend, watch=watch, machine=machine,
        params={"sizes": list(SIZES), "transactions_per_mode_per_rep": per_rep, "repetitions": reps, "strategy": "CONSERVATIVE"},
        results=results, goals=goals, runs=runs, method=__doc__,
    )
