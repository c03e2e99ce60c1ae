"""Where the time of a targeted sweep goes: the profile behind bench/ANALYSIS.md (issue 15, part 1).

    .venv/bin/python -m bench.tools.profile_sweep [--entries N] [--strategy THOROUGH|CONSERVATIVE]
                                            [--batch-limit N] [--cprofile]

On the local node (started like the benchmarks' if it does not answer), in a keyspace of its own that is
dropped at the end: a backlog of N queue entries (transactions of 50 writes, one shard) and a scratch
copy of the same cells; then, a few seconds apart, the same mutations written through the engine's raw
batched path (`delete_all_timestamps` / `add_gc_sentinels_and_delete_all_timestamps` on the scratch copy)
and the sweep of the backlog through `TargetedSweeper.sweep_shard`. Prints both rates, their ratio, the
cores used during the sweep (this process, the node, the machine) and the wall time per phase of the
sweep (each phase's method of this process's objects is timed; the read-ahead thread's reads are summed
too, so phases overlap). `--cprofile`: also the top of a cProfile of the sweep (the main thread only),
by own time and by cumulative time. A measurement tool, not a benchmark: one run, no repetitions.
"""
from __future__ import annotations

import argparse
import collections
import random
import time

from bench.delete_rate.run import TXN_WRITES, _raw_cassandra
from bench.lib.load import bulk_put, cell, commit_synthetic, sweep_all_shards, value
from bench.lib.machine import CpuProbe
from bench.lib.node import ensure_cassandra, settle_node
from bench.lib.stores import drop_store, open_backend_store
from bench.lib.timing import time_calls


def main(argv=None) -> None:
    from airflow_atlas.kvs.tables import SweepStrategy
    from airflow_atlas.sweep.deleter import SweepDeleter

    ap = argparse.ArgumentParser(prog="python -m bench.tools.profile_sweep", description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--strategy", default="THOROUGH", choices=["THOROUGH", "CONSERVATIVE"])
    ap.add_argument("--batch-limit", type=int, default=None)
    ap.add_argument("--cprofile", action="store_true")
    args = ap.parse_args(argv)
    if args.entries < 1:
        ap.error("--entries must be at least 1")
    strategy = SweepStrategy.parse(args.strategy)
    ensure_cassandra()
    store = open_backend_store("cassandra", "prof", "/tmp")
    try:
        store.create_table("backlog", strategy)
        store.create_table("scratch", strategy)
        rng = random.Random(3)
        cells = [cell(i) for i in range(args.entries)]
        values = {c: value(rng) for c in cells}
        items = list(values.items())
        commit_synthetic(store, "backlog", [dict(items[i : i + TXN_WRITES]) for i in range(0, len(items), TXN_WRITES)], threads=4)
        bulk_put(store, "scratch", values, 1)
        sweep_ts = store.sweep_timestamps.immutable_timestamp()
        settle_node()
        started = time.perf_counter()
        _raw_cassandra(store, "scratch", cells, 0, strategy is SweepStrategy.CONSERVATIVE, True)
        raw = time.perf_counter() - started
        settle_node()

        spent: collections.Counter = collections.Counter()
        calls: collections.Counter = collections.Counter()
        queue = store.queue  # the sweeper's queue (one per store)
        for obj, name, label in (
            (queue.reader, "read_batch", "queue reads (foreground and read-ahead)"),
            (store.transaction_service, "get_many", "commit timestamps (bulk reads)"),
            (SweepDeleter, "sweep_cells", "deletes (sentinels, ranged tombstones)"),
            (queue.cleaner, "clean", "queue cleanup"),
            (queue.progress, "get_progress", "progress read"),
            (queue.progress, "update_progress", "progress check-and-set"),
            (store.history, "record", "history"),
            (store.sweeper, "sweep_shard", "RUNS (all of the above)"),
        ):
            time_calls(obj, name, label, spent, calls)
        profile = None
        if args.cprofile:
            import cProfile

            profile = cProfile.Profile()
        probe = CpuProbe().start()
        started = time.perf_counter()
        if profile:
            profile.enable()
        totals = sweep_all_shards(store, strategy, sweep_ts, batch_limit=args.batch_limit)
        if profile:
            profile.disable()
        swept = time.perf_counter() - started
        cores = probe.stop()
    finally:
        drop_store(store)

    n = args.entries
    print(f"{args.strategy}, {n:,} entries, {totals['iterations']} iterations, all swept: {totals['entries_read'] == n}")
    print(f"raw batched: {raw:.3f} s, {n / raw:,.0f}/s")
    print(f"sweep:       {swept:.3f} s, {n / swept:,.0f}/s{' (profiled)' if profile else ''}; sweep / raw batched {raw / swept:.3f}")
    print("cores during the sweep: " + ", ".join(f"{k} {v:.2f}" for k, v in cores.items() if k.endswith("cores")))
    for label, seconds in spent.most_common():
        print(f"  {label:42s} {seconds:7.3f} s  x{calls[label]}")
    if profile:
        import pstats

        stats = pstats.Stats(profile)
        stats.sort_stats("tottime").print_stats(20)
        stats.sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
