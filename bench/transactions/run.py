"""Issue 45 item 7: transactions of 4 reads + 1 write per second, timestamps from the server vs the cell, next
to raw single-row CQL from the same client.

What is measured, side by side in one run (the variants alternate step by step, the order rotating), 1, 8 and
32 threads in one process, each step lasting ``seconds``:

- ``cell`` / ``server``: ``store.transactions.run(fn)`` on a store drawing its timestamps from its cell, and on
  one adopted by a timestamp server (a real ``atlas-sweep timestamps serve`` process on a free loopback port);
  ``fn`` reads 4 cells of 1,000 preloaded ones (4 ``txn.get`` calls of one cell each, in different rows) and
  writes one fresh cell (``txn.put``), so no two transactions conflict. Latency is the whole ``run`` (begin,
  reads, commit), ``time.perf_counter`` around it.
- ``raw_write`` / ``raw_read``: one prepared single-row INSERT / SELECT per call (cassandra-driver, synchronous
  ``execute``) on a table of a keyspace of its own, same threads: what the client machine and the node do with
  plain CQL.

Why: a transaction costs a number of CQL statements (counted here by wrapping the store session's ``execute``
and ``execute_async`` during the step) plus its two timestamp draws; comparing transactions/s x statements per
transaction with raw CQL's statement rate shows how much of the node's and the client's capacity the
transaction protocol leaves for anything but its statements, and the server/cell ratio shows what the
timestamp server changes. Intervals: the rate ratio's is :func:`bench.lib.stats.ratio_of_medians_ci` over each
step's ten sub-windows; the p99's is a bootstrap of the pooled samples. Everything shares this machine's
cores, unconfined, with whatever else runs on it (the per-step CPU split is recorded).
"""
from __future__ import annotations

import itertools
import random
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from bench.lib.closed_loop import ratio_ci, run_threads, summarise_step
from bench.lib.load import cell, chunks, value
from bench.lib.log import log
from bench.lib.machine import CpuProbe, load_average, machine_info
from bench.lib.node import settle_node
from bench.lib.results import Stopwatch, goal, result_document
from bench.lib.standalone import standalone_main
from bench.lib.stats import ratio_of_medians_ci, rotated
from bench.lib.stores import cassandra_url, drop_store, new_keyspace_name, open_store

NAME = "transactions"
VARIANTS = ("cell", "server", "raw_write", "raw_read")
THREADS = (1, 8, 32)
PRELOADED = 1_000
READS = 4
TABLE = "txb"


class StatementCounter:
    """Counts the statements a driver session sends while installed (its ``execute`` / ``execute_async``)."""

    def __init__(self, session):
        self._session = session
        self._lock = threading.Lock()
        self.count = 0
        self._originals = {name: getattr(session, name) for name in ("execute", "execute_async")}

    def _wrap(self, original):
        def counted(*args, **kwargs):
            with self._lock:
                self.count += 1
            return original(*args, **kwargs)
        return counted

    def __enter__(self) -> StatementCounter:
        for name, original in self._originals.items():
            setattr(self._session, name, self._wrap(original))
        return self

    def __exit__(self, *exc) -> None:
        for name in self._originals:
            try:
                delattr(self._session, name)  # back to the class's method
            except AttributeError:
                pass


def _transaction(store, preloaded: list, rng_lock: threading.Lock, rng: random.Random, fresh: itertools.count):
    """One transaction's callable: 4 reads of preloaded cells, 1 write of a fresh cell."""
    from airflow_atlas.kvs.api import Cell

    def fn(txn):
        with rng_lock:
            cells = rng.sample(preloaded, READS)
        for c in cells:
            txn.get(TABLE, [c])
        n = next(fresh)
        txn.put(TABLE, {Cell(f"w{n:010d}".encode(), b"c00"): b"v" * 32})

    def one() -> None:
        store.transactions.run(fn)

    return one


