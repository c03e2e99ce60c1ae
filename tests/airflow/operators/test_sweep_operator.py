"""SweepShardOperator and the in-task execution mode on their own (no DAG run): where a group is swept,
argument checks, and sweep_in_task on a real embedded store (skips, lost leases, standalone pairs)."""
from __future__ import annotations

import pytest

from airflow_atlas.airflow.execution.in_task import sweep_in_task
from airflow_atlas.airflow.execution.outcome import SweepOptions
from airflow_atlas.airflow.settings import AtlasSettings
from airflow_atlas.airflow.targets import SweepTarget
from airflow_atlas.errors import InvalidInputError

pytestmark = pytest.mark.airflow


def _operator(**kwargs):
    from airflow_atlas.airflow.operators.sweep import SweepShardOperator

    return SweepShardOperator(task_id="sweep", **kwargs)


@pytest.mark.parametrize(
    "argument, planned, setting, expected",
    [
        (None, "spark", "in_task", "spark"),  # the plan's choice wins over the setting
        (None, None, "spark", "spark"),
        (None, None, "auto", "in_task"),  # auto without a plan: in the task
        ("in_task", "spark", "auto", "in_task"),  # an explicit argument wins
    ],
)
def test_execution_mode_follows_the_plan(argument, planned, setting, expected):
    targets = [SweepTarget(0, "THOROUGH", execution_mode=planned), SweepTarget(1, "THOROUGH", execution_mode=planned)]
    assert _operator(execution_mode=argument)._mode(targets, AtlasSettings(execution_mode=setting)) == expected


def test_auto_is_decided_by_the_plan_not_the_sweep_task():
    with pytest.raises(InvalidInputError, match="decided once per group by the plan"):
        _operator(execution_mode="auto")._mode([SweepTarget(0, "THOROUGH")], AtlasSettings())
    mixed = [SweepTarget(0, "THOROUGH", execution_mode="spark"), SweepTarget(1, "THOROUGH", execution_mode="in_task")]
    with pytest.raises(InvalidInputError, match="different execution modes"):
        _operator()._mode(mixed, AtlasSettings())


def _converted(**kwargs):
    """The operator with its templated arguments converted, as ``execute`` does first."""
    from airflow_atlas.airflow.templated import convert_templated_fields

    operator = _operator(**kwargs)
    convert_templated_fields(operator)
    return operator


def test_options_default_to_the_settings_and_refuse_bad_values():
    options = _converted(batch_limit=0, max_iterations="7", dry_run=True)._options(AtlasSettings.from_mapping({"batch_limit": 500}))
    assert options == SweepOptions(batch_limit=500, max_iterations=7, dry_run=True)
    assert _converted(dry_run="False")._options(AtlasSettings()).dry_run is False
    with pytest.raises(InvalidInputError, match="batch_limit"):
        _converted(batch_limit=100_001)._options(AtlasSettings())
    with pytest.raises(InvalidInputError, match="max_iterations must be an integer"):
        _converted(max_iterations="many")


def test_sweep_in_task_skips_unacquired_and_foreign_locks_and_sweeps_the_rest(tmp_path):
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore
    from airflow_atlas.workload import WorkloadSpec, run_workload

    store = AtlasStore.open(f"sqlite:///{tmp_path / 'atlas.db'}", config=StoreConfig(unreadable_window_seconds=0))
    store.initialize(shards=2)
    run_workload(store, WorkloadSpec(transactions=30, rows=10, seed=4))
    lease_seconds = 30.0
    mine = store.locks.acquire(SweepTarget(0, "THOROUGH").lock_name, "me", lease_seconds)
    store.locks.release(mine)  # lost meanwhile (e.g. released by on_kill): re-acquired by the same holder
    other = store.locks.acquire(SweepTarget(1, "THOROUGH").lock_name, "someone-else", lease_seconds)
    targets = [
        SweepTarget(0, "THOROUGH").with_lease(mine),
        SweepTarget(1, "THOROUGH").with_lease(other).with_(holder="me", token=other.token),  # taken by another
        SweepTarget(0, "CONSERVATIVE", acquired=False, held_by="x"),
        SweepTarget(1, "CONSERVATIVE"),  # standalone: the engine locks it itself
    ]
    in_use = {}
    swept, failed = sweep_in_task(store, targets, SweepOptions(batch_limit=50, max_iterations=10),
                                  lease_seconds=lease_seconds, holder_of=lambda t: f"standalone-{t.shard}", in_use=in_use)
    statuses = {(t.shard, t.strategy): t.status for t in swept}
    assert failed == [] and in_use == {}
    assert statuses[(0, "THOROUGH")] == "caught_up" and statuses[(1, "CONSERVATIVE")] == "caught_up"
    assert statuses[(1, "THOROUGH")] == "skipped_locked" and statuses[(0, "CONSERVATIVE")] == "skipped_locked"
    assert swept[2].result["lock_holder"] == "x"
    assert store.locks.describe(SweepTarget(1, "THOROUGH").lock_name).holder == "someone-else"  # untouched
    store.close()


def test_a_lease_that_expired_before_the_sweep_is_re_acquired_and_the_swept_target_carries_the_new_token(tmp_path):
    """Nobody refreshes the acquire task's lease until the sweep task starts: when the gap is longer than
    the lease, the sweep re-acquires the lock as the same holder (a larger token) and reports that lease;
    a lease still valid is swept under as it is (same token)."""
    import time

    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore
    from airflow_atlas.workload import WorkloadSpec, run_workload

    store = AtlasStore.open(f"sqlite:///{tmp_path / 'atlas.db'}", config=StoreConfig(unreadable_window_seconds=0))
    store.initialize(shards=2)
    run_workload(store, WorkloadSpec(transactions=30, rows=10, seed=4))
    expired = store.locks.acquire(SweepTarget(0, "THOROUGH").lock_name, "me", 0.2)
    valid = store.locks.acquire(SweepTarget(1, "THOROUGH").lock_name, "me", 60.0)
    time.sleep(0.5)
    assert store.locks.describe(expired.name).expired and not store.locks.describe(valid.name).expired
    targets = [SweepTarget(0, "THOROUGH").with_lease(expired), SweepTarget(1, "THOROUGH").with_lease(valid)]
    swept, failed = sweep_in_task(store, targets, SweepOptions(batch_limit=50, max_iterations=10), lease_seconds=60.0,
                                  holder_of=lambda t: "unused", in_use={})
    assert failed == [] and [t.status for t in swept] == ["caught_up", "caught_up"]
    assert swept[0].holder == "me" and swept[0].token == expired.token + 1 and swept[0].expires_at > expired.expires_at
    assert swept[1].holder == "me" and swept[1].token == valid.token
    for target in swept:  # the lock still held (the group's release task frees it) with the token reported
        state = store.locks.describe(target.lock_name)
        assert state.holder == "me" and state.token == target.token
    store.close()
