"""Benchmark ``sustained``: the sweep's lag under steady ingest, with a real Airflow scheduler (issue 24, item 3).

A real Airflow (API server, scheduler with the LocalExecutor, DAG processor; :mod:`bench.lib.airflow`)
runs ``atlas_targeted_sweep`` every minute (``targeted_sweep_schedule``) while this process commits
transactions at a steady rate (:func:`airflow_atlas.workload.run_workload`, paced), step by step at rising
rates. Every few seconds it samples the lag and the backlog through THE definition
(:func:`airflow_atlas.status.lag.measure_store` and :func:`~airflow_atlas.status.lag.overall`): the lag is
the age of the oldest sweepable unswept entry over all pairs, the backlog the sweepable entries (below the
sweep timestamps, not yet swept) and everything queued. Per step: lag p50/p99/max, and whether the backlog
stays bounded (:func:`judge_bounded`: the backlog's troughs - its minimum per schedule interval, just after
a sweep - do not keep growing). The rates rise until the first unbounded step, or until the workload cannot
commit faster (a step short of its target that committed less than 1.1x the previous step: the machine's
limit, not the sweep's; :func:`stop_reason`); the highest bounded rate is what the scheduled sweep
carries. Goals: lag p99 <= 2 schedule intervals at that rate, and at every rate the workload reached.

On the embedded store (SQLite file) and the local Cassandra node (a keyspace of its own, dropped at the end).
The sweep runs with the engine's default intensity settings (what a deployment gets), the pairs in one
mapped task group (a loaded 2-core machine; ``in_task_group_size``), CONSERVATIVE's read-only window 1 s
(``unreadable_window_seconds``) and punches every second (``punch_interval_seconds``: the clock of the
lag). Benchmarks never assert timings: the goal is reported met or missed.
"""
from __future__ import annotations

import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.lib.log import log
from bench.lib.machine import machine_info
from bench.lib.results import Stopwatch, goal, result_document
from bench.lib.stores import DEFAULT_CASSANDRA, cassandra_url, drop_store, new_keyspace_name, open_store

from .summary import (
    BOUNDED_GROWTH_FRACTION,
    highest_bounded,
    judge_bounded,
    lag_summary,
    percentile,
    stop_reason,
    worst_lag,
)

NAME = "sustained"
SCHEDULE = "* * * * *"
INTERVAL_SECONDS = 60.0
"""The schedule's interval (the goal is in these)."""
SAMPLE_SECONDS = 5.0
SHARDS = 4
WRITES_PER_TRANSACTION = 5
SAMPLE_CAP = 50_000
"""Queue entries counted per pair and sample (a capped count means "at least")."""
LAG_GOAL_INTERVALS = 2.0
STORE_CONFIG = {"unreadable_window_seconds": 1.0, "punch_interval_seconds": 1.0, "transaction_lease_seconds": 600.0}
SETTINGS = {
    "in_task_group_size": 2 * SHARDS,  # every pair in one mapped group: fewer task processes per run
    "retries": 1,
    "retry_delay_seconds": 5,
    "max_retry_delay_seconds": 10,
    "targeted_sweep_schedule": SCHEDULE,
    "store_config": STORE_CONFIG,
}
WORKLOAD_THREADS = 4
"""Committing threads (each its own store: one thread is latency-bound well below the sweep's capacity)."""
WORKLOAD_LIMITED = 0.9
"""A step whose workload reached less than this share of its target rate is marked ``workload_limited``."""
MODES: dict[str, dict[str, Any]] = {
    # transactions per second of WRITES_PER_TRANSACTION writes each, and seconds per step
    "quick": {"rates": (10, 60, 200), "step_seconds": 180.0},
    "full": {"rates": (10, 30, 60, 120, 240, 480), "step_seconds": 600.0},
}


