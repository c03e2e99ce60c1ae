"""Benchmark 2 (and the second half of 6): targeted-sweep throughput vs the store's own ranged-delete rate.

Per repetition, a backlog of N queue entries is written as committed transactions of 50 writes (each on
its own cell, one version below the sweep timestamp). Then, in rotating order:

* **sweep**: targeted sweep of every shard in-process, to the end (lock, sweep timestamp, queue reads,
  commit-timestamp lookups, ranged tombstones, queue cleanup, progress) - entries swept per second;
* **raw**: the same number of ranged tombstones written directly with the driver (Cassandra: the
  engine's own prepared ``DELETE ... USING TIMESTAMP ? WHERE key = ? AND column1 = ? AND column2 >= ? AND
  column2 <= ?`` through ``execute_concurrent`` at the backend's concurrency, one statement per cell;
  SQLite: the same ``DELETE`` through ``executemany`` in one write transaction) into a scratch copy of the
  same cells - ranged tombstones per second.

THOROUGH is the like-for-like case (one ranged tombstone per swept cell). CONSERVATIVE additionally
writes a sentinel per cell; it is compared with a raw run of the same mutations (sentinel + ranged
tombstone per cell). When the Cassandra backend groups statements into UNLOGGED batches, a third
variant, **raw_batched**, writes the raw ranged tombstones in the same batches, so the comparison is
made against the fastest raw rate this store offers too. For CONSERVATIVE, raw_batched writes each
cell's sentinel and ranged tombstone as one unit, exactly as the sweep batches them (until issue 15 it
wrote all sentinels, then all tombstones, in separate batches: twice the mutations of the sweep).

Before every variant the benchmark waits until the local node is quiet (:func:`bench.lib.node.settle_node`: under
0.15 cores for two 0.5 s windows, at most 30 s; the waits are in ``runs[].settle_seconds``). Rotation
alone does not remove the after-effects of a variant (memtable flushes, compactions): in a 3-cycle each
variant always follows the same one, and before issue 15's fix raw_batched always ran in the wake of the
unbatched raw deletes (60,000 single-statement tombstones), which made it up to 1.8x slower than when it
ran first - a bias in the sweep's favour. Waiting did not remove it (the node was quiet within 1-2 s):
the cause was that raw and raw_batched tombstoned the SAME scratch cells, so whichever ran second wrote
range tombstones over partitions that already held one (a costlier memtable merge), while the sweep's
table is always fresh. Each raw variant now has a scratch copy of its own.
"""
from __future__ import annotations

import random
import time

from bench.lib.load import bulk_put, cell, commit_synthetic, sweep_all_shards, value
from bench.lib.log import log
from bench.lib.machine import CpuProbe, load_average, machine_info
from bench.lib.node import settle_node
from bench.lib.results import Stopwatch, goal, result_document
from bench.lib.stats import median, rotated
from bench.lib.stores import drop_store, open_backend_store
from bench.lib.timing import timed

NAME = "delete_rate"
TXN_WRITES = 50


def _n(quick: bool, backend: str) -> int:
    if quick:
        return 1_000
    # Cassandra: 60,000 entries = 6 iterations of the default batch limit, so the figure is the sweep's
    # steady rate (reads overlapping deletes) rather than one unoverlapped first read plus the run's fixed
    # costs; until issue 15 it was 20,000 (2 iterations).
    return 60_000 if backend == "cassandra" else 50_000


