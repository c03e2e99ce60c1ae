"""Benchmark 1 (and the first half of 6): targeted sweep vs legacy (scan-based) sweep.

Per table size N there is one store (a Cassandra keyspace, or one SQLite file) with two identical copies
of the table: ``tv_targeted`` (written through the store's TransactionManager, so every write is queued)
and ``tv_legacy`` (written through a TransactionManager on the same services but without the sweep queue:
the legacy world). Both are CONSERVATIVE.

"Since the last sweep": the base data (N cells, one version each) is loaded as committed transactions of
10,000 cells, already swept: every cell carries the CONSERVATIVE sentinel, nothing is queued for it, and
the targeted copy's shard progress is advanced past the load (exactly what a targeted sweep of the load
followed by queue cleaning leaves; the legacy copy is what a legacy sweep of the load leaves: sentinels,
nothing to delete). Then each repetition rewrites K cells of both copies through real transactions of 10
writes, takes one sweep timestamp, and times, in rotating order, targeted sweep of the whole queue (all
shards, in-process) and legacy sweep of the legacy copy (one full scan), for every size.

Two rewrite sets: ``pct`` (K = 1% of N, the headline) and ``fixed`` (K = 1% of the smallest size, the same
for every size: the test of "targeted time does not depend on the table size").
"""
from __future__ import annotations

import random
import time

from bench.lib.load import (
    COLUMNS_PER_ROW,
    advance_progress,
    cell,
    load_committed_base,
    run_transactions,
    sweep_all_shards,
    value,
)
from bench.lib.log import log
from bench.lib.machine import load_average, machine_info
from bench.lib.results import Stopwatch, goal, result_document
from bench.lib.stats import median, rotated
from bench.lib.stores import drop_store, open_backend_store, queueless_manager
from bench.lib.timing import timed

NAME = "targeted_vs_legacy"
TARGETED = "tv_targeted"
LEGACY = "tv_legacy"
TXN_WRITES = 10


def _sizes(quick: bool, backend: str) -> list[int]:
    if quick:
        return [1_000, 10_000]
    return [100_000, 1_000_000]


class _Copy:
    """One table size: a store with the two copies and the two transaction managers."""

    def __init__(self, n: int, store, seed: int):
        from airflow_atlas.kvs.tables import SweepStrategy

        self.n = n
        self.store = store
        self.rng = random.Random(seed)
        store.create_table(TARGETED, SweepStrategy.CONSERVATIVE)
        store.create_table(LEGACY, SweepStrategy.CONSERVATIVE)
        self.queued = store.transactions
        self.unqueued = queueless_manager(store)

    def load(self) -> float:
        started = time.perf_counter()
        last = load_committed_base(self.store, [TARGETED, LEGACY], self.n)
        advance_progress(self.store, last)
        return time.perf_counter() - started

    def rewrite(self, k: int, threads: int) -> dict:
        """Rewrite ``k`` distinct random cells of both copies (same cells, same values)."""
        picks = self.rng.sample(range(self.n), k)
        writes = {cell(i): value(self.rng) for i in picks}
        items = list(writes.items())
        batches = [dict(items[i : i + TXN_WRITES]) for i in range(0, len(items), TXN_WRITES)]
        out: dict = {}
        with timed(out, "targeted_copy_seconds"):
            run_transactions(self.queued, TARGETED, batches, threads)
        with timed(out, "legacy_copy_seconds"):
            run_transactions(self.unqueued, LEGACY, batches, threads)
        out["transactions"] = len(batches)
        return out

    def sweep_ts(self) -> int:
        # Both methods get the same sweep timestamp: the immutable timestamp (no transaction is open and
        # no read-only reader needs protecting in a benchmark), so they have exactly the same work to do.
        return self.store.sweep_timestamps.immutable_timestamp()

    def targeted(self, sweep_ts: int) -> dict:
        from airflow_atlas.kvs.tables import SweepStrategy

        started = time.perf_counter()
        totals = sweep_all_shards(self.store, SweepStrategy.CONSERVATIVE, sweep_ts)
        totals["seconds"] = time.perf_counter() - started
        return totals

    def legacy(self, sweep_ts: int) -> dict:
        started = time.perf_counter()
        r = self.store.legacy_sweeper.sweep_table(LEGACY, sweep_ts=sweep_ts)
        return {
            "seconds": time.perf_counter() - started,
            "cells_examined": r.counts.cells_examined,
            "versions_examined": r.counts.versions_examined,
            "versions_deleted": r.counts.versions_deleted,
            "sentinels_written": r.counts.sentinels_written,
        }


