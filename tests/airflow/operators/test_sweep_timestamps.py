"""ComputeSweepTimestampsOperator and PlanTargetedSweepOperator run on their own against a real embedded
store: what they return, templating, bad input."""
from __future__ import annotations

import pytest

from airflow_atlas.airflow.targets import SweepTarget
from tests.airflow.conftest import SHARDS, settle

from .conftest import fails_at_once, run_operator

pytestmark = pytest.mark.airflow


def _compute(**kwargs):
    from airflow_atlas.airflow.operators.sweep_timestamps import ComputeSweepTimestampsOperator

    return ComputeSweepTimestampsOperator(task_id="compute_sweep_timestamps", **kwargs)


def _plan(**kwargs):
    from airflow_atlas.airflow.operators.sweep_timestamps import PlanTargetedSweepOperator

    return PlanTargetedSweepOperator(task_id="plan", **kwargs)


def _workload(store) -> None:
    from airflow_atlas.workload import WorkloadSpec, run_workload

    run_workload(store, WorkloadSpec(transactions=20, rows=10, seed=3))
    settle(store)


def test_compute_returns_one_timestamp_per_strategy_and_pushes_the_explanation(embedded_store):
    store, _ = embedded_store
    out, ti = run_operator(_compute())
    assert set(out) == {"CONSERVATIVE", "THOROUGH"} and all(isinstance(ts, int) for ts in out.values())
    assert set(ti.pushed["explain"]) == {"CONSERVATIVE", "THOROUGH"}
    later, _ = run_operator(_compute(explain=False))
    assert all(later[s] >= out[s] for s in out)  # never goes back
    assert _compute().template_fields[-1] == "explain"


def test_compute_without_explain_pushes_nothing_else(embedded_store):
    _, ti = run_operator(_compute(explain="{{ params.explain }}"), params={"explain": ""})
    assert ti.pushed == {}


def test_plan_groups_every_pair_with_the_given_timestamps(embedded_store):
    store, _ = embedded_store
    _workload(store)
    timestamps = {"CONSERVATIVE": 5, "THOROUGH": 7}
    out, _ = run_operator(
        _plan(sweep_timestamps=timestamps, skip_idle=False, group_size="{{ params.size }}", execution_mode="in_task"),
        params={"size": 3},
    )
    groups = [[SweepTarget.from_json(t) for t in group] for group in out]
    assert [len(g) for g in groups] == [3, 1]  # 2 shards x 2 strategies in groups of 3
    pairs = {(t.shard, t.strategy, t.sweep_ts, t.execution_mode) for g in groups for t in g}
    assert pairs == {(s, strategy, ts, "in_task") for strategy, ts in timestamps.items() for s in range(SHARDS)}


def test_plan_leaves_idle_pairs_out_and_picks_shards_and_strategies(embedded_store):
    store, _ = embedded_store
    out, _ = run_operator(_plan(skip_idle=True, execution_mode="in_task"))
    assert out == []  # nothing written: every pair idle
    out, _ = run_operator(_plan(shards=["1"], strategies=["thorough"], skip_idle=False, execution_mode="spark"))
    assert [[(t["shard"], t["strategy"], t["execution_mode"]) for t in g] for g in out] == [[(1, "THOROUGH", "spark")]]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"shards": [SHARDS]}, f"shard(s) [{SHARDS}] out of range"),
        ({"shards": ["x"]}, "shards[0] must be an integer, got 'x'"),
        ({"shards": "0,1"}, "shards must be a list of integers, got '0,1'"),
        ({"strategies": ["NOTHING"]}, "never swept"),
        ({"strategies": ["SIDEWAYS"]}, "SIDEWAYS"),
        ({"execution_mode": "warp"}, "execution_mode must be one of"),
        ({"sweep_timestamps": {"THOROUGH": 5}}, "sweep_timestamps has no CONSERVATIVE entry"),
        ({"sweep_timestamps": {"CONSERVATIVE": "soon", "THOROUGH": 1}}, "must be an integer"),
    ],
)
def test_plan_bad_input_fails_at_once(embedded_store, kwargs, message):
    fails_at_once(lambda: run_operator(_plan(skip_idle=False, **kwargs)), message)


@pytest.mark.parametrize(("max_groups", "settings", "sizes"), [
    (2, {}, [2, 2]),  # the default: sized to the run, at most max_groups groups
    (None, {}, [1, 1, 1, 1]),  # fewer pairs than max_parallel_groups (16): one pair per group
    (3, {}, [2, 2]),  # ceil(4 / 3) = 2 pairs per group: 2 groups
    (2, {"in_task_group_size": 1}, [1, 1, 1, 1]),  # a size given is kept
])
def test_plan_sizes_in_task_groups_to_the_run_by_default(embedded_store, monkeypatch, max_groups, settings, sizes):
    from tests.airflow.conftest import set_settings

    store, _ = embedded_store
    _workload(store)
    set_settings(monkeypatch, **settings)
    out, _ = run_operator(_plan(sweep_timestamps={"CONSERVATIVE": 5, "THOROUGH": 7}, skip_idle=False,
                                execution_mode="in_task", max_groups=max_groups))
    assert [len(g) for g in out] == sizes


def test_the_pipeline_plans_for_the_groups_its_dag_runs_at_once(monkeypatch):
    from airflow.sdk import DAG

    from airflow_atlas.airflow.groups import targeted_sweep_pipeline
    from airflow_atlas.airflow.settings import AtlasSettings

    with DAG("plan_groups_probe", schedule=None):
        tasks = targeted_sweep_pipeline(AtlasSettings.from_mapping({"max_parallel_groups": 5}))
    assert tasks["plan"].max_groups == 5