def _raw_cassandra(store, table: str, cells, hi: int, sentinels: bool, batched: bool) -> None:
    from cassandra.concurrent import execute_concurrent

    kvs = store.kvs
    fresh = store.timestamps.fresh_timestamp()
    if batched:
        if sentinels:
            # The sweep's own batching: each cell's sentinel and ranged tombstone as one unit (one
            # single-partition mutation), units grouped into UNLOGGED batches.
            kvs.add_gc_sentinels_and_delete_all_timestamps(table, cells, {c: (0, hi) for c in cells})
        else:
            kvs.delete_all_timestamps(table, {c: (-1, hi) for c in cells})
        return
    cql = kvs.cql  # the service's CqlSession: the engine's own prepared statements and concurrency
    if sentinels:
        ps = cql.prepare(table, "sentinel")
        execute_concurrent(
            kvs.session, [(ps, (c.row, c.col, b"", fresh)) for c in cells], concurrency=cql.concurrency,
            raise_on_first_error=True,
        )
        fresh = store.timestamps.fresh_timestamp()
    ps = cql.prepare(table, "delete_range")
    lo = 0 if sentinels else -1
    execute_concurrent(
        kvs.session, [(ps, (fresh, c.row, c.col, lo, hi)) for c in cells], concurrency=cql.concurrency,
        raise_on_first_error=True,
    )


def _raw_sqlite(store, table: str, cells, hi: int, sentinels: bool) -> None:
    kvs = store.kvs
    phys = f'"kvs_{table}"'
    conn = kvs._conn()
    conn.execute("BEGIN IMMEDIATE")
    if sentinels:
        conn.executemany(
            f"INSERT OR REPLACE INTO {phys} (r, c, ts, v, exp) VALUES (?, ?, -1, X'', NULL)", [(c.row, c.col) for c in cells]
        )
    conn.execute("COMMIT")
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        f"DELETE FROM {phys} WHERE r = ? AND c = ? AND ts >= ? AND ts <= ?",
        [(c.row, c.col, 0 if sentinels else -1, hi) for c in cells],
    )
    conn.execute("COMMIT")


def batching_enabled(store) -> bool:
    """Whether the store's service groups statements into UNLOGGED batches: the Cassandra service does, as the
    benchmark opens it (``AtlasStore.open`` leaves ``batch_partitions`` at its default, 10; the service does not
    say which it has); the embedded store does not."""
    return store.kvs.backend == "cassandra"


