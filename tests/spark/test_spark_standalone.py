"""The targeted-sweep job on a Spark standalone master through the Airflow glue, with the Spark-on-a-cluster
settings (``spark_executor_python``, ``spark_driver_host``, ``spark_conf``), against the Cassandra node.

* The default (no executor Python set) now works on a cluster: the glue sets ``spark.pyspark.python`` for
  every master, so the workers do not fall back to their system ``python3`` (which lacks cassandra-driver).
* An executor Python without cassandra-driver: every pair fails at once (attempt 0, not retried by Spark),
  and the task fails without Airflow retries (``SparkSweepRefused``) naming the missing module and the fix.
* An executor Python of another minor version: Spark's PYTHON_VERSION_MISMATCH becomes a refusal that names
  the driver's version and the setting to change.

The master: ``spark://127.0.0.5:7077`` (``spark_master``, which starts it unless it runs), or
``$ATLAS_TEST_SPARK_MASTER`` (``spark://HOST:PORT``, never started here; its host is also the driver's
advertised address; skipped when it does not answer).
"""
from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from airflow_atlas.serialisation import to_json

from .conftest import SETTINGS, SHARDS, STRATEGIES

pytestmark = [pytest.mark.spark, pytest.mark.airflow, pytest.mark.cassandra]

GIVEN_MASTER = os.environ.get("ATLAS_TEST_SPARK_MASTER")
PAIRS = [(shard, strategy) for shard in range(SHARDS) for strategy in STRATEGIES]


@pytest.fixture
def master(request) -> str:
    """``$ATLAS_TEST_SPARK_MASTER`` when it answers (skipped when not), else the suite's (``spark_master``)."""
    if not GIVEN_MASTER:
        return request.getfixturevalue("spark_master")["spark.master"]
    parts = urlsplit(GIVEN_MASTER)
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=2).close()
    except OSError:
        pytest.skip(f"no Spark standalone master at {GIVEN_MASTER}")
    return GIVEN_MASTER


@pytest.fixture
def standalone(master, monkeypatch, tmp_path):
    parts = urlsplit(master)
    monkeypatch.setenv("AIRFLOW_CONN_ATLAS_STANDALONE", json.dumps({"conn_type": "spark", "host": master}))
    monkeypatch.setenv("ATLAS_SPARK_ARTIFACT_DIR", str(tmp_path / "artifacts"))
    return {"driver_host": parts.hostname, "spark_conf": {"spark.ui.enabled": "false", "spark.cores.max": "1",
                                                          "spark.executor.memory": "512m", "spark.task.maxFailures": "4"}}


def _submit(handle, standalone, **options):
    from airflow_atlas.airflow.execution.spark import submit
    from airflow_atlas.airflow.execution.spark_types import RunSettings
    from airflow_atlas.kvs.address import StoreAddress
    from airflow_atlas.spark import TargetedSweepJob

    settings = RunSettings(spark_conn_id="atlas_standalone", settings=dict(SETTINGS), **{**standalone, **options})
    return submit(TargetedSweepJob(pairs=PAIRS, batch_limit=50), settings, StoreAddress.from_url(handle.url))


def _other_minor_python() -> str | None:
    for root in (Path("/root/.pyenv/versions"), Path("/usr/bin")):
        for candidate in sorted(root.glob("3.*/bin/python3")) + sorted(root.glob("python3.*")):
            if candidate.name.endswith("-config") or not os.access(candidate, os.X_OK):
                continue
            version = candidate.parent.parent.name if root.name == "versions" else candidate.name[len("python"):]
            if not version.startswith(f"{sys.version_info[0]}.{sys.version_info[1]}"):
                return str(candidate)
    return None


def test_default_executor_python_sweeps_on_a_standalone_master(make_store, standalone, master):
    handle = make_store("cassandra", seed=21, transactions=40)
    doc = to_json(_submit(handle, standalone))
    assert doc["ok"] and doc["master"] == master, doc
    assert {r["status"] for r in doc["results"]} == {"caught_up"}
    assert all(r["executor"]["airflow_imported"] is False for r in doc["results"])


def test_executor_python_without_the_engine_dependencies_is_refused_naming_the_fix(make_store, standalone):
    """The system Python has neither pydantic, which the engine imports when it loads (so the task cannot
    even be unpickled: the application fails, as with a Python of another minor version), nor cassandra-driver,
    which it imports on use (a pair would fail at once). Either way: not retriable, and the error names the
    missing module and the fix."""
    from airflow_atlas.airflow.execution.spark_types import SparkSweepRefused

    bare = "/usr/bin/python3"  # the system Python: same minor version here, no pydantic, no cassandra-driver
    if not os.access(bare, os.X_OK):
        pytest.skip("no system python3")
    handle = make_store("cassandra", seed=22, transactions=20)
    with pytest.raises(SparkSweepRefused) as caught:
        _submit(handle, standalone, executor_python=bare)
    doc = to_json(caught.value.document)
    assert doc["ok"] is False and doc["retriable"] is False
    assert doc["error_type"] == "ExecutorEnvironmentError", doc
    assert "No module named 'pydantic'" in doc["error"] and "install the engine's dependencies" in doc["error"]
    assert not doc["results"]  # no pair ran: nothing was swept
    assert "spark_executor_python" in str(caught.value)


def test_executor_python_of_another_minor_version_is_refused_naming_the_fix(make_store, standalone):
    from airflow_atlas.airflow.execution.spark_types import SparkSweepRefused

    other = _other_minor_python()
    if other is None:
        pytest.skip("no Python of another minor version on this machine")
    handle = make_store("sqlite", seed=23, transactions=20)
    with pytest.raises(SparkSweepRefused) as caught:
        _submit(handle, standalone, executor_python=other)
    doc = to_json(caught.value.document)
    driver = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert doc["retriable"] is False and doc["error_type"] == "ExecutorEnvironmentError"
    assert f"Python {driver}" in doc["error"] and "spark_executor_python" in doc["error"]
