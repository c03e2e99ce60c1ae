"""The sweep jobs on a real Spark Connect server (loopback, ``connect_server``), submitted by the Airflow glue
through a ``spark_connect`` connection: the same job code as spark-submit, selected by the connection type.

* the targeted job through Connect and the in-task engine on identical Cassandra stores end identical
  (versions per cell, relative progress, queue rows; per-pair counters); executors run the engine zip (a
  session artifact) without Airflow; a second submission reuses the session (the engine is shipped once);
* a bad pair comes back as ``SparkSweepRefused`` (not retriable) with the document, the others swept;
* a session the server closed is replaced by a new one;
* ``atlas_targeted_sweep`` with ``dag.test()`` in spark mode over a Connect connection: the oracle holds.
"""
from __future__ import annotations

import json
import os

import pytest

from airflow_atlas.serialisation import to_json
from airflow_atlas.spark.args import task_count
from tests.airflow.conftest import FAST, embedded_store, load_dag, set_settings, settle, task_states, xcom  # noqa: F401

from .conftest import SETTINGS, SHARDS, STRATEGIES, cell_versions, end_state

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

ALL_PAIRS = [(shard, strategy) for shard in range(SHARDS) for strategy in STRATEGIES]
ORDER_FREE_COUNTERS = ("status", "iterations", "entries_read", "cells_tombstoned", "sentinels_written",
                       "aborted_writes_deleted", "queue_rows_cleaned")


@pytest.fixture
def connect_conn(connect_server, monkeypatch, tmp_path):
    host, port = connect_server.removeprefix("sc://").rsplit(":", 1)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_TEST",
                       json.dumps({"conn_type": "spark_connect", "host": f"sc://{host}", "port": int(port)}))
    monkeypatch.setenv("ATLAS_SPARK_ARTIFACT_DIR", str(tmp_path / "artifacts"))
    return "spark_connect_test"


def _sessions(tmp_path) -> dict:
    return {p.name: p.read_text().strip() for p in (tmp_path / "artifacts" / "connect-sessions").glob("*.id")}


@pytest.mark.cassandra
def test_connect_targeted_sweep_matches_in_task_engine(connect_conn, make_store, tmp_path):
    from airflow_atlas.airflow.execution.spark import spark_runner
    from airflow_atlas.airflow.execution.spark_connect import SparkConnectRunner
    from airflow_atlas.airflow.execution.spark_types import RunSettings
    from airflow_atlas.kvs.address import StoreAddress
    from airflow_atlas.spark import TargetedSweepJob

    runner = spark_runner(connect_conn)
    assert isinstance(runner, SparkConnectRunner)  # chosen by the connection's type

    def submit(context, *, spark_conn_id, store_url, pairs, batch_limit, max_iterations, dry_run, settings):
        job = TargetedSweepJob(pairs=pairs, batch_limit=batch_limit, max_iterations=max_iterations, dry_run=dry_run)
        return runner.run(job, RunSettings(spark_conn_id=spark_conn_id, settings=settings),
                          StoreAddress.from_url(store_url), context)
    spark_side = make_store("cassandra", seed=7, transactions=60)
    task_side = make_store("cassandra", seed=7, transactions=60)
    assert cell_versions(spark_side.store) == cell_versions(task_side.store)

    first = to_json(submit({}, spark_conn_id=connect_conn, store_url=spark_side.url, pairs=ALL_PAIRS, batch_limit=5,
                   max_iterations=2, dry_run=False, settings=SETTINGS))
    sessions = _sessions(tmp_path)
    doc = to_json(submit({}, spark_conn_id=connect_conn, store_url=spark_side.url, pairs=ALL_PAIRS, batch_limit=15,
                 max_iterations=None, dry_run=False, settings=SETTINGS))
    in_task = {}
    for shard, strategy in ALL_PAIRS:
        task_side.store.sweeper.sweep_shard(shard, strategy, batch_limit=5, max_iterations=2)
    for shard, strategy in ALL_PAIRS:
        in_task[(shard, strategy)] = to_json(task_side.store.sweeper.sweep_shard(shard, strategy, batch_limit=15))

    assert first["ok"] and "iteration_limit" in {r["status"] for r in first["results"]}
    assert doc["ok"] and {r["status"] for r in doc["results"]} == {"caught_up"}
    got = {(r["shard"], r["strategy"]): r for r in doc["results"]}
    for pair, expected in in_task.items():
        assert {k: got[pair][k] for k in ORDER_FREE_COUNTERS} == {k: expected[k] for k in ORDER_FREE_COUNTERS}, pair
    assert end_state(spark_side) == end_state(task_side)
    # The Connect client mode pyspark set in this process is gone: a later spark-submit started here works.
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ

    # The pairs in groups, two Spark tasks per core of the local[2] server (from its conf), in Python workers
    # that run the engine zip and never imported Airflow.
    assert doc["summary"]["spark_tasks"] == task_count(len(ALL_PAIRS), 2) == 4
    assert {r["partition"] for r in doc["results"]} == set(range(4))
    for result in doc["results"]:
        assert result["executor"]["airflow_imported"] is False
        assert "airflow_atlas-engine-" in result["executor"]["engine_path"]
    assert doc["spark_submit"]["connect"] is True and doc["master"].startswith("local")
    # The second submission used the first one's session; each run has its own id (lock holders differ).
    assert len(sessions) == 1 and _sessions(tmp_path) == sessions
    assert first["app_id"] != doc["app_id"] and first["app_id"].split("/")[0] == doc["app_id"].split("/")[0]


