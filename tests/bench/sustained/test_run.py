"""bench/sustained/run.py's record of the sweep's runs in a step (from the store's sweep history): only the runs
that ended within the step, their entries, pace, halvings and reasons."""
from __future__ import annotations

import time

from airflow_atlas.store import AtlasStore
from bench.sustained.run import _sweep_runs


def _run(shard: int, strategy: str, at: float, pace: float | None, backoffs: int, reason: str | None) -> dict:
    return {"shard": shard, "strategy": strategy, "status": "caught_up", "at": at, "entries_read": 100,
            "pace_entries_per_second": pace, "pace_backoffs": backoffs, "seconds_paced": 0.5, "pace_reason": reason}


def test_the_runs_of_a_step_are_those_that_ended_within_it(tmp_path):
    store = AtlasStore.open(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        store.initialize(shards=4)
        now = time.time()
        store.history.record_run(_run(0, "CONSERVATIVE", now - 100, 2000.0, 0, "resting: clients alive"))  # before
        store.history.record_run(_run(0, "THOROUGH", now - 5, 250.0, 1, "running: p99 over the target"))
        store.history.record_run(_run(3, "CONSERVATIVE", now - 3, 500.0, 0, "running: raised"))
        store.history.record_run(_run(1, "THOROUGH", now - 2, None, 0, None))
        got = _sweep_runs(store, now - 10, now)
    finally:
        store.close()
    assert got == {"runs": 3, "entries_read": 300, "pace_median": 250.0, "pace_max": 500.0, "pace_backoffs": 1,
                   "seconds_paced": 1.5, "reasons": {"running": 2, "None": 1}}
