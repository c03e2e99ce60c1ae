"""The Airflow glue's connection handling, without starting a JVM: spark_default falls back to local[*]
(never the provider's silent YARN), other missing connections and cluster deploy mode are refused
before anything runs, and nothing is left behind. (A bad job is refused when it is built, before any runner:
tests/unit/spark/test_jobs.py.)"""
from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.airflow


@pytest.fixture
def glue(monkeypatch, tmp_path):
    from airflow_atlas.airflow.execution import spark_submit

    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)
    monkeypatch.setenv("ATLAS_SPARK_ARTIFACT_DIR", str(tmp_path / "artifacts"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    return spark_submit


@pytest.fixture
def submitted_master(monkeypatch, tmp_path):
    """Submits with a hook and returns the ``--master`` it gave spark-submit: a recording ``spark-submit``
    first on ``PATH`` (the seam the glue runs it by; no JVM) instead of the provider's private state."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    argv = tmp_path / "argv"
    fake = bin_dir / "spark-submit"
    fake.write_text(f"#!/usr/bin/env bash\nprintf '%s\\n' \"$@\" > '{argv}'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")

    def master(hook) -> str:
        hook.submit("app.py")
        args = argv.read_text().splitlines()
        return args[args.index("--master") + 1]

    return master


def test_missing_spark_default_means_local_not_yarn(glue, submitted_master):
    connection = glue.resolve_connection("spark_default")
    from airflow_atlas.airflow.execution.spark_types import DEFAULT_LOCAL_MASTER

    assert glue.master_of(connection) == DEFAULT_LOCAL_MASTER == "local[*]"
    hook = glue._make_hook("spark_default", connection, name="x")
    assert submitted_master(hook) == "local[*]"


def _address(url: str):
    from airflow_atlas.kvs.address import StoreAddress

    return StoreAddress.from_url(url)


def test_missing_other_connection_is_an_error(glue, tmp_path):
    from airflow.sdk.exceptions import AirflowException

    from airflow_atlas.airflow.execution.spark import submit
    from airflow_atlas.airflow.execution.spark_types import RunSettings
    from airflow_atlas.spark import TargetedSweepJob

    job = TargetedSweepJob(pairs="0:THOROUGH")
    with pytest.raises(AirflowException, match="atlas_nowhere.*YARN"):
        submit(job, RunSettings(spark_conn_id="atlas_nowhere"), _address("sqlite:////tmp/never-opened.db"))
    with pytest.raises(AirflowException, match="atlas_nowhere.*YARN"):  # the runner itself refuses it too
        glue.SparkSubmitRunner().run(job, RunSettings(spark_conn_id="atlas_nowhere"),
                                     _address("sqlite:////tmp/never-opened.db"))
    assert list((tmp_path / "tmp").iterdir()) == []  # the private work directory was removed


def test_cluster_deploy_mode_is_refused(glue, monkeypatch, tmp_path):
    from airflow.sdk.exceptions import AirflowException

    monkeypatch.setenv(
        "AIRFLOW_CONN_ATLAS_YARN_CLUSTER",
        json.dumps({"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}),
    )
    from airflow_atlas.airflow.execution.spark_types import RunSettings
    from airflow_atlas.spark import FullSweepJob

    with pytest.raises(AirflowException, match="client mode"):
        glue.SparkSubmitRunner().run(FullSweepJob(table="orders", parts=2, batch_size=100, dry_run=True),
                                     RunSettings(spark_conn_id="atlas_yarn_cluster"),
                                     _address("cassandra://u:secret@h/ks"))
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.parametrize(
    "conn, master",
    [
        ({"conn_type": "spark", "host": "local[2]"}, "local[2]"),
        ({"conn_type": "spark", "host": "spark://m1", "port": 7077}, "spark://m1:7077"),
        ({"conn_type": "spark", "host": "yarn"}, "yarn"),
        ({"conn_type": "spark", "host": "k8s://https://api.example:443"}, "k8s://https://api.example:443"),
    ],
)
def test_master_matches_the_provider(glue, monkeypatch, submitted_master, conn, master):
    monkeypatch.setenv("AIRFLOW_CONN_ATLAS_M", json.dumps(conn))
    connection = glue.resolve_connection("atlas_m")
    assert glue.master_of(connection) == master
    if not master.startswith("k8s"):  # the k8s client library is not installed here
        assert submitted_master(glue._make_hook("atlas_m", connection)) == master


def test_spark_conf_precedence_and_executor_python_for_every_master(glue):
    import sys

    from airflow_atlas.airflow.execution.spark_types import cluster_options
    from airflow_atlas.airflow.settings import AtlasSettings

    default = glue.submit_conf()
    assert default["spark.pyspark.python"] == default["spark.pyspark.driver.python"] == sys.executable
    settings = AtlasSettings.from_mapping({
        "spark_conf": {"spark.executor.cores": 1, "spark.dynamicAllocation.enabled": False, "spark.archives": "env.tgz#env"},
        "spark_executor_python": "./env/bin/python",
        "spark_driver_host": "127.0.0.1",
    })
    conf = glue.submit_conf(**cluster_options(settings), extra_conf={"spark.executor.cores": "2"})
    assert conf["spark.pyspark.python"] == "./env/bin/python" and conf["spark.driver.host"] == "127.0.0.1"
    assert conf["spark.dynamicAllocation.enabled"] == "false" and conf["spark.archives"] == "env.tgz#env"
    assert conf["spark.executor.cores"] == "2"  # the caller's extra_conf wins over the setting
    assert conf["spark.pyspark.driver.python"] == sys.executable


@pytest.mark.parametrize(
    "values, message",
    [
        ({"spark_conf": ["spark.x=1"]}, "spark_conf must be a JSON object"),
        ({"spark_conf": {"executor.cores": "1"}}, "not a Spark conf key"),
        ({"spark_conf": {"spark.atlas.store.batch_limit": "5"}}, "store_config"),
        ({"spark_conf": {"spark.pyspark.python": "/x"}}, "spark_executor_python"),
        ({"spark_conf": {"spark.driver.host": "h"}}, "spark_driver_host"),
        ({"spark_conf": {"spark.submit.deployMode": "cluster"}}, "client mode"),
        ({"spark_conf": {"spark.executor.cores": None}}, "spark.executor.cores must be"),
        ({"spark_executor_python": ""}, "spark_executor_python must be a path"),
        ({"spark_driver_host": 127}, "spark_driver_host must be a host name"),
    ],
)
def test_spark_cluster_settings_are_validated(values, message):
    from airflow_atlas.airflow.settings import AtlasSettings
    from airflow_atlas.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=message):
        AtlasSettings.from_mapping(values)