def _raw(session, keyspace: str):
    """The raw CQL table and its two callables (prepared INSERT of a fresh key, SELECT of a preloaded one)."""
    session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}", timeout=60)
    session.execute(f"CREATE TABLE IF NOT EXISTS {keyspace}.raw (k blob PRIMARY KEY, v blob)", timeout=60)
    insert = session.prepare(f"INSERT INTO {keyspace}.raw (k, v) VALUES (?, ?)")
    select = session.prepare(f"SELECT v FROM {keyspace}.raw WHERE k = ?")
    keys = [f"p{i:08d}".encode() for i in range(PRELOADED)]
    for k in keys:
        session.execute(insert, (k, b"v" * 32))
    fresh = itertools.count()
    lock = threading.Lock()
    rng = random.Random(3)

    def write() -> None:
        session.execute(insert, (f"w{next(fresh):010d}".encode(), b"v" * 32))

    def read() -> None:
        with lock:
            k = rng.choice(keys)
        if session.execute(select, (k,)).one() is None:
            raise RuntimeError("a preloaded row was not found")

    return write, read


def run(*, quick: bool = False, reps: int = 1, seconds: float | None = None, threads: tuple[int, ...] = THREADS,
        name: str = NAME) -> dict:
    """Every thread count x variant for ``seconds`` each (``reps`` passes; 2 s quick, else 10 s)."""
    import psutil

    from devkit.airflow import free_port
    from devkit.timestamps import start_server

    seconds = float(seconds if seconds is not None else (2.0 if quick else 10.0))
    watch = Stopwatch()
    address = f"127.0.0.1:{free_port()}"
    stores = {
        "cell": open_store(cassandra_url(new_keyspace_name("txc"))),
        "server": open_store(cassandra_url(new_keyspace_name("txs")), timestamp_servers=(address,)),
    }
    log_dir = Path(tempfile.mkdtemp(prefix="bench_transactions_"))
    server = start_server(cassandra_url(stores["server"].kvs.keyspace), address, log_dir / "server.log")
    server_ps = psutil.Process(server.process.pid)
    raw_keyspace = new_keyspace_name("txraw")
    session = stores["cell"].kvs.session
    runs: list[dict] = []
    pooled: dict[tuple, list[dict]] = {}
    boots: dict[tuple, list[np.ndarray]] = {}
    statements: dict[tuple, list[int]] = {}
    try:
        machine = machine_info(session)
        preloaded = [cell(i, "p") for i in range(PRELOADED)]
        rng = random.Random(1)
        for store in stores.values():
            store.create_table(TABLE, "CONSERVATIVE")
            for chunk in chunks(preloaded, 250):
                values = {c: value(rng) for c in chunk}
                store.transactions.run(lambda txn, v=values: txn.put(TABLE, v))
        raw_write, raw_read = _raw(session, raw_keyspace)
        calls = {v: _transaction(stores[v], preloaded, threading.Lock(), random.Random(i), itertools.count())
                 for i, v in enumerate(("cell", "server"))}
        calls.update(raw_write=raw_write, raw_read=raw_read)
        for fn in calls.values():  # warm up: prepared statements, the gRPC channel, the metadata caches
            for _ in range(10):
                fn()
        step = rounds = 0  # rounds: one per shape, the variants' order rotates every round
        for rep in range(reps):
            for n in threads:
                rounds += 1
                for variant in rotated(VARIANTS, rounds - 1):
                    step += 1
                    settle_node(max_seconds=5)
                    load = load_average()["1m"]
                    server_cpu0 = sum(server_ps.cpu_times()[:2])
                    probe = CpuProbe().start()
                    if variant in stores:
                        with StatementCounter(stores[variant].kvs.session) as counter:
                            part = run_threads(calls[variant], n, time.time() + 0.05, seconds)
                        count = counter.count
                    else:
                        part = run_threads(calls[variant], n, time.time() + 0.05, seconds)
                        count = len(part["latencies"]) + part["errors"]
                    cpu = probe.stop()
                    cpu["server_process_cores"] = (sum(server_ps.cpu_times()[:2]) - server_cpu0) / cpu["wall_seconds"]
                    cpu["other_work_cores"] = cpu["machine_busy_cores"] - sum(
                        cpu.get(k, 0.0) for k in ("this_process_cores", "cassandra_cores", "server_process_cores"))
                    summary, boot = summarise_step([part], seconds)
                    done = len(part["latencies"])
                    key = (n, variant)
                    pooled.setdefault(key, []).append(part)
                    boots.setdefault(key, []).append(boot)
                    statements.setdefault(key, []).extend([count, done])
                    runs.append({"rep": rep, "step": step, "threads": n, "variant": variant, "seconds": seconds,
                                 "load_avg_1m": load, "cpu": cpu, "statements": count,
                                 "statements_per_call": count / done if done else None, **summary})
                    log(f"{name}: {variant} {n} threads: {summary['draws_per_second']:.0f}/s, p50 "
                          f"{summary['p50_ms']} ms, p99 {summary['p99_ms']} ms, {done} samples, "
                          f"{count / max(done, 1):.2f} statements/call, {summary['errors']} errors, load {load}")
    finally:
        server.stop()
        try:
            session.execute(f"DROP KEYSPACE IF EXISTS {raw_keyspace}", timeout=180)
        except Exception as exc:
            log(f"could not drop {raw_keyspace}: {exc}")
        for store in stores.values():
            drop_store(store)
    results: dict = {}
    for n in threads:
        entry: dict = {"threads": n}
        for variant in VARIANTS:
            summary, _ = summarise_step(pooled[(n, variant)], seconds * reps)
            summary.pop("window_rates")
            summary["per_second"] = summary.pop("draws_per_second")
            counts = statements[(n, variant)]
            summary["statements_per_call"] = sum(counts[0::2]) / max(1, sum(counts[1::2]))
            entry[variant] = summary
        w, r = entry["raw_write"]["per_second"], entry["raw_read"]["per_second"]
        mixed = (READS + 1) / (READS / r + 1 / w) if r and w else None  # statements/s of a 4-read + 1-write mix
        entry["raw_mixed_statements_per_second"] = mixed
        for variant in ("cell", "server"):
            v = entry[variant]
            v["statements_per_second"] = v["per_second"] * v["statements_per_call"]
            v["statement_rate_over_raw"] = v["statements_per_second"] / mixed if mixed else None
            v["raw_bound_transactions_per_second"] = mixed / v["statements_per_call"] if mixed else None
        s_rates = [x for rr in runs if (rr["threads"], rr["variant"]) == (n, "server") for x in rr["window_rates"]]
        c_rates = [x for rr in runs if (rr["threads"], rr["variant"]) == (n, "cell") for x in rr["window_rates"]]
        entry["rate_ratio_server_over_cell"] = (entry["server"]["per_second"] / entry["cell"]["per_second"]
                                                if entry["cell"]["per_second"] else None)
        entry["rate_ratio_ci90"] = list(ratio_of_medians_ci(s_rates, [max(c, 1e-9) for c in c_rates]))
        sp, cp = entry["server"]["p99_ms"], entry["cell"]["p99_ms"]
        entry["p99_ratio_server_over_cell"] = sp / cp if sp and cp else None
        entry["p99_ratio_ci90"] = ratio_ci(np.concatenate(boots[(n, "server")]), np.concatenate(boots[(n, "cell")]))
        results[str(n)] = entry
    top = results[str(threads[-1])]
    goals = [
        goal(f"transactions/s server / cell at {threads[-1]} threads", top["rate_ratio_server_over_cell"], 1.0, ">=",
               "x", note="90% CI [{:.2f}, {:.2f}]".format(*top["rate_ratio_ci90"]), binding=False),
        goal(f"transaction p99 server / cell at {threads[-1]} threads", top["p99_ratio_server_over_cell"], 1.0, "<=",
               "x", note="90% CI [{}, {}]".format(*(top["p99_ratio_ci90"] or [None, None])), binding=False),
    ]
    return result_document(
        name, quick=quick, backend="cassandra", watch=watch, machine=machine,
        params={"seconds_per_step": seconds, "passes": reps, "threads": list(threads), "variants": list(VARIANTS),
                "reads_per_transaction": READS, "writes_per_transaction": 1, "preloaded_cells": PRELOADED,
                "server_address": address, "server_log": str(log_dir / "server.log"),
                "placement": "one benchmark process, the timestamp server and the Cassandra node on this machine, "
                             "no CPU pinning (unconfined)"},
        results=results, goals=goals, runs=runs, method=__doc__,
    )


def main(argv: list[str] | None = None) -> int:
    return standalone_main("python -m bench.transactions", NAME, __doc__, run, argv)
