"""AcquireSweepLockOperator and ReleaseSweepLockOperator run on their own against a real embedded store:
arguments, templating, bad input, what they return (targets with leases, LockRelease per target)."""
from __future__ import annotations

import pytest

from airflow_atlas.airflow.targets import SweepTarget

from .conftest import NATIVE, fails_at_once, run_operator

pytestmark = pytest.mark.airflow

HOLDER = "airflow:test_dag:run_1:THOROUGH:0"  # holder_for: one per (DAG run, pair)


def _acquire(**kwargs):
    from airflow_atlas.airflow.operators.locks import AcquireSweepLockOperator

    return AcquireSweepLockOperator(task_id="acquire_lock", **kwargs)


def _release(**kwargs):
    from airflow_atlas.airflow.operators.locks import ReleaseSweepLockOperator

    return ReleaseSweepLockOperator(task_id="release_lock", **kwargs)


def test_acquire_renders_its_pair_and_returns_the_target_with_its_lease(embedded_store):
    store, _ = embedded_store
    operator = _acquire(shard="{{ params.shard }}", strategy="{{ params.strategy }}", lease_seconds="{{ params.lease }}", **NATIVE)
    out, _ = run_operator(operator, params={"shard": 0, "strategy": "THOROUGH", "lease": 45})
    assert operator.shard == 0 and operator.strategy == "THOROUGH"  # rendered
    [target] = [SweepTarget.from_json(t) for t in out]
    assert (target.shard, target.strategy, target.acquired, target.holder) == (0, "THOROUGH", True, HOLDER)
    state = store.locks.describe(target.lock_name)
    assert state.holder == HOLDER and state.token == target.token
    assert 30 < target.expires_at - __import__("time").time() <= 45


def test_a_lock_held_elsewhere_is_returned_not_acquired_without_failing(embedded_store):
    store, _ = embedded_store
    name = SweepTarget(1, "CONSERVATIVE").lock_name
    store.locks.acquire(name, "someone-else", 60)
    out, _ = run_operator(_acquire(targets=[{"shard": 1, "strategy": "CONSERVATIVE"}, {"shard": 0, "strategy": "THOROUGH"}],
                                   wait_seconds=0))
    held, free = (SweepTarget.from_json(t) for t in out)
    assert (held.acquired, held.held_by, held.token) == (False, "someone-else", None)
    assert free.acquired is True
    assert store.locks.describe(name).holder == "someone-else"


def test_release_releases_this_runs_locks_only(embedded_store):
    store, _ = embedded_store
    acquired, ti = run_operator(_acquire(targets=[{"shard": 0, "strategy": "THOROUGH"}, {"shard": 1, "strategy": "THOROUGH"}]))
    other_run = SweepTarget(1, "THOROUGH").lock_name
    store.locks.release(SweepTarget.from_json(acquired[1]).lease())
    store.locks.acquire(other_run, "airflow:test_dag:run_2:THOROUGH:1", 60)  # taken by another run meanwhile
    out, _ = run_operator(_release(targets="{{ params.targets }}", **NATIVE), params={"targets": acquired}, ti=ti)
    assert out == [
        {"shard": 0, "strategy": "THOROUGH", "lock": SweepTarget(0, "THOROUGH").lock_name, "released": True},
        {"shard": 1, "strategy": "THOROUGH", "lock": other_run, "released": False},
    ]
    assert store.locks.describe(SweepTarget(0, "THOROUGH").lock_name).holder is None
    assert store.locks.describe(other_run).holder == "airflow:test_dag:run_2:THOROUGH:1"
    again, _ = run_operator(_release(shard=0, strategy="THOROUGH"), ti=ti)  # idempotent
    assert again[0]["released"] is False


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"shard": 999, "strategy": "THOROUGH"}, "shard must be an integer in 0..255"),
        ({"shard": 0, "strategy": "NOTHING"}, "never swept"),
        ({"targets": [{"shard": 0}]}, "needs 'shard' and 'strategy'"),
        ({"targets": [{"shard": 0, "strategy": "THOROUGH"}], "shard": 1}, "either targets or shard and strategy"),
        ({}, "name what to sweep"),
    ],
)
def test_bad_input_fails_at_once_and_takes_no_lock(embedded_store, kwargs, message):
    store, _ = embedded_store
    fails_at_once(lambda: run_operator(_acquire(**kwargs)), message)
    fails_at_once(lambda: run_operator(_release(**kwargs)), message)
    assert [lock.holder for lock in store.locks.list_locks() if lock.held] == []


def test_a_shard_rendered_to_text_is_converted(embedded_store):
    """Without render_template_as_native_obj a template renders to text: the shard "1" is the shard 1 (the
    rule of airflow_atlas.airflow.templated); text that is no integer fails at once, naming it."""
    store, _ = embedded_store
    out, _ = run_operator(_acquire(shard="{{ params.shard }}", strategy="THOROUGH"), params={"shard": 1})
    [target] = [SweepTarget.from_json(t) for t in out]
    assert (target.shard, target.acquired) == (1, True)
    released, _ = run_operator(_release(shard="{{ params.shard }}", strategy="THOROUGH"), params={"shard": 1})
    assert [(r["shard"], r["released"]) for r in released] == [(1, True)]
    fails_at_once(lambda: run_operator(_acquire(shard="{{ params.shard }}", strategy="THOROUGH"), params={"shard": "one"}),
                  "shard must be an integer, got 'one'")
    assert [lock.holder for lock in store.locks.list_locks() if lock.held] == []


def test_templated_targets_are_template_fields():
    assert {"targets", "shard", "strategy", "holder", "lease_seconds", "wait_seconds"} <= set(_acquire(shard=0, strategy="THOROUGH").template_fields)
    assert {"targets", "shard", "strategy", "holder"} <= set(_release(shard=0, strategy="THOROUGH").template_fields)