# ----- measuring ------------------------------------------------------------------------------------------------
class _SteadyWorkload(threading.Thread):
    """Commits ``rate`` transactions per second (paced every 0.5 s) until stopped."""

    def __init__(self, store, rate: float, seed: int):
        super().__init__(name="sustained-workload", daemon=True)
        self.store, self.rate, self.seed = store, rate, seed
        self.stop_event = threading.Event()
        self.transactions = self.writes = self.conflicts = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        from airflow_atlas.workload import WorkloadSpec, run_workload

        started = time.monotonic()
        try:
            while not self.stop_event.is_set():
                due = int(self.rate * (time.monotonic() - started)) - self.transactions
                if due <= 0:
                    self.stop_event.wait(0.5 / max(self.rate, 1.0))
                    continue
                n = min(due, max(1, int(self.rate)))  # never more than a second's worth at once
                report = run_workload(self.store, WorkloadSpec(
                    transactions=n, writes_per_transaction=(WRITES_PER_TRANSACTION, WRITES_PER_TRANSACTION),
                    rows=2000, columns=4, delete_ratio=0.1, dead_writer_ratio=0.0, abort_ratio=0.0,
                    seed=self.seed + self.transactions))
                self.transactions += n
                self.writes += report.writes
                self.conflicts += report.conflicts
        except Exception as exc:  # this thread stops; the step reports it (and the lower rate it reached)
            self.error = exc


def sample(store) -> dict:
    """One sample of lag and backlog over every pair (THE definition)."""
    from airflow_atlas.status.lag import measure_store, overall

    now = time.time()
    o = overall(measure_store(store, cap=SAMPLE_CAP, now=now))
    return {"at": round(now, 2), "lag_seconds": o.lag_seconds, "lower_bound": o.lag_seconds_is_lower_bound,
            "sweepable": o.sweepable_entries, "backlog": o.backlog_entries, "capped": o.capped}


def run_step(sampler_store, workload_stores: Sequence, airflow, rate: float, seconds: float, seed: int) -> dict:
    workers = [_SteadyWorkload(store, rate / len(workload_stores), seed + 100 * i) for i, store in enumerate(workload_stores)]
    samples = []
    started = time.time()
    for w in workers:
        w.start()
    try:
        k = 0
        while time.time() - started < seconds:
            airflow.check_alive()
            samples.append(sample(sampler_store))
            k += 1
            time.sleep(max(0.0, started + k * SAMPLE_SECONDS - time.time()))
    finally:
        for w in workers:
            w.stop_event.set()
        for w in workers:
            w.join(timeout=60)
    elapsed = time.time() - started
    ingest = sum(w.writes for w in workers) / elapsed
    runs = _sweep_runs(sampler_store, started, started + elapsed)
    series = [(s["at"], s["sweepable"]) for s in samples]
    step: dict[str, Any] = {
        "rate_transactions_per_second": rate,
        "target_entries_per_second": rate * WRITES_PER_TRANSACTION,
        "achieved_entries_per_second": round(ingest, 1),
        "workload_limited": ingest < WORKLOAD_LIMITED * rate * WRITES_PER_TRANSACTION,
        "seconds": round(elapsed, 1),
        "transactions": sum(w.transactions for w in workers),
        "conflicts": sum(w.conflicts for w in workers),
        "workload_errors": [repr(w.error) for w in workers if w.error is not None],  # a thread that failed stopped
        "lag_seconds": lag_summary([s["lag_seconds"] for s in samples]),
        "lag_lower_bound_samples": sum(1 for s in samples if s["lower_bound"]),
        "backlog": {
            **judge_bounded(series, INTERVAL_SECONDS, ingest),
            "sweepable_max": max((s["sweepable"] for s in samples), default=None),
            "sweepable_last": samples[-1]["sweepable"] if samples else None,
            "queued_max": max((s["backlog"] for s in samples), default=None),
            "capped": any(s["capped"] for s in samples),
        },
        "sweep_runs": runs,
        "samples": [{**s, "at": round(s["at"] - started, 1)} for s in samples],
    }
    lag = step["lag_seconds"]
    log(f"  {rate:g} txn/s ({ingest:.0f} entries/s): lag p50 {lag['p50']} p99 {lag['p99']} max {lag['max']} s; "
          f"backlog bounded: {step['backlog']['bounded']} (troughs {step['backlog']['troughs']}); runs {runs}")
    return step


