"""The targeted-sweep Spark job on the standalone master (127.0.0.5:7077) with two workers, sweeping an RF 3
store on the 3-node cluster, submitted by the Airflow glue (``execution.spark.submit``, the real
spark-submit through the Spark provider's hook). The executors run in the workers' JVMs' Python workers,
with the interpreter named by ``spark.pyspark.python`` (the venv's); the driver advertises 127.0.0.1.
The oracle holds afterwards and nothing sweepable is left."""
from __future__ import annotations

import json

import pytest

from airflow_atlas.serialisation import to_json

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.airflow, pytest.mark.timeout(600)]

SHARDS = 2
STRATEGIES = ("CONSERVATIVE", "THOROUGH")


def test_targeted_sweep_job_on_the_standalone_master_sweeps_the_rf3_store(
    spark_master, cluster_stores, monkeypatch, tmp_path, airflow_home
):
    from airflow_atlas.airflow.execution.spark import submit
    from airflow_atlas.airflow.execution.spark_types import RunSettings
    from airflow_atlas.kvs.address import StoreAddress
    from airflow_atlas.oracle import Reader, compare, observe, obsolete_versions
    from airflow_atlas.workload import WorkloadSpec, run_workload

    store = cluster_stores(shards=SHARDS)
    run_workload(store, WorkloadSpec(transactions=80, rows=30, columns=3, seed=23))
    url = cluster_stores.cluster.url(store.kvs.keyspace)
    fresh = store.timestamps.fresh_timestamp()
    readers = [Reader(fresh), Reader(fresh, read_only=True)]
    before = observe(store, readers)

    master = spark_master["spark.master"]
    host, port = master.removeprefix("spark://").split(":")
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_CLUSTER", json.dumps({"conn_type": "spark", "host": f"spark://{host}", "port": int(port)})
    )
    monkeypatch.setenv("ATLAS_SPARK_ARTIFACT_DIR", str(tmp_path / "artifacts"))
    monkeypatch.setenv("SPARK_LOCAL_IP", spark_master["spark.driver.host"])  # the submitting side's address
    cluster_conf = {k: v for k, v in spark_master.items() if k != "spark.master"}
    pairs = [(shard, s) for shard in range(SHARDS) for s in STRATEGIES]
    from airflow_atlas.spark import TargetedSweepJob

    doc = to_json(submit(
        TargetedSweepJob(pairs=pairs, batch_limit=100, max_iterations=50),
        RunSettings(spark_conn_id="spark_cluster", extra_conf={
            **cluster_conf,
            "spark.atlas.store.unreadable_window_seconds": "0",
            "spark.ui.enabled": "false",
        }),
        StoreAddress.from_url(url),
        {},
    ))
    assert doc["ok"], doc
    assert doc["master"] == master
    assert {(r["shard"], r["strategy"]) for r in doc["results"]} == set(pairs)
    assert {r["status"] for r in doc["results"]} == {"caught_up"}, doc["results"]
    assert sum(r["cells_tombstoned"] for r in doc["results"]) > 0
    for result in doc["results"]:
        assert result["executor"]["airflow_imported"] is False

    sweep_ts = {r["strategy"]: r["sweep_ts"] for r in doc["results"]}
    assert compare(before, observe(store, readers), sweep_ts) == []
    assert obsolete_versions(store, sweep_ts) == []
