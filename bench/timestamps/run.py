"""Issue 45 item 7: timestamp draws from the timestamp server vs from the store's cell.

What is measured: ``store.timestamps.fresh_timestamp()`` calls per second and the latency of each call
(``time.perf_counter`` around the call) on two stores of the local node, side by side in one run:

- ``cell``: a store initialised without ``timestamp_servers`` - every draw is one SERIAL read plus one
  check-and-set of one cell (:mod:`airflow_atlas.timestamps.cell`);
- ``server``: a store adopted by a timestamp server (a real ``atlas-sweep timestamps serve`` process on a free
  loopback port) - every draw goes through the process's :class:`~airflow_atlas.timestamps.client.TimestampClient`,
  which coalesces concurrent callers into one gRPC request.

Steps are 1, 8 and 64 threads in one process, then in two processes (``multiprocessing`` 'spawn' workers,
each holding both stores open, started together at one wall-clock instant), and the issue's goal point, 2
processes x 16 threads (goal: >= 20,000 draws/s, p99 <= 5 ms on the server). The two variants alternate step by
step (the order rotates every step), each step lasting ``seconds``. Why: the cell is the single-cell Paxos
path the server exists to remove, so the ratio server/cell and the server's absolute rate under concurrency
are the figures of the issue.

Statistics: draws/s counts the calls that completed inside the step's window; latency percentiles pool every
thread's and process's samples (the counts are reported); the p99's 90% interval is a bootstrap (resampling the
pooled samples); the server/cell rate ratio's interval is :func:`bench.lib.stats.ratio_of_medians_ci` over the
step's ten sub-windows; the p99 ratio's interval resamples both pools independently. Everything (the
benchmark's processes, the timestamp server, the Cassandra node) shares this machine's cores, unconfined.
"""
from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.lib.closed_loop import RESAMPLES, WINDOWS, ratio_ci, run_threads, summarise_step
from bench.lib.log import log
from bench.lib.machine import CpuProbe, load_average, machine_info
from bench.lib.node import cassandra_process, settle_node
from bench.lib.results import Stopwatch, goal, result_document
from bench.lib.standalone import standalone_main
from bench.lib.stats import ratio_of_medians_ci, rotated
from bench.lib.stores import cassandra_url, drop_store, new_keyspace_name, open_store

NAME = "timestamps"
VARIANTS = ("cell", "server")
SHAPES: tuple[tuple[int, int], ...] = ((1, 1), (1, 8), (1, 64), (2, 1), (2, 8), (2, 64), (2, 16))
"""(processes, threads per process); the last one is the issue's goal point."""
GOAL_SHAPE = (2, 16)
GOAL_RATE = 20_000.0
GOAL_P99_MS = 5.0
START_DELAY = 1.0
"""Seconds between sending a step to the worker processes and its start (they start at one wall instant)."""


# ----- worker processes ------------------------------------------------------------------------------------
_WORKER: dict[str, Any] = {}


def _open_sources(urls: dict[str, str], servers: tuple[str, ...]) -> dict:
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore

    stores = {
        "cell": AtlasStore.open(urls["cell"], StoreConfig()),
        "server": AtlasStore.open(urls["server"], StoreConfig(timestamp_servers=servers)),
    }
    for store in stores.values():
        for _ in range(20):  # warm up: prepared statements, the gRPC channel
            store.timestamps.fresh_timestamp()
    return stores


def _worker_init(urls: dict[str, str], servers: tuple[str, ...]) -> None:
    import logging

    logging.getLogger("cassandra").setLevel(logging.ERROR)
    _WORKER["stores"] = _open_sources(urls, servers)


def _worker_pid(seconds: float) -> int:
    """A worker's process id, after ``seconds`` of sleep (so that two calls at once reach two workers)."""
    time.sleep(seconds)
    return os.getpid()


def _worker_step(variant: str, threads: int, start_at: float, seconds: float) -> dict:
    store = _WORKER["stores"][variant]
    return run_threads(store.timestamps.fresh_timestamp, threads, start_at, seconds)