def _sweep_runs(store, start: float, end: float) -> dict:
    """The pairs' runs that ended within the step, from the store's sweep history: how many, the entries they read,
    their pace at the end (median, max), how often it halved, and why it ended where it did (the reasons up to
    their first colon, counted) - what held the sweep's rate, beside the lag."""
    from collections import Counter

    records = [r for shard in range(SHARDS) for strategy in ("CONSERVATIVE", "THOROUGH")
               for r in store.history.runs(shard, strategy, limit=200) if start <= r.get("at", 0) <= end]
    paces = sorted(r["pace_entries_per_second"] for r in records if r.get("pace_entries_per_second") is not None)
    return {
        "runs": len(records),
        "entries_read": sum(r.get("entries_read", 0) for r in records),
        "pace_median": percentile(paces, 50), "pace_max": paces[-1] if paces else None,
        "pace_backoffs": sum(r.get("pace_backoffs", 0) for r in records),
        "seconds_paced": round(sum(r.get("seconds_paced", 0.0) for r in records), 1),
        "reasons": dict(Counter(str(r.get("pace_reason")).split(":")[0] for r in records).most_common(5)),
    }


def _dag_run_summary(runs: list[dict]) -> dict:
    from datetime import datetime

    states: dict[str, int] = {}
    durations = []
    for r in runs:
        states[r["state"]] = states.get(r["state"], 0) + 1
        if r.get("start") and r.get("end"):
            durations.append((datetime.fromisoformat(r["end"]) - datetime.fromisoformat(r["start"])).total_seconds())
    return {"runs": len(runs), "states": states, "duration_p50": percentile(durations, 50),
            "duration_max": max(durations) if durations else None}


def run_backend(backend: str, mode: dict, tmpdir: Path) -> dict:
    from bench.lib.airflow import bench_airflow, dag_runs

    connection: dict[str, Any]
    if backend == "sqlite":
        path = tmpdir / "atlas.db"
        url, connection = f"sqlite:///{path}", {"conn_type": "atlas_embedded", "host": str(path)}
    else:
        keyspace = new_keyspace_name("sustained")
        host, port = DEFAULT_CASSANDRA.rsplit(":", 1)
        url = cassandra_url(keyspace)
        connection = {"conn_type": "cassandra", "host": host, "port": int(port), "schema": keyspace}
    # the benchmark's own stores (they never sweep; the DAG's sweeps get the engine defaults + STORE_CONFIG)
    sampler = open_store(url, SHARDS, **STORE_CONFIG)
    workload_stores = [open_store(url, SHARDS, **STORE_CONFIG) for _ in range(WORKLOAD_THREADS)]
    steps: list[dict] = []
    out: dict = {"store": sampler.describe(), "steps": steps}
    try:
        with bench_airflow(tmpdir / f"airflow-{backend}", connection, SETTINGS) as airflow:
            for i, rate in enumerate(mode["rates"]):
                log(f"  {backend}: step {i + 1}/{len(mode['rates'])}, {rate} transactions/s for {mode['step_seconds']:.0f}s")
                steps.append(run_step(sampler, workload_stores, airflow, rate, mode["step_seconds"], seed=1000 * (i + 1)))
                out["stopped"] = stop_reason(steps)
                if out["stopped"] is not None:
                    log(f"  {backend}: the rates stop here ({out['stopped']})")
                    break
            out["dag_runs"] = _dag_run_summary(dag_runs(airflow))
        out["machine"] = machine_info(sampler.kvs.session if backend == "cassandra" else None)
    finally:
        for store in workload_stores:
            store.close()
        drop_store(sampler)
    best = highest_bounded(steps)
    out["highest_bounded_entries_per_second"] = None if best is None else best["achieved_entries_per_second"]
    out["lag_p99_at_highest_bounded"] = None if best is None else best["lag_seconds"]["p99"]
    worst = worst_lag(steps)
    out["worst_lag_entries_per_second"] = None if worst is None else worst["achieved_entries_per_second"]
    out["worst_lag_p99"] = None if worst is None else worst["lag_seconds"]["p99"]
    out["limit_found"] = any(step["backlog"]["bounded"] is False for step in steps)
    out["lag_goal_holds_up_to_entries_per_second"] = max(
        (st["achieved_entries_per_second"] for st in steps
         if st["lag_seconds"]["p99"] is not None and st["lag_seconds"]["p99"] <= LAG_GOAL_INTERVALS * INTERVAL_SECONDS),
        default=None)
    return out


