"""``TargetedSweeper.sweep_shard`` owns a pair's lease for the whole run (issue 47 item 1): it waits up to
``lock_wait_seconds`` for a lease another holder has, takes over its own holder's lease (a retry fences off
the run that died), reconciles the pair's queue below the progress it ends with while it still holds the
lease, and records an interrupted run as failed after releasing its lease. On a real embedded store (no
services)."""
from __future__ import annotations

import time

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.serialisation import to_json
from airflow_atlas.store import AtlasStore
from airflow_atlas.sweep.queue.constants import FINE_PARTITION
from airflow_atlas.workload import WorkloadSpec, run_workload


@pytest.fixture
def store(tmp_path):
    config = StoreConfig(unreadable_window_seconds=0, punch_interval_seconds=0.1)
    with AtlasStore.open(f"sqlite:///{tmp_path / 'run.db'}", config) as s:
        s.initialize(shards=1)
        run_workload(s, WorkloadSpec(transactions=20, seed=3, dead_writer_ratio=0, abort_ratio=0, tables={"t": "THOROUGH"}))
        time.sleep(0.3)
        s.transactions.begin().abort()  # a fresh timestamp after the writes
        yield s


def _lock(store):
    return store.locks.describe(store.sweeper.lock_name(0, "THOROUGH"))


def test_a_run_waits_for_a_lease_another_holder_lets_expire(store, tmp_path):
    other = store.locks.acquire(store.sweeper.lock_name(0, "THOROUGH"), "someone-else", 0.5)
    skipped = store.sweeper.sweep_shard(0, "THOROUGH", holder="me")  # the setting's default, 0: one try
    assert skipped.status == "skipped_locked" and skipped.lock_holder == "someone-else"
    assert skipped.queue_rows_reconciled is None
    result = store.sweeper.sweep_shard(0, "THOROUGH", holder="me", lock_wait_seconds=10)
    assert result.status == "caught_up" and result.lock_holder == "me"
    state = _lock(store)
    assert state.holder is None and state.token == other.token + 1  # taken over once, released at the end
    waiting = StoreConfig(unreadable_window_seconds=0, lock_wait_seconds=10)  # the setting, as every process reads it
    with AtlasStore.open(f"sqlite:///{tmp_path / 'run.db'}", waiting) as again:
        store.locks.acquire(store.sweeper.lock_name(0, "THOROUGH"), "someone-else", 0.5)
        assert again.sweeper.sweep_shard(0, "THOROUGH", holder="me").status == "caught_up"


def test_the_same_holder_takes_over_its_own_lease(store):
    """A retry (the same holder) need not wait for the lease its dead run left: it takes it over."""
    dead = store.locks.acquire(store.sweeper.lock_name(0, "THOROUGH"), "airflow:dag:run:THOROUGH:0", 60.0)
    result = store.sweeper.sweep_shard(0, "THOROUGH", holder="airflow:dag:run:THOROUGH:0")
    assert result.status == "caught_up"
    state = _lock(store)
    assert state.holder is None and state.token == dead.token + 1


def test_a_run_reconciles_the_queue_below_the_progress_it_ends_with(store):
    store.timestamps.fresh_timestamps(3 * FINE_PARTITION)  # past the workload's fine partition
    sweep_ts = store.sweep_timestamps.sweep_timestamp("THOROUGH")
    # Progress moved without the clean (a cleaner that died): the queue keeps rows wholly below it.
    store.queue.progress.update_progress(0, "THOROUGH", sweep_ts - 1)
    left = store.queue.cleaner.queue_rows_below(0, "THOROUGH", sweep_ts - 1)
    assert left.cells_rows or left.timestamps_rows
    dry = store.sweeper.sweep_shard(0, "THOROUGH", sweep_ts=sweep_ts, dry_run=True)
    assert dry.queue_rows_reconciled is None  # a dry run writes nothing
    result = store.sweeper.sweep_shard(0, "THOROUGH", sweep_ts=sweep_ts)
    assert result.status == "caught_up" and result.queue_rows_reconciled > 0
    after = store.queue.cleaner.queue_rows_below(0, "THOROUGH", sweep_ts - 1)
    assert not (after.cells_rows or after.dedicated_rows or after.timestamps_rows)
    again = store.sweeper.sweep_shard(0, "THOROUGH", sweep_ts=sweep_ts)
    assert again.queue_rows_reconciled == 0  # idempotent
    assert to_json(result)["queue_rows_reconciled"] == result.queue_rows_reconciled


class Interrupted(BaseException):
    """What a task's timeout or a signal raises in the sweeping thread (not an ``Exception``)."""


def test_an_interrupted_run_releases_its_lease_and_is_recorded_failed(store):
    def interrupt(iteration):
        raise Interrupted("the task timed out")

    with pytest.raises(Interrupted):
        store.sweeper.sweep_shard(0, "THOROUGH", holder="me", batch_limit=2, on_iteration=interrupt)
    assert _lock(store).holder is None
    (run, *_) = store.history.runs(0, "THOROUGH")
    assert run["status"] == "failed" and run["error"] == "Interrupted: the task timed out"


@pytest.mark.parametrize("wait", [-1, float("nan"), "5", True, 86_401])
def test_a_bad_lock_wait_is_refused(store, wait):
    with pytest.raises(InvalidInputError, match="lock_wait_seconds"):
        store.sweeper.sweep_shard(0, "THOROUGH", lock_wait_seconds=wait)
