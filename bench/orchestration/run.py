"""Benchmark ``orchestration``: what Airflow costs a targeted-sweep run as the shard count grows (issue 33, item 4).

A real Airflow (API server, scheduler with the LocalExecutor and 2 slots - the 2 worker slots of the
deployment -, DAG processor, SQLite metadata; :mod:`bench.lib.airflow`) runs ``atlas_targeted_sweep``
triggered over REST against one embedded store, grown to 8, 64 and 256 shards in turn (x 2 strategies: 16,
128 and 512 pairs). Before each run the benchmark commits a workload: **every_pair**, a small backlog in
every pair (about :data:`ENTRIES_PER_PAIR` queue entries each), or **few_pairs**, work in at most
:data:`FEW_PAIRS_WRITES` pairs. Per run:

* ``wall_seconds``: the DAG run's start to its end (Airflow's own timestamps);
* ``task_instances``: the run's task instances (mapped ones counted one by one);
* ``engine_seconds``: the pairs' sweep time in the engine (the summary task's ``engine_seconds``: the sum of
  each pair's ``duration_seconds``);
* ``overhead_per_pair_seconds``: the worker-slot seconds the run did not spend in the engine, per pair with
  work, ``(wall x SLOTS - engine) / pairs``: what orchestration (task start-up, scheduling, XCom) costs each
  pair;
* the metadata database's growth: the rows each table gained in the run (``rows_added``; their sum
  ``metadata_rows``), and per day at the default schedule (every 5 minutes: 288 runs) = rows per run x 288 -
  the measure that carries over to Postgres; the SQLite file's growth is recorded too (after a WAL
  checkpoint; it grows in pages and reuses freed ones, so one run's bytes are coarse). Task logs on disk
  likewise.

The DAG maps one ``sweep`` task per group of pairs (``compute_sweep_timestamps -> plan -> sweep[i] ->
publish_swept_tables -> summary``): the task takes each pair's lock, sweeps, reconciles and releases it, so a run
has a task instance per group and four more. Two group-size settings side by side, in the same Airflow,
alternating: ``default`` (``in_task_group_size`` null: a run maps at most ``max_parallel_groups`` = 16 groups)
and ``group_per_pair`` (1: a ``sweep`` task per pair). ``group_per_pair`` runs only at 8 shards
(:data:`MODES`): a task instance per pair is a task start-up per pair, 132 task instances a run at 64 shards and
516 at 256. Goals (issue 33): a run with
every one of 512 pairs holding a small backlog completes within the default 5-minute interval, and the
overhead per pair at 256 shards is within 2x of that at 8 (at the default settings). Benchmarks never assert
timings: the goals are reported met or missed.
"""
from __future__ import annotations

import json
import math
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.lib.log import log
from bench.lib.machine import machine_info
from bench.lib.results import Stopwatch, goal, result_document
from bench.lib.stats import median, rotated
from bench.lib.stores import open_store

NAME = "orchestration"
DAG_ID = "atlas_targeted_sweep"
SLOTS = 2
"""Task slots (the scheduler's parallelism): the 2-worker deployment."""
SCHEDULE_SECONDS = 300.0
"""The default schedule's interval (``targeted_sweep_schedule`` ``*/5 * * * *``): the goal, and runs per day."""
RUNS_PER_DAY = 86_400 / SCHEDULE_SECONDS
ENTRIES_PER_PAIR = 12
"""The every_pair scenario's small backlog: about this many queue entries per pair (hash-spread cells)."""
FEW_PAIRS_WRITES = 4
WRITES_PER_TRANSACTION = 4
RUN_TIMEOUT_SECONDS = 3600.0
STORE_CONFIG = {"unreadable_window_seconds": 1.0, "punch_interval_seconds": 1.0}
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},  # in_task_group_size null: sized to the run
    "group_per_pair": {"in_task_group_size": 1},
}
SETTINGS: dict[str, Any] = {
    "targeted_sweep_schedule": None,  # triggered by the benchmark only
    "retries": 1,
    "retry_delay_seconds": 5,
    "store_config": STORE_CONFIG,
}
MODES: dict[str, dict[str, Any]] = {
    "quick": {"shards": (8, 64, 256), "reps": 1, "group_per_pair_max_shards": 8},
    "full": {"shards": (8, 64, 256), "reps": 3, "group_per_pair_max_shards": 8},
}
SCENARIOS = ("every_pair", "few_pairs")
TABLES = {"orch_conservative": "CONSERVATIVE", "orch_thorough": "THOROUGH"}