def run(*, quick: bool, reps: int, backend: str = "cassandra", tmpdir: str = "/tmp", sizes=None, name: str = NAME) -> dict:
    watch = Stopwatch()
    sizes = sorted(sizes or _sizes(quick, backend))
    fixed_k = max(1, sizes[0] // 100)
    threads = 4 if backend == "cassandra" else 1
    copies: list[_Copy] = []
    session = None
    runs: list[dict] = []
    loads: dict = {}
    try:
        for n in sizes:
            store = open_backend_store(backend, f"tv{n}", tmpdir)
            if backend == "cassandra" and session is None:
                session = store.kvs.session
            copies.append(_Copy(n, store, seed=n))
            log(f"{name}: loading {n:,} cells x 2 copies ({backend})")
            loads[str(n)] = round(copies[-1].load(), 2)
        machine = machine_info(session)
        for rep in range(reps):
            for kind in ("fixed", "pct"):
                active = copies
                rec = {"rep": rep, "set": kind, "load_avg_1m": load_average()["1m"], "sizes": {}}
                for cp in active:
                    k = fixed_k if kind == "fixed" else max(1, cp.n // 100)
                    rw = cp.rewrite(k, threads)
                    rec["sizes"][str(cp.n)] = {"k": k, "rewrite": rw, "sweep_ts": cp.sweep_ts()}
                tasks = [(cp, m) for cp in active for m in ("targeted", "legacy")]
                order = rotated(tasks, rep)
                rec["order"] = [f"{m}@{cp.n}" for cp, m in order]
                for cp, method in order:
                    entry = rec["sizes"][str(cp.n)]
                    log(f"{name}: rep {rep} {kind} {method} N={cp.n:,} K={entry['k']:,}")
                    entry[method] = getattr(cp, method)(entry["sweep_ts"])
                for entry in rec["sizes"].values():
                    entry["ratio_legacy_over_targeted"] = entry["legacy"]["seconds"] / entry["targeted"]["seconds"]
                    entry["checks"] = {
                        "targeted_cells_tombstoned_eq_k": entry["targeted"]["cells_tombstoned"] == entry["k"],
                        "legacy_versions_deleted_eq_k": entry["legacy"]["versions_deleted"] == entry["k"],
                    }
                runs.append(rec)
        results = _summarize(runs, sizes, fixed_k)
    finally:
        for cp in copies:
            drop_store(cp.store)
    big = str(sizes[-1])
    goals = [
        goal(f"targeted speed-up over legacy at {sizes[-1]:,} cells, 1% rewritten", results["pct"].get(big, {}).get("ratio"), 50, ">=", "x"),
        goal(
            f"targeted time {sizes[-1]:,} vs {sizes[0]:,} cells, same {fixed_k:,} rewrites",
            results["independence"]["targeted_big_over_small_fixed_k"], 1.3, "<=", "x",
        ),
        goal(
            f"targeted time per swept entry {sizes[-1]:,} vs {sizes[0]:,} cells, 1% rewritten",
            results["independence"]["targeted_per_entry_big_over_small_pct"], 1.3, "<=", "x",
        ),
        goal(
            f"legacy time grows with size ({sizes[-1]:,} vs {sizes[0]:,}, same rewrites)",
            results["independence"]["legacy_big_over_small_fixed_k"], 2.0, ">=", "x",
            note="'grows': at least 2x for 10x the cells",
        ),
    ]
    return result_document(
        name, quick=quick, backend=backend, watch=watch, machine=machine,
        params={
            "sizes": sizes,
            "fixed_k": fixed_k,
            "pct": 1,
            "columns_per_row": COLUMNS_PER_ROW,
            "transaction_writes": TXN_WRITES,
            "rewrite_threads": threads,
            "strategy": "CONSERVATIVE",
            "shards": copies[0].store.config.initial_shards if copies else 1,
            "batch_limit": copies[0].store.config.batch_limit if copies else None,
            "repetitions": reps,
            "load_seconds": loads,
        },
        results=results, goals=goals, runs=runs, method=__doc__,
    )


def _summarize(runs: list[dict], sizes: list[int], fixed_k: int) -> dict:
    out: dict = {"pct": {}, "fixed": {}, "independence": {}}
    for kind in ("pct", "fixed"):
        for n in sizes:
            entries = [r["sizes"][str(n)] for r in runs if r["set"] == kind and str(n) in r["sizes"]]
            if not entries:
                continue
            out[kind][str(n)] = {
                "k": entries[0]["k"],
                "targeted_seconds": median(e["targeted"]["seconds"] for e in entries),
                "legacy_seconds": median(e["legacy"]["seconds"] for e in entries),
                "ratio": median(e["ratio_legacy_over_targeted"] for e in entries),
                "targeted_entries_per_second": median(e["k"] / e["targeted"]["seconds"] for e in entries),
                "legacy_versions_per_second": median(
                    e["legacy"]["versions_examined"] / e["legacy"]["seconds"] for e in entries
                ),
                "checks_ok": all(all(e["checks"].values()) for e in entries),
                "repetitions": len(entries),
            }
    big, small = str(sizes[-1]), str(sizes[0])
    fixed_runs = [r for r in runs if r["set"] == "fixed"]
    tb = [r["sizes"][big]["targeted"]["seconds"] / r["sizes"][small]["targeted"]["seconds"] for r in fixed_runs]
    lb = [r["sizes"][big]["legacy"]["seconds"] / r["sizes"][small]["legacy"]["seconds"] for r in fixed_runs]
    per_entry = []
    for r in runs:
        if r["set"] != "pct":
            continue
        e_big, e_small = r["sizes"][big], r["sizes"][small]
        per_entry.append((e_big["targeted"]["seconds"] / e_big["k"]) / (e_small["targeted"]["seconds"] / e_small["k"]))
    out["independence"] = {
        "targeted_big_over_small_fixed_k": median(tb) if tb else None,
        "legacy_big_over_small_fixed_k": median(lb) if lb else None,
        "targeted_per_entry_big_over_small_pct": median(per_entry) if per_entry else None,
        "fixed_k": fixed_k,
    }
    return out
