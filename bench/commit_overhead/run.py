"""Benchmark 3: commit latency with the sweep queue on and off, and with the application-latency
publication (issue 31 item 1) on and off.

Three TransactionManagers on the same store and services: ``on`` enqueues every write into the sweep queue
before writing the cells, ``off`` is built with ``sweep_queue=None`` (neither records the application's
latency), and ``latency`` is the store's own manager as shipped: the sweep queue plus recording every
transaction's latency and publishing it from a background thread once per ``app_latency_interval_seconds``.
For transactions of 1, 10 and 100 writes (each on fresh cells, so all see the same conflict-check work),
every repetition runs M transactions per manager, one transaction of each manager in turn (the order
rotates), and takes the median latency of each; the queue's figure is median(on) / median(off), then the
median of that ratio over the repetitions. The publication's figure is median(latency) / median(on) over
every repetition's transactions pooled, with a bootstrap 90% confidence interval that resamples the
back-to-back (on, latency) pairs. Latency is the whole ``TransactionManager.run``: begin (registration,
start timestamp), buffered puts, commit.
"""
from __future__ import annotations

import random
import time

from bench.lib.load import cell, value
from bench.lib.log import log
from bench.lib.machine import load_average, machine_info
from bench.lib.results import Stopwatch, goal, result_document
from bench.lib.stats import median, ratio_of_medians_ci, rotated
from bench.lib.stores import bare_manager, drop_store, open_backend_store

NAME = "commit_overhead"
SIZES = (1, 10, 100)
MODES = ("on", "off", "latency")
"""sweep queue on; sweep queue off; sweep queue on and the application's latency recorded and published."""


def _record_cost_us(calls: int = 100_000) -> float:
    """Wall time of one recording on the commit path (a recorder's lock and bucket), in microseconds: what a
    transaction pays synchronously for the publication (the store write is on the publisher's thread)."""
    from airflow_atlas.transactions.latency_recorder import COMMIT, LatencyRecorder

    recorder = LatencyRecorder()
    started = time.perf_counter()
    for i in range(calls):
        recorder.record(COMMIT, 0.001 + (i % 1000) * 1e-5)
    return (time.perf_counter() - started) / calls * 1e6


def run(*, quick: bool, reps: int, backend: str = "cassandra", tmpdir: str = "/tmp", name: str = NAME) -> dict:
    from airflow_atlas.kvs.tables import SweepStrategy


    watch = Stopwatch()
    per_rep = 25 if quick else 60
    store = open_backend_store(backend, "co", tmpdir)
    runs: list[dict] = []
    try:
        machine = machine_info(store.kvs.session if backend == "cassandra" else None)
        store.create_table("co", SweepStrategy.CONSERVATIVE)
        managers = {
            "on": bare_manager(store, sweep_queue=True),
            "off": bare_manager(store, sweep_queue=False),
            "latency": store.transactions,
        }
        publisher = store.transactions.latency
        if publisher is None:
            raise RuntimeError("the store's transaction manager does not publish its latency (app_latency_publish)")
        rng = random.Random(5)
        counter = [0]

        def writes(k: int) -> dict:
            base = counter[0]
            counter[0] += k
            return {cell(base + i, "co"): value(rng) for i in range(k)}

        # Warm up both (prepared statements, metadata caches, shard count).
        for m in managers.values():
            for k in SIZES:
                w = writes(k)
                m.run(lambda txn, w=w: txn.put("co", w))
        for rep in range(reps):
            for k in rotated(SIZES, rep):
                lat: dict[str, list[float]] = {mode: [] for mode in MODES}
                for i in range(per_rep):
                    for mode in rotated(MODES, i + rep):
                        w = writes(k)
                        started = time.perf_counter()
                        managers[mode].run(lambda txn, w=w: txn.put("co", w))
                        lat[mode].append(time.perf_counter() - started)
                on, off, published = (median(lat[mode]) for mode in MODES)
                runs.append(
                    {
                        "rep": rep,
                        "writes": k,
                        "transactions_per_mode": per_rep,
                        "median_on_ms": on * 1000,
                        "median_off_ms": off * 1000,
                        "median_latency_ms": published * 1000,
                        "ratio": on / off,
                        "latency_ratio": published / on,
                        "latency_on_ms": [x * 1000 for x in lat["on"]],
                        "latency_latency_ms": [x * 1000 for x in lat["latency"]],
                        "load_avg_1m": load_average()["1m"],
                    }
                )
                log(f"{name}: rep {rep} writes={k} on={on * 1000:.1f}ms off={off * 1000:.1f}ms "
                      f"latency published={published * 1000:.1f}ms")
        publication = {"interval_seconds": store.config.app_latency_interval_seconds,
                       "publications": publisher.published, "failures": publisher.failures,
                       "record_cost_us": _record_cost_us()}
    finally:
        store.transactions.close()  # stops the publisher
        drop_store(store)
    results = {}
    for k in SIZES:
        rs = [r for r in runs if r["writes"] == k]
        on_all = [x for r in rs for x in r["latency_on_ms"]]
        published_all = [x for r in rs for x in r["latency_latency_ms"]]
        low, high = ratio_of_medians_ci(published_all, on_all)
        results[str(k)] = {
            "median_on_ms": median(r["median_on_ms"] for r in rs),
            "median_off_ms": median(r["median_off_ms"] for r in rs),
            "ratio": median(r["ratio"] for r in rs),
            "median_latency_ms": median(published_all),
            "latency_ratio": median(published_all) / median(on_all),
            "latency_ratio_ci90": [low, high],
            "latency_transactions": len(published_all),
            "repetitions": len(rs),
        }
    goals = [goal(f"commit latency queue on / off, {k} write(s)", results[str(k)]["ratio"], 1.25, "<=", "x") for k in SIZES]
    goals += [
        goal(f"commit latency, application latency published / not, {k} write(s)", results[str(k)]["latency_ratio"],
               1.02, "<=", "x", note="90% CI [{:.3f}, {:.3f}] over {} pairs".format(
                   *results[str(k)]["latency_ratio_ci90"], results[str(k)]["latency_transactions"]))
        for k in SIZES
    ]
    return result_document(
        name, quick=quick, backend=backend, watch=watch, machine=machine,
        params={"sizes": list(SIZES), "transactions_per_mode_per_rep": per_rep, "repetitions": reps,
                "strategy": "CONSERVATIVE", "modes": list(MODES), "publication": publication},
        results=results, goals=goals, runs=runs, method=__doc__,
    )
