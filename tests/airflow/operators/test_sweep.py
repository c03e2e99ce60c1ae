"""SweepShardOperator (in the task) and SweepSummaryOperator run on their own against a real embedded store:
what each returns (every pair's result, the queue reconciled under its lease), templating, bad input. (Where
a group is swept and sweep_in_task's locks: test_sweep_operator.py; Spark mode: test_sweep_spark_mode.py.)"""
from __future__ import annotations

import pytest

from airflow_atlas.airflow.targets import SweepTarget
from airflow_atlas.serialisation import to_json
from airflow_atlas.sweep.queue.constants import FINE_PARTITION
from tests.airflow.conftest import settle

from .conftest import NATIVE, fails_at_once, run_operator

pytestmark = pytest.mark.airflow

THOROUGH_TABLE = "demo_thorough"


def _sweep(**kwargs):
    from airflow_atlas.airflow.operators.sweep import SweepShardOperator

    return SweepShardOperator(task_id="sweep", **kwargs)


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
    assert target.result["lock_holder"] == "airflow:test_dag:run_1:THOROUGH:0"  # this run's holder of the pair
    assert not any(lock.held for lock in store.locks.list_locks())  # the engine released its own lock


def test_a_dry_run_writes_nothing_and_reports_no_tables(written):
    store = written
    before = store.queue.progress.get_progress(1, "THOROUGH")
    operator = _sweep(shard=1, strategy="THOROUGH", dry_run=True, execution_mode="in_task")
    out, _ = run_operator(operator)
    assert callable(operator.dry_run) and operator.sweep_dry_run is True  # BaseOperator.dry_run() not shadowed
    assert out[0]["result"]["status"] == "dry_run" and out[0]["swept_tables"] == []
    assert out[0]["result"]["queue_rows_reconciled"] is None  # a dry run writes nothing
    assert store.queue.progress.get_progress(1, "THOROUGH") == before
    assert not any(lock.held for lock in store.locks.list_locks())  # taken and released all the same


def test_a_pair_whose_lock_another_holder_has_is_skipped_with_the_engine_result(written):
    store = written
    store.locks.acquire(SweepTarget(0, "CONSERVATIVE").lock_name, "someone-else", 60)
    targets = [to_json(SweepTarget(0, "CONSERVATIVE")), to_json(SweepTarget(0, "THOROUGH"))]
    out, _ = run_operator(_sweep(targets=targets, execution_mode="in_task"))
    skipped, swept = (SweepTarget.from_json(t) for t in out)
    result = skipped.result
    assert (result["status"], result["lock_holder"], result["cells_tombstoned"]) == ("skipped_locked", "someone-else", 0)
    assert result["lock_expires_at"] > 0 and skipped.swept_tables == []
    assert swept.status == "caught_up"  # the other pair of the group sweeps on
    assert store.locks.describe(skipped.lock_name).holder == "someone-else"  # untouched


def test_the_lock_wait_is_the_engine_setting_of_the_task(written):
    """A lock whose lease ends while the pair waits (setting lock_wait_seconds, here from the task's
    store_config) is taken over, swept under and released - one task, no lock task before or after it."""
    store = written
    other = store.locks.acquire(SweepTarget(1, "THOROUGH").lock_name, "someone-else", 1.0)
    out, _ = run_operator(_sweep(shard=1, strategy="THOROUGH", execution_mode="in_task",
                                 store_config={"lock_wait_seconds": 20}))
    assert out[0]["result"]["status"] == "caught_up"
    state = store.locks.describe(other.name)
    assert state.holder is None and state.token == other.token + 1


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
        ({"targets": [{"shard": 0}]}, "needs 'shard' and 'strategy'"),
        ({"targets": [{"shard": 0, "strategy": "THOROUGH", "acquired": True}]}, "unknown target field(s) acquired"),
        ({"targets": [{"shard": 0, "strategy": "THOROUGH"}], "shard": 1}, "either targets or shard and strategy"),
        ({}, "name what to sweep"),
    ],
)
def test_sweep_bad_input_fails_at_once_and_takes_no_lock(written, kwargs, message):
    fails_at_once(lambda: run_operator(_sweep(**kwargs)), message)
    assert [lock.holder for lock in written.locks.list_locks() if lock.held] == []


def test_a_shard_rendered_to_text_is_converted(written):
    """Without render_template_as_native_obj a template renders to text: the shard "1" is the shard 1 (the
    rule of airflow_atlas.airflow.templated); text that is no integer fails at once, naming it."""
    out, _ = run_operator(_sweep(shard="{{ params.shard }}", strategy="THOROUGH", execution_mode="in_task"),
                          params={"shard": 1})
    assert [(t["shard"], t["result"]["status"]) for t in out] == [(1, "caught_up")]
    fails_at_once(lambda: run_operator(_sweep(shard="{{ params.shard }}", strategy="THOROUGH"), params={"shard": "one"}),
                  "shard must be an integer, got 'one'")


def test_each_pair_reconciles_its_queue_in_the_sweep_task(written):
    """The queue rows wholly below a pair's progress (what an interrupted clean leaves) are removed by the
    pair's run, under its lease: no reconcile task follows."""
    store = written
    store.timestamps.fresh_timestamps(3 * FINE_PARTITION)  # past the workload's fine partition
    sweep_ts = store.sweep_timestamps.sweep_timestamp("THOROUGH")
    store.queue.progress.update_progress(0, "THOROUGH", sweep_ts - 1)  # moved on without its clean
    left = store.queue.cleaner.queue_rows_below(0, "THOROUGH", sweep_ts - 1)
    assert left.cells_rows or left.timestamps_rows
    out, _ = run_operator(_sweep(targets=[to_json(SweepTarget(0, "THOROUGH", sweep_ts=sweep_ts))], execution_mode="in_task"))
    assert out[0]["result"]["status"] == "caught_up" and out[0]["result"]["queue_rows_reconciled"] > 0
    after = store.queue.cleaner.queue_rows_below(0, "THOROUGH", sweep_ts - 1)
    assert not (after.cells_rows or after.dedicated_rows or after.timestamps_rows)


def _finished(shard: int, status: str, cells: int, rows_reconciled: int | None = None) -> dict:
    result = {"status": status, "cells_tombstoned": cells, "iterations": 1, "tables": {"t": cells} if cells else {},
              "duration_seconds": 0.25 * (shard + 1), "queue_rows_reconciled": rows_reconciled}
    return to_json(SweepTarget(shard, "THOROUGH", result=result))


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
                      targets=[{"shard": 0, "strategy": "THOROUGH"}, {"shard": 1, "strategy": "THOROUGH"}])
    skipped = {"shard": 1, "strategy": "THOROUGH", "status": "skipped_locked", "lock_holder": "someone-else"}
    document.results.append(ItemResult(item={"shard": 1, "strategy": "THOROUGH"}, status="skipped_locked", engine=skipped))
    out = operator.execute_complete({}, {"status": "done", "document": to_json(document)})
    by_shard = {t["shard"]: t for t in out}
    assert by_shard[0]["result"]["backlog"] == 2 and by_shard[0]["execution_mode"] == "spark"
    assert by_shard[1]["result"]["status"] == "skipped_locked" and by_shard[1]["swept_tables"] == []