def _submit(connect_conn, url, pairs, **settings):
    from airflow_atlas.airflow.execution.spark import submit
    from airflow_atlas.airflow.execution.spark_types import RunSettings
    from airflow_atlas.kvs.address import StoreAddress
    from airflow_atlas.spark import TargetedSweepJob

    return submit(TargetedSweepJob(pairs=pairs), RunSettings(spark_conn_id=connect_conn, **settings),
                  StoreAddress.from_url(url), {})


def test_connect_bad_pair_is_refused_with_the_document(connect_conn, make_store):
    from airflow_atlas.airflow.execution.spark_types import SparkSweepRefused

    handle = make_store("sqlite", seed=5, transactions=30)
    with pytest.raises(SparkSweepRefused) as raised:
        _submit(connect_conn, handle.url, "0:THOROUGH,9:CONSERVATIVE", settings=SETTINGS)
    doc = to_json(raised.value.document)
    results = {(r["shard"], r["strategy"]): r for r in doc["results"]}
    assert results[(0, "THOROUGH")]["status"] == "caught_up"
    assert results[(9, "CONSERVATIVE")]["error_type"] == "InvalidInputError"
    assert doc["retriable"] is False and "out of range" in str(raised.value)


def test_connect_refuses_per_job_spark_conf(connect_conn, make_store):
    from airflow.sdk.exceptions import AirflowException

    with pytest.raises(AirflowException, match="spark.task.maxFailures"):
        _submit(connect_conn, "sqlite:////nonexistent.db", "0:THOROUGH", extra_conf={"spark.task.maxFailures": "4"})


def test_closed_session_is_replaced(connect_server, engine_zip, tmp_path):
    from pyspark.sql import SparkSession

    from airflow_atlas.spark.connect import CONNECT_MODE_ENV, connect_client_mode, open_session, session_url

    session_file = tmp_path / "session.id"
    with connect_client_mode():
        first = open_session(connect_server, engine_zip, session_file)
        old = session_file.read_text().strip()
        assert first.range(3).count() == 3
        SparkSession.builder.remote(session_url(connect_server, old)).create().stop()  # the server closes it
        second = open_session(connect_server, engine_zip, session_file)
        new = session_file.read_text().strip()
        assert new != old
        assert second.range(2).count() == 2
        for client in (first.client, second.client):  # channels closed: no cleanup RPCs at interpreter exit
            client.close()
    assert CONNECT_MODE_ENV not in os.environ  # later spark-submits from this process are not Connect clients


def test_targeted_sweep_dag_on_spark_connect(connect_conn, embedded_store, monkeypatch):  # noqa: F811
    from airflow_atlas.oracle import Reader, compare, observe, obsolete_versions
    from airflow_atlas.workload import WorkloadSpec, run_workload

    store, _ = embedded_store
    run_workload(store, WorkloadSpec(transactions=60, rows=25, seed=21))
    settle(store)
    readers = [Reader(store.timestamps.fresh_timestamp())]
    before = observe(store, readers)
    set_settings(monkeypatch, **FAST, execution_mode="spark", spark_conn_id=connect_conn, spark_group_size=4)

    run = load_dag("atlas_targeted_sweep").test()
    assert str(run.state) == "success", task_states(run)
    groups = xcom(run, "plan")
    assert len(groups) == 1 and len(groups[0]) == 4  # one Spark job for the 4 pairs
    swept = xcom(run, "sweep", map_index=0)
    assert {t["result"]["status"] for t in swept} == {"caught_up"}
    assert all(t["result"]["executor"]["airflow_imported"] is False for t in swept)
    sweep_ts = xcom(run, "compute_sweep_timestamps")
    assert obsolete_versions(store, sweep_ts) == []
    assert compare(before, observe(store, readers), sweep_ts) == []
    assert all(lock.holder is None for lock in store.locks.list_locks("sweep/"))
    assert xcom(run, "summary")["cells_tombstoned"] > 0