def _intensity_defaults() -> dict:
    """The engine's intensity settings the DAG's sweeps run with (not set by the benchmark)."""
    from airflow_atlas.config import StoreConfig

    config = StoreConfig()
    return {"sweep_max_entries_per_second": config.sweep_max_entries_per_second,
            "sweep_latency_target": config.sweep_latency_target}


def run(*, quick: bool, reps: int, backends: Sequence[str] = ("sqlite", "cassandra"),
        rates: Sequence[int] | None = None) -> dict:
    """``reps`` is not used: one long run per rate (its samples are the repetitions). ``rates``: instead of the
    mode's (transactions/s, rising), e.g. to continue above the full mode's highest rate."""
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (e.g. timeout) unwinds like Ctrl-C: the Airflow process groups are stopped, the keyspace dropped
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    watch = Stopwatch()
    mode = MODES["quick" if quick else "full"]
    if rates:
        if any(r <= 0 for r in rates) or list(rates) != sorted(set(rates)):
            raise ValueError(f"rates must be positive and rising, got {list(rates)}")
        mode = {**mode, "rates": tuple(rates)}
    tmpdir = Path(tempfile.mkdtemp(prefix="atlas-bench-sustained-"))
    results: dict = {}
    try:
        for backend in backends:
            log(f"- {backend}")
            results[backend] = run_backend(backend, mode, tmpdir)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    # the node's machine info (Cassandra version, heap, JIT) when it ran; any backend's otherwise
    found = {backend: r.pop("machine") for backend, r in results.items() if "machine" in r}
    machine = found.get("cassandra") or next(iter(found.values()), None) or machine_info(None)
    goals = []
    for backend, r in results.items():
        target = LAG_GOAL_INTERVALS * INTERVAL_SECONDS
        rate = r["highest_bounded_entries_per_second"]
        goals.append(goal(f"{backend}: lag p99 at the highest bounded rate ({rate} entries/s)",
                            r["lag_p99_at_highest_bounded"], target, "<=", " s",
                            note=f"{LAG_GOAL_INTERVALS:g} schedule intervals of {INTERVAL_SECONDS:g} s"))
        goals.append(goal(f"{backend}: lag p99 at every rate the workload reached (the worst: "
                          f"{r['worst_lag_entries_per_second']} entries/s)", r["worst_lag_p99"], target, "<=", " s",
                          note="issue 46: within the goal at every step, bounded or not"))
    return result_document(
        NAME, quick=quick, backend="+".join(backends), watch=watch, machine=machine,
        params={**mode, "schedule": SCHEDULE, "interval_seconds": INTERVAL_SECONDS, "sample_seconds": SAMPLE_SECONDS,
                "shards": SHARDS, "writes_per_transaction": WRITES_PER_TRANSACTION, "settings": SETTINGS,
                "sample_cap": SAMPLE_CAP, "bounded_growth_fraction": BOUNDED_GROWTH_FRACTION,
                "workload_threads": WORKLOAD_THREADS,
                "sweep_intensity_defaults": _intensity_defaults()},
        results=results, goals=goals, runs=None, method=__doc__ or "",
    )
