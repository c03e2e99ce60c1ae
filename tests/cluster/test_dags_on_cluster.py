"""The DAGs on the RF 3 cluster with the real ``dag.test()``: ``atlas_targeted_sweep`` end to end (the
oracle holds), with one replica down (the sweep refuses at consistency ALL and nothing advances; back up,
it completes), and ``atlas_compaction`` through nodetool on every node (skipped with its reason until the
table is repaired; then live space drops on each node)."""
from __future__ import annotations

import json
import uuid

import pytest

from tests.airflow.conftest import (
    CONN_ID,
    FAST,
    SHARDS,
    engine_config,
    load_dag,
    set_connection,
    set_settings,
    settle,
    task_states,
    xcom,
)
from tests.conftest import CASSANDRA_SCRIPT

from .conftest import HOSTS, NODES

pytestmark = [pytest.mark.cluster, pytest.mark.airflow, pytest.mark.timeout(600)]

JMX_TARGETS = [f"127.0.0.1:{7200 + i}" for i in range(1, NODES + 1)]
CLUSTER_SETTINGS = {
    **FAST,
    "nodetool_command": [str(CASSANDRA_SCRIPT), "nodetool"],
    "nodetool_jmx_targets": JMX_TARGETS,
}


@pytest.fixture
def cluster_airflow_store(cassandra_cluster, monkeypatch, airflow_home):
    """An RF 3 store on the cluster wired as connection ``atlas_test`` (opened through the AtlasHook)."""
    from airflow_atlas.airflow.hooks.atlas import AtlasHook

    keyspace = f"atlas_clf_{uuid.uuid4().hex[:10]}"
    conn = {
        "conn_type": "cassandra",
        "host": ",".join(HOSTS),
        "port": 9042,
        "schema": keyspace,
        "extra": {"create_keyspace": True, "replication_factor": NODES},
    }
    set_connection(monkeypatch, CONN_ID, conn)
    set_settings(monkeypatch, **CLUSTER_SETTINGS)
    hook = AtlasHook(CONN_ID, config=engine_config())
    store = hook.get_store()
    store.initialize(shards=SHARDS)
    try:
        yield store, keyspace
    finally:
        hook.close()
        cassandra_cluster.drop_later([keyspace])  # when the package ends (tests/cluster/conftest.py)


def _progress(store) -> dict:
    return {
        (shard, s): store.queue.progress.get_progress(shard, s)
        for shard in range(SHARDS)
        for s in ("CONSERVATIVE", "THOROUGH")
    }


def _run_and_check(store, readers, *, mode: str = "in_task"):
    """Run ``atlas_targeted_sweep``; the oracle holds, no pair failed, every pair was swept in ``mode``."""
    from airflow_atlas.oracle import compare, observe, obsolete_versions

    before = observe(store, readers)
    run = load_dag("atlas_targeted_sweep").test()
    assert str(run.state) == "success", task_states(run)
    sweep_ts = xcom(run, "compute_sweep_timestamps")
    assert compare(before, observe(store, readers), sweep_ts) == []
    assert obsolete_versions(store, sweep_ts) == []
    summary = xcom(run, "summary")
    assert summary["failed_pairs"] == []
    swept = [t for i in range(len(xcom(run, "plan"))) for t in xcom(run, "sweep", map_index=i)]
    assert swept and {t["execution_mode"] for t in swept} == {mode}, swept
    return summary


def test_targeted_sweep_dag_on_rf3_keeps_what_readers_see(cluster_airflow_store):
    from airflow_atlas.oracle import Reader
    from airflow_atlas.workload import WorkloadSpec, run_workload

    store, _ = cluster_airflow_store
    report = run_workload(store, WorkloadSpec(transactions=80, rows=30, columns=3, open_transactions=1, seed=13))
    open_txn = report.open[0]
    settle(store)
    fresh = store.timestamps.fresh_timestamp()
    readers = [Reader(open_txn.start_timestamp), Reader(fresh), Reader(fresh, read_only=True)]
    summary = _run_and_check(store, readers)
    assert summary["cells_tombstoned"] > 0 and summary["aborted_writes_deleted"] > 0
    open_txn.abort()


def test_with_a_replica_down_the_sweep_refuses_and_nothing_advances(cluster_airflow_store, cassandra_cluster, monkeypatch):
    from airflow_atlas.oracle import Reader
    from airflow_atlas.workload import WorkloadSpec, run_workload

    store, _ = cluster_airflow_store
    with cassandra_cluster.node_down(3):
        report = run_workload(store, WorkloadSpec(transactions=60, rows=30, columns=3, seed=17))
        assert report.committed > 20  # writes, commits and the queue work with one replica down
        settle(store)
        before = _progress(store)
        set_settings(monkeypatch, **{**CLUSTER_SETTINGS, "retries": 1})
        run = load_dag("atlas_targeted_sweep").test()
        states = task_states(run)
        assert str(run.state) == "failed", states
        assert _progress(store) == before, "a sweep with a replica down moved progress"
    # back up: the next run completes and the oracle holds
    set_settings(monkeypatch, **CLUSTER_SETTINGS)
    fresh = store.timestamps.fresh_timestamp()
    summary = _run_and_check(store, [Reader(fresh), Reader(fresh, read_only=True)])
    assert summary["cells_tombstoned"] > 0
    assert sum(_progress(store).values()) > sum(before.values())


