"""The engine's sweep result carries the pair's lag and backlog after the run (``ShardSweepResult.lag``,
``backlog``, ``lag_seconds``; issue 34 item 3), filled by ``TargetedSweeper.sweep_shard`` from what the run
read, and equal to THE definition (:func:`airflow_atlas.status.lag.measure_pair`) - so the sweep operator's
metrics need no store read. On a real embedded store (no services)."""
from __future__ import annotations

import time

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.serialisation import to_json
from airflow_atlas.status import measure_pair
from airflow_atlas.store import AtlasStore
from airflow_atlas.workload import WorkloadSpec, run_workload


@pytest.fixture
def store(tmp_path):
    config = StoreConfig(unreadable_window_seconds=0, punch_interval_seconds=0.1)
    with AtlasStore.open(f"sqlite:///{tmp_path / 'lag.db'}", config) as s:
        s.initialize(shards=1)
        run_workload(s, WorkloadSpec(transactions=20, seed=3, dead_writer_ratio=0, abort_ratio=0, tables={"t": "THOROUGH"}))
        time.sleep(0.3)
        s.transactions.begin().abort()  # a fresh timestamp after the writes
        yield s


def test_a_partial_run_carries_the_lag_and_backlog_it_leaves(store):
    sweep_ts = store.sweep_timestamps.sweep_timestamp("THOROUGH")
    result = store.sweeper.sweep_shard(0, "THOROUGH", sweep_ts=sweep_ts, batch_limit=2, max_iterations=1)
    after = measure_pair(store, 0, "THOROUGH", sweep_ts, cap=100_000)
    assert result.status == "iteration_limit" and after.sweepable_entries > 0
    assert result.lag == after.lag_ts > 0
    assert result.backlog == after.backlog_entries > 0
    assert result.lag_seconds is None  # the sweeper cannot date the oldest entry (the status's clock can)
    assert to_json(result)["backlog"] == result.backlog  # in the one serialisation (XCom, Spark documents)


def test_a_caught_up_run_has_no_lag(store):
    result = store.sweeper.sweep_shard(0, "THOROUGH")
    after = measure_pair(store, 0, "THOROUGH", result.sweep_ts, cap=100_000)
    assert result.status == "caught_up"
    assert (result.lag, result.lag_seconds) == (0, 0.0) == (after.lag_ts, after.lag_seconds)
    assert result.backlog == after.backlog_entries  # what waits above the sweep timestamp, if anything


def test_runs_that_swept_nothing_carry_no_figures(store):
    dry = store.sweeper.sweep_shard(0, "THOROUGH", dry_run=True)
    assert dry.status == "dry_run" and (dry.lag, dry.backlog, dry.lag_seconds) == (None, None, None)
    lease = store.locks.acquire(store.sweeper.lock_name(0, "THOROUGH"), "someone-else", 30.0)
    assert lease is not None
    skipped = store.sweeper.sweep_shard(0, "THOROUGH")
    assert skipped.status == "skipped_locked" and (skipped.lag, skipped.backlog) == (None, None)