# ----- pure parts (tests/bench/orchestration/test_run.py) -------------------------------------------------------
def overhead_per_pair(wall_seconds: float, engine_seconds: float, pairs: int, slots: int = SLOTS) -> float | None:
    """Worker-slot seconds of a run not spent in the engine, per pair (None without pairs)."""
    if pairs <= 0:
        return None
    return (wall_seconds * slots - engine_seconds) / pairs


def table_growth(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Rows added per table (tables that grew only)."""
    return {t: after[t] - before.get(t, 0) for t in sorted(after) if after[t] > before.get(t, 0)}


def median_or_none(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return median(known) if known else None


def summarize(runs: Sequence[dict]) -> dict:
    """Medians over the repetitions of one (shards, scenario, variant)."""
    keys = ("wall_seconds", "engine_seconds", "overhead_per_pair_seconds", "task_instances", "pairs",
            "db_bytes_per_run", "log_bytes_per_run", "metadata_rows")
    out: dict[str, Any] = {k: median_or_none([r.get(k) for r in runs]) for k in keys}
    out["states"] = sorted({r["state"] for r in runs})
    out["metadata_rows_per_day"] = None if out["metadata_rows"] is None else out["metadata_rows"] * RUNS_PER_DAY
    out["db_bytes_per_day"] = None if out["db_bytes_per_run"] is None else out["db_bytes_per_run"] * RUNS_PER_DAY
    out["log_bytes_per_day"] = None if out["log_bytes_per_run"] is None else out["log_bytes_per_run"] * RUNS_PER_DAY
    return out


def every_pair_transactions(shards: int) -> int:
    """Transactions of :data:`WRITES_PER_TRANSACTION` writes for about :data:`ENTRIES_PER_PAIR` entries in each
    of ``shards`` x 2 pairs."""
    return math.ceil(shards * len(TABLES) * ENTRIES_PER_PAIR / WRITES_PER_TRANSACTION)


# ----- measuring ------------------------------------------------------------------------------------------------
def _metadata_rows(db: Path) -> dict[str, int]:
    """Rows per table of Airflow's SQLite metadata database (read-only)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: con.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names}
    finally:
        con.close()


def _bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _db_bytes(db: Path) -> int:
    """The metadata file's size after a passive WAL checkpoint (the WAL's pages moved into the file where no
    reader holds them; Airflow goes on writing meanwhile)."""
    con = sqlite3.connect(str(db), timeout=30)
    try:
        con.execute("PRAGMA wal_checkpoint(PASSIVE)")
    finally:
        con.close()
    return db.stat().st_size


def _write_workload(store, scenario: str, shards: int, seed: int) -> None:
    from airflow_atlas.workload import WorkloadSpec, run_workload

    if scenario == "every_pair":
        transactions, rows = every_pair_transactions(shards), 1_000_000
    else:
        transactions, rows = 1, 10
    writes = FEW_PAIRS_WRITES if scenario == "few_pairs" else WRITES_PER_TRANSACTION
    run_workload(store, WorkloadSpec(
        transactions=transactions, writes_per_transaction=(writes, writes), tables=TABLES, rows=rows, columns=4,
        delete_ratio=0.0, dead_writer_ratio=0.0, abort_ratio=0.0, seed=seed))


def _seconds(run: dict) -> float | None:
    if not run.get("start_date") or not run.get("end_date"):
        return None
    return (datetime.fromisoformat(run["end_date"]) - datetime.fromisoformat(run["start_date"])).total_seconds()


def one_run(airflow, store, scenario: str, shards: int, seed: int) -> dict:
    _write_workload(store, scenario, shards, seed)
    # a punch above the workload's commits, older than the read-only window when the run starts, so that
    # CONSERVATIVE's sweep timestamp passes the workload too (the sweep timestamp provider punches, once a
    # punch interval at most)
    time.sleep(STORE_CONFIG["punch_interval_seconds"] + 0.2)
    store.sweep_timestamps.all()
    time.sleep(STORE_CONFIG["unreadable_window_seconds"] + 0.5)
    db, logs = airflow.home / "airflow.db", airflow.logs
    rows_before, db_before, logs_before = _metadata_rows(db), _db_bytes(db), _bytes(logs)
    run_id = airflow.trigger(DAG_ID)
    state = airflow.wait_run(DAG_ID, run_id, RUN_TIMEOUT_SECONDS)
    r = airflow.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}")
    r.raise_for_status()
    wall = _seconds(r.json())
    r = airflow.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances", params={"limit": 1})
    r.raise_for_status()
    tis = int(r.json()["total_entries"])  # every mapped instance counts (the list itself is paginated)
    summary = airflow.xcom(DAG_ID, run_id, "summary") if state == "success" else {}
    pairs, engine = int(summary.get("pairs") or 0), float(summary.get("engine_seconds") or 0.0)
    time.sleep(1.0)  # the last task's log and heartbeat rows
    rows_after = _metadata_rows(db)
    added = table_growth(rows_before, rows_after)
    out = {
        "state": state, "wall_seconds": wall, "task_instances": tis, "pairs": pairs, "engine_seconds": engine,
        "overhead_per_pair_seconds": None if wall is None else overhead_per_pair(wall, engine, pairs),
        "entries_read": summary.get("entries_read"), "by_status": summary.get("by_status"),
        "db_bytes_per_run": _db_bytes(db) - db_before, "log_bytes_per_run": _bytes(logs) - logs_before,
        "rows_added": added, "metadata_rows": sum(added.values()),
    }
    log(f"    {scenario} {state}: {pairs} pair(s), {tis} task instances, wall {wall} s, engine {engine:.1f} s, "
          f"overhead/pair {out['overhead_per_pair_seconds']}")
    return out