def test_compaction_runs_on_every_node_only_after_repair(cluster_airflow_store, cassandra_cluster, monkeypatch):
    from airflow_atlas.airflow.hooks import nodetool
    from tests.airflow.dags.test_atlas_compaction import TABLE, _overwrite

    store, keyspace = cluster_airflow_store
    store.create_table(TABLE, "THOROUGH")  # default gc_grace_seconds (10 days)
    runner = nodetool.LocalNodetoolRunner([str(CASSANDRA_SCRIPT), "nodetool"], 600, JMX_TARGETS)
    runner.run(["disableautocompaction", keyspace, TABLE])  # only the operator's compaction reclaims space
    _overwrite(store, rounds=4, rows=100, value_bytes=2000)
    nodetool.flush(runner, keyspace, TABLE)
    live_before = {node: s["space_used_live"] for node, s in nodetool.table_stats_per_node(runner, keyspace, TABLE).items()}
    assert len(live_before) == NODES and all(v > 4 * 100 * 2000 * 0.5 for v in live_before.values()), live_before

    set_settings(monkeypatch, **CLUSTER_SETTINGS, compaction_threshold_tombstones=50)
    sweep_run = load_dag("atlas_targeted_sweep").test()
    assert str(sweep_run.state) == "success", task_states(sweep_run)

    # no repair since the sweep's tombstones: the guard skips the table and says why; nothing is purged
    skipped_run = load_dag("atlas_compaction").test()
    assert str(skipped_run.state) == "success", task_states(skipped_run)
    report = xcom(skipped_run, "compact")
    assert report["compacted"] == {}
    assert "no repair of the table" in report["skipped"][TABLE] and "nodetool repair" in report["skipped"][TABLE]
    assert report["pending"][TABLE] >= 100
    assert store.history.tombstones_since_compaction(TABLE).count >= 100  # the refused table keeps its count

    cassandra_cluster.repair(keyspace)
    run = load_dag("atlas_compaction").test()
    assert str(run.state) == "success", task_states(run)
    report = xcom(run, "compact")
    assert report["skipped"] == {}
    nodes = report["compacted"][TABLE]["nodes"]
    assert sorted(nodes) == sorted(JMX_TARGETS)
    for node, space in nodes.items():
        assert space["space_after_bytes"] < space["space_before_bytes"], (node, space)
    live_after = {node: s["space_used_live"] for node, s in nodetool.table_stats_per_node(runner, keyspace, TABLE).items()}
    for node in JMX_TARGETS:  # independent check, on each node
        assert live_after[node] < live_before[node] / 2, (node, live_before, live_after)
    assert report["pending"][TABLE] == 0


def test_compaction_names_the_cause_when_a_user_forces_gc_grace_zero(cluster_airflow_store, monkeypatch):
    """A user may force gc_grace_seconds = 0 on a swept table (allow_gc_grace_below_repair_interval); then no
    repair can make a purge safe, and atlas_compaction refuses that table and says why."""
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore
    from tests.airflow.dags.test_atlas_compaction import TABLE, _overwrite

    from .conftest import CONFIG, LocalCluster

    store, keyspace = cluster_airflow_store
    forcing = AtlasStore.open(
        LocalCluster().url(keyspace), config=StoreConfig(**CONFIG, allow_gc_grace_below_repair_interval=True)
    )
    try:
        forcing.create_table(TABLE, "THOROUGH", gc_grace_seconds=0)
    finally:
        forcing.close()
    _overwrite(store, rounds=2, rows=60, value_bytes=100)
    set_settings(monkeypatch, **CLUSTER_SETTINGS, compaction_threshold_tombstones=10)
    sweep_run = load_dag("atlas_targeted_sweep").test()
    assert str(sweep_run.state) == "success", task_states(sweep_run)
    run = load_dag("atlas_compaction").test()
    assert str(run.state) == "success", task_states(run)
    report = xcom(run, "compact")
    assert report["compacted"] == {}
    reason = report["skipped"][TABLE]
    assert "gc_grace_seconds = 0" in reason and "bring the deleted data back" in reason, reason
    assert report["pending"][TABLE] >= 60


def test_targeted_sweep_dag_in_spark_mode_on_the_standalone_master(
    cluster_airflow_store, spark_master, monkeypatch, tmp_path
):
    """Issue 13 item 5: ``atlas_targeted_sweep`` end to end with ``execution_mode: spark``, each group one
    Spark application on the standalone master with two workers, configured only through the settings a
    deployment uses (``spark_conf``, ``spark_executor_python``, ``spark_driver_host``) and a ``spark``
    connection; the oracle holds and the tasks record the Spark mode."""
    from airflow_atlas.oracle import Reader
    from airflow_atlas.workload import WorkloadSpec, run_workload

    store, _ = cluster_airflow_store
    run_workload(store, WorkloadSpec(transactions=60, rows=30, columns=3, seed=29))
    settle(store)
    master = spark_master["spark.master"]
    host, port = master.removeprefix("spark://").split(":")
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_CLUSTER", json.dumps({"conn_type": "spark", "host": f"spark://{host}", "port": int(port)})
    )
    monkeypatch.setenv("ATLAS_SPARK_ARTIFACT_DIR", str(tmp_path / "artifacts"))
    monkeypatch.setenv("SPARK_LOCAL_IP", spark_master["spark.driver.host"])
    owned = {"spark.master", "spark.pyspark.python", "spark.driver.host"}  # set by the connection and settings
    set_settings(
        monkeypatch,
        **CLUSTER_SETTINGS,
        execution_mode="spark",
        spark_conn_id="spark_cluster",
        spark_group_size=SHARDS * 2,  # one Spark application for every pair
        spark_executor_python=spark_master["spark.pyspark.python"],
        spark_driver_host=spark_master["spark.driver.host"],
        spark_conf={**{k: v for k, v in spark_master.items() if k not in owned}, "spark.ui.enabled": "false"},
    )
    fresh = store.timestamps.fresh_timestamp()
    summary = _run_and_check(store, [Reader(fresh), Reader(fresh, read_only=True)], mode="spark")
    assert summary["cells_tombstoned"] > 0
    assert sum(_progress(store).values()) > 0
