"""SweepShardOperator (in the task), ReconcileSweepQueueOperator and SweepSummaryOperator run on their own
against a real embedded store: what each returns, templating, bad input. (Where a group is swept and
sweep_in_task's lease handling: test_sweep_operator.py; Spark mode: test_sweep_spark_mode.py.)"""
from __future__ import annotations

import pytest

from airflow_atlas.airflow.targets import SweepTarget
from tests.airflow.conftest import settle

from .conftest import NATIVE, fails_at_once, run_operator

pytestmark = pytest.mark.airflow

THOROUGH_TABLE = "demo_thorough"


def _sweep(**kwargs):
    from airflow_atlas.airflow.operators.sweep import SweepShardOperator

    return SweepShardOperator(task_id="sweep", **kwargs)


def _reconcile(**kwargs):
    from airflow_atlas.airflow.operators.sweep import ReconcileSweepQueueOperator

    return ReconcileSweepQueueOperator(task_id="reconcile_queue", **kwargs)


def _summary(**kwargs):
    from airflow_atlas.airflow.operators.sweep import SweepSummaryOperator

    return SweepSummaryOperator(task_id="summary", **kwargs)


@pytest.fixture
def written(embedded_store):
    from airflow_atlas.workload import WorkloadSpec, run_workload

    store, _ = embedded_store
    run_workload(store, WorkloadSpec(transactions=40, rows=10, seed=5, dead_writer_ratio=0, abort_ratio=0))
    settle(store)
    return store


def test_sweep_catches_each_pair_up_and_reports_its_tables(written):
    store = written
    operator = _sweep(shard="{{ params.shard }}", strategy="THOROUGH", execution_mode="in_task", max_iterations="{{ params.n }}",
                      **NATIVE)
    out, _ = run_operator(operator, params={"shard": 0, "n": 50})
    assert operator.shard == 0 and operator.max_iterations == 50
    [target] = [SweepTarget.from_json(t) for t in out]
    assert (target.shard, target.strategy, target.execution_mode, target.status) == (0, "THOROUGH", "in_task", "caught_up")
    assert target.result["new_progress"] >= target.result["old_progress"]
    tombstoned = target.result["cells_tombstoned"]
    assert target.swept_tables == ([{"table": THOROUGH_TABLE, "cells_tombstoned": tombstoned, "versions_deleted": 0}]
                                   if tombstoned else [])
    assert not any(lock.held for lock in store.locks.list_locks())  # the engine released its own lock


def test_a_dry_run_writes_nothing_and_reports_no_tables(written):
    store = written
    before = store.queue.progress.get_progress(1, "THOROUGH")
    operator = _sweep(shard=1, strategy="THOROUGH", dry_run=True, execution_mode="in_task")
    out, _ = run_operator(operator)
    assert callable(operator.dry_run) and operator.sweep_dry_run is True  # BaseOperator.dry_run() not shadowed
    assert out[0]["result"]["status"] == "dry_run" and out[0]["swept_tables"] == []
    assert store.queue.progress.get_progress(1, "THOROUGH") == before


def test_a_pair_whose_lock_was_not_acquired_is_skipped_with_the_engine_result(written):
    target = SweepTarget(0, "CONSERVATIVE", sweep_ts=1, acquired=False, held_by="someone-else")
    out, _ = run_operator(_sweep(targets=[target.to_json()], execution_mode="in_task"))
    result = out[0]["result"]
    assert (result["status"], result["lock_holder"], result["cells_tombstoned"]) == ("skipped_locked", "someone-else", 0)
    assert out[0]["swept_tables"] == []


def test_the_tables_argument_is_gone():
    with pytest.raises(TypeError):
        _sweep(shard=0, strategy="THOROUGH", tables=["demo_thorough"])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"shard": 300, "strategy": "THOROUGH"}, "shard must be an integer in 0..255, got 300"),
        ({"shard": 0, "strategy": "NOTHING"}, "never swept"),
        ({"targets": "0:THOROUGH"}, "targets must be a list"),
        ({"shard": 0, "strategy": "THOROUGH", "execution_mode": "warp"}, "execution_mode must be one of"),
        ({"shard": 0, "strategy": "THOROUGH", "batch_limit": 100_001}, "batch_limit"),
        ({"shard": 0, "strategy": "THOROUGH", "sweep_ts": 2**62}, "above every timestamp issued"),
    ],
)
def test_sweep_bad_input_fails_at_once(written, kwargs, message):
    fails_at_once(lambda: run_operator(_sweep(**kwargs)), message)