def run(*, quick: bool, reps: int, backend: str = "cassandra", tmpdir: str = "/tmp", n: int | None = None, name: str = NAME,
        strategies=("THOROUGH", "CONSERVATIVE")) -> dict:
    from airflow_atlas.kvs.tables import SweepStrategy


    watch = Stopwatch()
    n = n or _n(quick, backend)
    store = open_backend_store(backend, "dr", tmpdir)
    runs: list[dict] = []
    try:
        machine = machine_info(store.kvs.session if backend == "cassandra" else None)
        batched = batching_enabled(store)
        rng = random.Random(3)
        offset = 0
        for strategy_name in strategies:
            strategy = SweepStrategy.parse(strategy_name)
            table = f"dr_{strategy_name.lower()}"
            # One scratch copy per raw variant: each variant's tombstones land on partitions in the same
            # state as the sweep's (one live version, nothing deleted yet).
            scratch = {"raw": f"{table}_raw", "raw_batched": f"{table}_rawb"}
            store.create_table(table, strategy)
            for name_ in scratch.values():
                store.create_table(name_, strategy)
            for rep in range(reps):
                cells = [cell(offset + i) for i in range(n)]
                offset += n
                values = {c: value(rng) for c in cells}
                items = list(values.items())
                batches = [dict(items[i : i + TXN_WRITES]) for i in range(0, len(items), TXN_WRITES)]
                rec: dict = {"rep": rep, "strategy": strategy_name, "n": n, "load_avg_1m": load_average()["1m"]}
                with timed(rec, "load_seconds"):
                    commit_synthetic(store, table, batches, threads=4 if backend == "cassandra" else 1)
                    # The scratch copies hold the same cells and versions (for the raw deletes).
                    for name_ in scratch.values():
                        bulk_put(store, name_, values, 1)
                sweep_ts = store.sweep_timestamps.immutable_timestamp()
                # Like the sweep's (which keeps each cell's only version), the raw deletes remove no live
                # version: the scratch cells sit at timestamp 1, the ranges end at 0.
                hi = 0
                variants = ["sweep", "raw"] + (["raw_batched"] if batched else [])
                rec["order"] = rotated(variants, rep)
                rec["settle_seconds"] = {}
                for variant in rec["order"]:
                    if backend == "cassandra":
                        rec["settle_seconds"][variant] = round(settle_node(), 2)
                    log(f"{name}: {strategy_name} rep {rep} {variant} n={n:,}")
                    started = time.perf_counter()
                    if variant == "sweep":
                        probe = CpuProbe().start()
                        totals = sweep_all_shards(store, strategy, sweep_ts)
                        rec["sweep_cpu"] = probe.stop()
                        rec["sweep_result"] = {k: v for k, v in totals.items() if k != "statuses"}
                        rec["sweep_check"] = totals["entries_read"] == n and totals["cells_tombstoned"] == n
                    elif backend == "cassandra":
                        _raw_cassandra(store, scratch[variant], cells, hi, strategy is SweepStrategy.CONSERVATIVE, variant == "raw_batched")
                    else:
                        _raw_sqlite(store, scratch[variant], cells, hi, strategy is SweepStrategy.CONSERVATIVE)
                    rec[f"{variant}_seconds"] = time.perf_counter() - started
                rec["sweep_entries_per_second"] = n / rec["sweep_seconds"]
                rec["raw_per_second"] = n / rec["raw_seconds"]
                rec["ratio"] = rec["raw_seconds"] / rec["sweep_seconds"]
                if batched:
                    rec["raw_batched_per_second"] = n / rec["raw_batched_seconds"]
                    rec["ratio_vs_raw_batched"] = rec["raw_batched_seconds"] / rec["sweep_seconds"]
                runs.append(rec)
    finally:
        drop_store(store)
    results: dict = {}
    for strategy_name in strategies:
        rs = [r for r in runs if r["strategy"] == strategy_name]
        results[strategy_name] = {
            "n": n,
            "sweep_entries_per_second": median(r["sweep_entries_per_second"] for r in rs),
            "raw_per_second": median(r["raw_per_second"] for r in rs),
            "ratio": median(r["ratio"] for r in rs),
            "checks_ok": all(r["sweep_check"] for r in rs),
            "repetitions": len(rs),
            # Where the sweep's time goes: cores used during the sweep by the node, by the sweeper, in all.
            "sweep_cpu_cores": {
                key: median(r["sweep_cpu"][key] for r in rs if key in r["sweep_cpu"])
                for key in ("cassandra_cores", "this_process_cores", "machine_busy_cores")
                if any(key in r["sweep_cpu"] for r in rs)
            },
        }
        if batched:
            results[strategy_name]["raw_batched_per_second"] = median(r["raw_batched_per_second"] for r in rs)
            results[strategy_name]["ratio_vs_raw_batched"] = median(r["ratio_vs_raw_batched"] for r in rs)
    goals = []
    if "THOROUGH" in results:
        goals.append(goal("THOROUGH sweep throughput / raw ranged-delete rate", results["THOROUGH"]["ratio"], 0.5, ">="))
        if batched:
            goals.append(
                goal(
                    "THOROUGH sweep throughput / raw rate of the same mutations with the same batching (issue 15)",
                    results["THOROUGH"]["ratio_vs_raw_batched"], 0.8, ">=",
                )
            )
    if "CONSERVATIVE" in results:
        goals.append(
            goal(
                "CONSERVATIVE sweep throughput / raw rate of the same mutations (sentinel + ranged delete)",
                results["CONSERVATIVE"]["ratio"], 0.5, ">=",
            )
        )
        if batched:
            goals.append(
                goal(
                    "CONSERVATIVE sweep throughput / raw rate of the same mutations with the same batching (issue 15)",
                    results["CONSERVATIVE"]["ratio_vs_raw_batched"], 0.8, ">=",
                )
            )
    return result_document(
        name, quick=quick, backend=backend, watch=watch, machine=machine,
        params={
            "entries": n,
            "transaction_writes": TXN_WRITES,
            "strategies": list(strategies),
            "shards": 1,
            "batch_limit": store.config.batch_limit,
            "concurrency": getattr(store.kvs, "_concurrency", None),
            "batching": batched,
            "repetitions": reps,
        },
        results=results, goals=goals, runs=runs, method=__doc__,
    )