# ----- the benchmark ------------------------------------------------------------------------------------
def _placement(pids: dict[str, int]) -> dict:
    import psutil

    out: dict = {"note": "all processes on this machine, no CPU pinning (unconfined)"}
    for name, pid in pids.items():
        try:
            out[name] = {"pid": pid, "cpu_affinity": psutil.Process(pid).cpu_affinity()}
        except Exception as exc:
            out[name] = {"pid": pid, "error": str(exc)[:100]}
    return out


def run(*, quick: bool = False, reps: int = 1, seconds: float | None = None,
        shapes: tuple[tuple[int, int], ...] = SHAPES, name: str = NAME) -> dict:
    """Every shape x variant for ``seconds`` each (``reps`` passes; 2 s in quick mode, else 10 s); the
    result document (:func:`bench.lib.results.result_document`)."""
    import psutil

    from devkit.airflow import free_port
    from devkit.timestamps import start_server

    seconds = float(seconds if seconds is not None else (2.0 if quick else 10.0))
    watch = Stopwatch()
    cell_store = open_store(cassandra_url(new_keyspace_name("tsc")))
    address = f"127.0.0.1:{free_port()}"
    server_store = open_store(cassandra_url(new_keyspace_name("tss")), timestamp_servers=(address,))
    urls = {"cell": cassandra_url(cell_store.kvs.keyspace), "server": cassandra_url(server_store.kvs.keyspace)}
    log_dir = Path(tempfile.mkdtemp(prefix="bench_timestamps_"))
    server = start_server(urls["server"], address, log_dir / "server.log")
    server_ps = psutil.Process(server.process.pid)
    runs: list[dict] = []
    boots: dict[tuple, list[np.ndarray]] = {}
    pooled: dict[tuple, list[dict]] = {}
    pool = None
    worker_pids: set[int] = set()
    try:
        machine = machine_info(cell_store.kvs.session)
        local = {"cell": cell_store, "server": server_store}
        for store in local.values():
            for _ in range(20):
                store.timestamps.fresh_timestamp()
        if any(p > 1 for p, _ in shapes):
            ctx = multiprocessing.get_context("spawn")
            from concurrent.futures import ProcessPoolExecutor

            pool = ProcessPoolExecutor(2, mp_context=ctx, initializer=_worker_init, initargs=(urls, (address,)))
            for _ in range(20):  # both workers up and warmed: once both are idle, two calls at once reach both
                worker_pids |= set(pool.map(_worker_pid, [0.5, 0.5]))
                if len(worker_pids) == 2:
                    break
        step = rounds = 0  # rounds: one per shape, the variants' order rotates every round
        for rep in range(reps):
            for procs, threads in shapes:
                rounds += 1
                for variant in rotated(VARIANTS, rounds - 1):
                    step += 1
                    settle_node(max_seconds=5)
                    load = load_average()["1m"]
                    workers = [psutil.Process(pid) for pid in worker_pids]
                    server_cpu0 = sum(server_ps.cpu_times()[:2])
                    workers_cpu0 = sum(sum(w.cpu_times()[:2]) for w in workers)
                    probe = CpuProbe().start()
                    start_at = time.time() + (START_DELAY if procs > 1 else 0.05)
                    if procs == 1:
                        parts = [run_threads(local[variant].timestamps.fresh_timestamp, threads, start_at, seconds)]
                    else:
                        futures = [pool.submit(_worker_step, variant, threads, start_at, seconds) for _ in range(procs)]
                        parts = [f.result(timeout=seconds + 120) for f in futures]
                    cpu = probe.stop()
                    wall = cpu["wall_seconds"]
                    cpu["server_process_cores"] = (sum(server_ps.cpu_times()[:2]) - server_cpu0) / wall
                    cpu["worker_processes_cores"] = (sum(sum(w.cpu_times()[:2]) for w in workers) - workers_cpu0) / wall
                    cpu["other_work_cores"] = cpu["machine_busy_cores"] - sum(
                        cpu.get(k, 0.0) for k in ("this_process_cores", "cassandra_cores", "server_process_cores",
                                                  "worker_processes_cores"))
                    summary, boot = summarise_step(parts, seconds)
                    key = (procs, threads, variant)
                    boots.setdefault(key, []).append(boot)
                    pooled.setdefault(key, []).extend(parts)
                    runs.append({"rep": rep, "step": step, "processes": procs, "threads": threads, "variant": variant,
                                 "seconds": seconds, "load_avg_1m": load, "cpu": cpu, **summary})
                    log(f"{name}: {variant} {procs}x{threads}: {summary['draws_per_second']:.0f} draws/s, "
                          f"p50 {summary['p50_ms']} ms, p99 {summary['p99_ms']} ms, {summary['samples']} samples, "
                          f"{summary['errors']} errors, load {load}")
        worker_pids = sorted({pid for r in runs if r["processes"] > 1 for pid in r["pids"]})
        placement = _placement({"benchmark": os.getpid(), "timestamp_server": server.process.pid,
                                **{f"worker_{i}": p for i, p in enumerate(worker_pids)},
                                **({"cassandra": cassandra_process().pid} if cassandra_process() else {})})
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        server.stop()
        drop_store(cell_store)
        drop_store(server_store)
    results: dict = {}
    for procs, threads in shapes:
        key = f"{procs}x{threads}"
        entry: dict = {"processes": procs, "threads_per_process": threads}
        for variant in VARIANTS:
            summary, _ = summarise_step(pooled[(procs, threads, variant)], seconds * reps)
            summary.pop("window_rates")
            entry[variant] = summary
        srv = [r for r in runs if (r["processes"], r["threads"], r["variant"]) == (procs, threads, "server")]
        cel = [r for r in runs if (r["processes"], r["threads"], r["variant"]) == (procs, threads, "cell")]
        s_rates = [x for r in srv for x in r["window_rates"]]
        c_rates = [x for r in cel for x in r["window_rates"]]
        entry["rate_ratio_server_over_cell"] = (entry["server"]["draws_per_second"] / entry["cell"]["draws_per_second"]
                                                if entry["cell"]["draws_per_second"] else None)
        try:
            entry["rate_ratio_ci90"] = list(ratio_of_medians_ci(s_rates, [max(c, 1e-9) for c in c_rates]))
        except ValueError:
            entry["rate_ratio_ci90"] = None
        sp, cp = entry["server"]["p99_ms"], entry["cell"]["p99_ms"]
        entry["p99_ratio_server_over_cell"] = sp / cp if sp and cp else None
        entry["p99_ratio_ci90"] = ratio_ci(np.concatenate(boots[(procs, threads, "server")]),
                                           np.concatenate(boots[(procs, threads, "cell")]))
        results[key] = entry
    gkey = f"{GOAL_SHAPE[0]}x{GOAL_SHAPE[1]}"
    g = results.get(gkey, {}).get("server", {})
    goals = [
        goal(f"server draws/s at {gkey} threads", g.get("draws_per_second"), GOAL_RATE, ">=", "/s",
               note=f"{g.get('samples')} samples"),
        goal(f"server draw p99 at {gkey} threads", g.get("p99_ms"), GOAL_P99_MS, "<=", "ms",
               note="90% CI [{}, {}] ms, {} samples".format(*(g.get("p99_ci90_ms") or [None, None]), g.get("samples"))),
    ]
    return result_document(
        name, quick=quick, backend="cassandra", watch=watch, machine={**machine, "placement": placement},
        params={"seconds_per_step": seconds, "passes": reps, "shapes": [list(s) for s in shapes],
                "variants": list(VARIANTS), "windows_per_step": WINDOWS, "bootstrap_resamples": RESAMPLES,
                "server_address": address, "server_lease_seconds": 2.0, "server_log": str(log_dir / "server.log")},
        results=results, goals=goals, runs=runs, method=__doc__,
    )


def main(argv: list[str] | None = None) -> int:
    return standalone_main("python -m bench.timestamps", NAME, __doc__, run, argv)