def test_reconcile_cleans_below_progress_and_leaves_skipped_and_dry_runs_alone(written):
    swept, _ = run_operator(_sweep(shard=0, strategy="THOROUGH", execution_mode="in_task"))
    skipped = SweepTarget(1, "THOROUGH").skipped("x").to_json()
    dry = SweepTarget(1, "CONSERVATIVE", result={"status": "dry_run"}).to_json()
    out, _ = run_operator(_reconcile(targets="{{ params.targets }}", **NATIVE), params={"targets": [*swept, skipped, dry]})
    done, left, dry_left = (SweepTarget.from_json(t) for t in out)
    assert done.reconciled["progress"] == written.queue.progress.get_progress(0, "THOROUGH")
    assert done.reconciled["rows_deleted"] >= 0
    assert left.reconciled is None and dry_left.reconciled is None
    fails_at_once(lambda: run_operator(_reconcile(shard=0)), "name what to sweep")


def _finished(shard: int, status: str, cells: int, rows_deleted: int = 0) -> dict:
    result = {"status": status, "cells_tombstoned": cells, "iterations": 1, "tables": {"t": cells} if cells else {},
              "duration_seconds": 0.25 * (shard + 1)}
    return SweepTarget(shard, "THOROUGH", result=result, reconciled={"rows_deleted": rows_deleted}).to_json()


def test_summary_adds_up_every_pair():
    planned = [[{"shard": 0, "strategy": "THOROUGH"}, {"shard": 1, "strategy": "THOROUGH"}]]
    finished = [[_finished(0, "caught_up", 5, 2), _finished(1, "skipped_locked", 0)]]
    out, _ = run_operator(_summary(planned=planned, finished="{{ params.finished }}", **NATIVE), params={"finished": finished})
    assert out["pairs"] == 2 and out["by_status"] == {"caught_up": 1, "skipped_locked": 1}
    assert (out["cells_tombstoned"], out["iterations"], out["reclaimed_queue_rows"]) == (5, 2, 2)
    assert out["tables"] == {"t": 5} and out["failed_pairs"] == []
    assert out["engine_seconds"] == 0.75  # the pairs' sweep time, 0.25 + 0.5


def test_summary_fails_naming_the_pairs_that_did_not_finish():
    planned = [[{"shard": 0, "strategy": "THOROUGH"}], [{"shard": 3, "strategy": "THOROUGH"}]]
    fails_at_once(lambda: run_operator(_summary(planned=planned, finished=[[_finished(0, "caught_up", 1)]])),
                  "1 of 2 (shard, strategy) pair(s) did not finish: THOROUGH/3")
    fails_at_once(lambda: run_operator(_summary(planned=None, finished=[])), "nothing was planned")


def test_resuming_from_the_triggerer_opens_no_store(monkeypatch):
    """execute_complete turns the trigger's event into the task's output and metrics without a store: each
    result carries its pair's lag and backlog (issue 34 item 3). The store connection points at a closed
    port: the old resume, which reopened the store for the metrics, failed here."""
    import json

    from airflow_atlas.spark import JobDocument
    from airflow_atlas.spark.document import ItemResult

    monkeypatch.setenv("AIRFLOW_CONN_ATLAS_NOWHERE", json.dumps(
        {"conn_type": "cassandra", "host": "127.0.0.1", "port": 1, "schema": "ks"}))
    engine = {"shard": 0, "strategy": "THOROUGH", "status": "caught_up", "lag": 0, "lag_seconds": 0.0, "backlog": 2,
              "tables": {THOROUGH_TABLE: 3}}
    document = JobDocument(job="targeted_sweep", ok=True, store=None, results=[
        ItemResult(item={"shard": 0, "strategy": "THOROUGH"}, status="caught_up", engine=engine)])
    operator = _sweep(store_conn_id="atlas_nowhere", execution_mode="spark",
                      targets=[{"shard": 0, "strategy": "THOROUGH"}, {"shard": 1, "strategy": "THOROUGH", "acquired": False}])
    out = operator.execute_complete({}, {"status": "done", "document": document.to_json()})
    by_shard = {t["shard"]: t for t in out}
    assert by_shard[0]["result"]["backlog"] == 2 and by_shard[0]["execution_mode"] == "spark"
    assert by_shard[1]["result"]["status"] == "skipped_locked"
