"""execution_mode="spark": the same DAG, each group of pairs swept by one real Spark application
(spark-submit on local[2]) through airflow_atlas.airflow.execution.spark_submit."""
from __future__ import annotations

import json
import time

import pytest

from tests.airflow.conftest import FAST, load_dag, set_settings, settle, task_states, xcom

pytestmark = [pytest.mark.airflow, pytest.mark.spark]


def test_targeted_sweep_dag_in_spark_mode(embedded_store, monkeypatch):
    from airflow_atlas.oracle import Reader, compare, observe, obsolete_versions
    from airflow_atlas.workload import WorkloadSpec, run_workload

    store, _ = embedded_store
    run_workload(store, WorkloadSpec(transactions=60, rows=25, seed=21))
    settle(store)
    readers = [Reader(store.timestamps.fresh_timestamp())]
    before = observe(store, readers)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    set_settings(monkeypatch, **FAST, execution_mode="spark", spark_conn_id="spark_test", spark_group_size=4)

    started = time.monotonic()
    run = load_dag("atlas_targeted_sweep").test()
    assert str(run.state) == "success", task_states(run)
    print(f"spark-mode run: {time.monotonic() - started:.1f}s")
    groups = xcom(run, "plan")
    assert len(groups) == 1 and len(groups[0]) == 4  # one Spark application for the 4 pairs
    swept = xcom(run, "sweep", map_index=0)
    assert {t["result"]["status"] for t in swept} == {"caught_up"}
    # each pair's lag and backlog after the run come from the executors' engine (the metrics read no store)
    assert all(t["result"]["lag"] == 0 and isinstance(t["result"]["backlog"], int) for t in swept), swept
    sweep_ts = xcom(run, "compute_sweep_timestamps")
    # the job computes its own sweep timestamps (later, so never lower than the run's)
    assert obsolete_versions(store, sweep_ts) == []
    assert compare(before, observe(store, readers), sweep_ts) == []
    assert all(lock.holder is None for lock in store.locks.list_locks("sweep/"))
    assert xcom(run, "summary")["cells_tombstoned"] > 0


def test_full_sweep_dag_in_spark_mode(embedded_store, monkeypatch):
    from airflow_atlas.kvs.api import Cell

    store, _ = embedded_store
    store.create_table("legacy_data", "THOROUGH")
    for r in range(3):  # versions written without the queue (before it existed)
        start = store.timestamps.fresh_timestamp()
        store.kvs.put("legacy_data", {Cell(f"r{i:03d}".encode(), b"c"): f"v{r}".encode() for i in range(40)}, start)
        store.transaction_service.put_unless_exists(start, store.timestamps.fresh_timestamp())
    settle(store)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    set_settings(monkeypatch, **FAST, execution_mode="spark", spark_conn_id="spark_test")

    run = load_dag("atlas_full_sweep").test(run_conf={"tables": ["legacy_data"], "parts": 2})
    assert str(run.state) == "success", task_states(run)
    result = xcom(run, "sweep_table", map_index=0)
    assert result["table"] == "legacy_data" and result["ranges"] >= 1 and result["spark"]["master"] == "local[2]"
    assert result["versions_deleted"] == 80
    assert sum(1 for _ in store.kvs.scan("legacy_data")) == 40
    assert xcom(run, "publish_swept_tables")["legacy_data"]["versions_deleted"] == 80


def test_auto_mode_sweeps_in_the_task_below_the_threshold_and_in_spark_at_it(embedded_store, monkeypatch):
    """execution_mode="auto": the same DAG decides per group from the sweepable backlog."""
    from airflow_atlas.airflow.operators.sweep_timestamps import choose_execution_mode
    from airflow_atlas.oracle import obsolete_versions
    from airflow_atlas.workload import WorkloadSpec, run_workload

    store, _ = embedded_store
    run_workload(store, WorkloadSpec(transactions=40, rows=20, seed=5))
    settle(store)
    pairs = [{"shard": s, "strategy": st} for s in range(store.number_of_shards()) for st in ("CONSERVATIVE", "THOROUGH")]
    mode, backlog = choose_execution_mode(store, pairs, 10**9)
    assert mode == "in_task" and backlog > 0
    assert choose_execution_mode(store, pairs, backlog) == ("spark", backlog)
    assert choose_execution_mode(store, pairs, 1) == ("spark", 1)  # counting stops at the threshold

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    set_settings(monkeypatch, **FAST, execution_mode="auto", spark_min_backlog=10**9, spark_conn_id="spark_test")
    run = load_dag("atlas_targeted_sweep").test()
    assert str(run.state) == "success", task_states(run)
    assert {t["execution_mode"] for g in xcom(run, "plan") for t in g} == {"in_task"}  # decided by the plan
    swept = [t for i in range(len(xcom(run, "plan"))) for t in xcom(run, "sweep", map_index=i)]
    assert swept and {t["execution_mode"] for t in swept} == {"in_task"}
    assert obsolete_versions(store, xcom(run, "compute_sweep_timestamps")) == []

    run_workload(store, WorkloadSpec(transactions=40, rows=20, seed=6))
    settle(store)
    set_settings(monkeypatch, **FAST, execution_mode="auto", spark_min_backlog=1, spark_conn_id="spark_test",
                 in_task_group_size=4)
    run = load_dag("atlas_targeted_sweep").test()
    assert str(run.state) == "success", task_states(run)
    swept = [t for i in range(len(xcom(run, "plan"))) for t in xcom(run, "sweep", map_index=i)]
    assert swept and {t["execution_mode"] for t in swept} == {"spark"}
    assert {t["result"]["status"] for t in swept} == {"caught_up"}
    assert obsolete_versions(store, xcom(run, "compute_sweep_timestamps")) == []