def _set_variable(airflow, variant: str) -> None:
    from airflow_atlas.airflow.settings import split_dag_settings

    _, variable = split_dag_settings({**SETTINGS, **VARIANTS[variant]})
    body = {"key": "atlas_settings", "value": json.dumps(variable)}
    r = airflow.api("PATCH", "/api/v2/variables/atlas_settings", json=body)
    if r.status_code == 404:
        r = airflow.api("POST", "/api/v2/variables", json=body)
    r.raise_for_status()


def run(*, quick: bool, reps: int | None = None) -> dict:
    """``reps``: repetitions per cell (default: the mode's; ``bench.run``'s default of 3 applies in full mode)."""
    from bench.lib.airflow import bench_airflow

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    watch = Stopwatch()
    mode = MODES["quick" if quick else "full"]
    reps = mode["reps"] if quick or reps is None else reps
    tmpdir = Path(tempfile.mkdtemp(prefix="atlas-bench-orchestration-"))
    path = tmpdir / "atlas.db"
    connection = {"conn_type": "atlas_embedded", "host": str(path)}
    store = open_store(f"sqlite:///{path}", mode["shards"][0], **STORE_CONFIG)
    results: dict[str, Any] = {}
    try:
        with bench_airflow(tmpdir / "airflow", connection, SETTINGS, parallelism=SLOTS, variable_in_database=True) as airflow:
            for shards in mode["shards"]:
                store.initialize(shards=shards)
                variants = [v for v in VARIANTS if v == "default" or shards <= mode["group_per_pair_max_shards"]]
                for scenario in SCENARIOS:
                    runs: dict[str, list[dict]] = {v: [] for v in variants}
                    for rep in range(reps):
                        for variant in rotated(variants, rep):
                            log(f"  {shards} shards, {scenario}, {variant}, repetition {rep + 1}/{reps}")
                            _set_variable(airflow, variant)
                            runs[variant].append(one_run(airflow, store, scenario, shards, seed=len(results) * 1000 + rep))
                    for variant, rs in runs.items():
                        results[f"{shards}/{scenario}/{variant}"] = {
                            "shards": shards, "scenario": scenario, "variant": variant, "runs": rs, **summarize(rs)}
        machine = machine_info(None)
    finally:
        store.close()
        shutil.rmtree(tmpdir, ignore_errors=True)
    return result_document(
        NAME, quick=quick, backend="sqlite", watch=watch, machine=machine,
        params={**mode, "reps": reps, "slots": SLOTS, "variants": VARIANTS, "settings": SETTINGS,
                "entries_per_pair": ENTRIES_PER_PAIR, "few_pairs_writes": FEW_PAIRS_WRITES,
                "runs_per_day": RUNS_PER_DAY, "placement": "all processes share the machine's cores"},
        results=results, goals=goals(results, mode), runs=None, method=__doc__ or "",
    )


def goals(results: dict, mode: dict) -> list[dict]:
    biggest, smallest = max(mode["shards"]), min(mode["shards"])
    full = results.get(f"{biggest}/every_pair/default", {})
    small = results.get(f"{smallest}/every_pair/default", {})
    ratio = None
    if full.get("overhead_per_pair_seconds") and small.get("overhead_per_pair_seconds"):
        ratio = full["overhead_per_pair_seconds"] / small["overhead_per_pair_seconds"]
    return [
        goal(f"a run with every one of {2 * biggest} pairs holding a small backlog (default settings)",
               full.get("wall_seconds"), SCHEDULE_SECONDS, "<=", " s", note="the default 5-minute schedule interval"),
        goal(f"overhead per pair at {biggest} shards / at {smallest} (default settings)", ratio, 2.0, "<=", "x"),
    ]
