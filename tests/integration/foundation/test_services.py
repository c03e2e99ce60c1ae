"""The real services the suite depends on: Cassandra over CQL (and nodetool), PySpark on local[2],
and Airflow's DagBag over dags/."""
from __future__ import annotations

import importlib.metadata as md
import subprocess
import uuid
import warnings

import pytest

from tests.conftest import CASSANDRA_SCRIPT, REPO_ROOT


@pytest.mark.cassandra
def test_cassandra_write_and_read_over_cql(cassandra_session, cassandra_keyspace):
    table = f"{cassandra_keyspace}.probe_{uuid.uuid4().hex[:8]}"
    cassandra_session.execute(f"CREATE TABLE {table} (k text PRIMARY KEY, v bigint)")
    insert = cassandra_session.prepare(f"INSERT INTO {table} (k, v) VALUES (?, ?)")
    for i in range(20):
        cassandra_session.execute(insert, (f"key-{i}", i * i))
    rows = {r.k: r.v for r in cassandra_session.execute(f"SELECT k, v FROM {table}")}
    assert rows == {f"key-{i}": i * i for i in range(20)}
    version = cassandra_session.execute("SELECT release_version FROM system.local").one().release_version
    assert version.startswith("5.0."), version


@pytest.mark.cassandra
def test_nodetool_reaches_the_node(cassandra_node):
    result = subprocess.run([str(CASSANDRA_SCRIPT), "nodetool", "status"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "UN  127.0.0.1" in result.stdout


def test_pyspark_is_one_consistent_full_distribution():
    import pyspark

    assert pyspark.__version__ == md.version("pyspark") == md.version("pyspark-client")
    # The full distribution ships the JVM jars; pyspark-client alone does not.
    from pathlib import Path

    jars = list((Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar"))
    assert jars, "pyspark jars missing: pyspark-client overwrote the full pyspark distribution"


@pytest.mark.spark
def test_pyspark_job_on_local_2(spark):
    assert spark.sparkContext.master == "local[2]"
    rdd = spark.sparkContext.parallelize(range(1, 1001), 4)
    assert rdd.map(lambda x: x * x).sum() == sum(x * x for x in range(1, 1001))
    df = spark.createDataFrame([(i % 3, i) for i in range(30)], ["g", "v"])
    got = {r["g"]: r["s"] for r in df.groupBy("g").sum("v").withColumnRenamed("sum(v)", "s").collect()}
    assert got == {g: sum(v for v in range(30) if v % 3 == g) for g in range(3)}


@pytest.mark.airflow
def test_dagbag_has_no_import_errors_or_warnings(airflow_home):
    from airflow.dag_processing.dagbag import DagBag

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bag = DagBag(dag_folder=str(REPO_ROOT / "dags"))
    assert bag.import_errors == {}
    ours = [w for w in caught if "airflow_atlas" in str(w.filename) or str(REPO_ROOT / "dags") in str(w.filename)]
    assert ours == [], [str(w.message) for w in ours]
    for dag_id, dag in bag.dags.items():
        for task in dag.tasks:
            assert task.owner and task.owner != "airflow", f"{dag_id}.{task.task_id} has no owner"
            assert task.retries >= 1, f"{dag_id}.{task.task_id} has no retries"
