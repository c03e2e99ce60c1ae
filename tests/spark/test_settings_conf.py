"""A bad ``spark.atlas.store.<key>`` conf entry, through the real spark-submit (one JVM start): the driver
refuses it before any task runs, the job exits 2 and its document names the key; the store is untouched.
(The pure parts - parsing and validating conf entries, ``--setting`` - are in
tests/unit/spark/test_args_settings.py.)"""
from __future__ import annotations

import json

import pytest

from airflow_atlas.serialisation import to_json

from .conftest import cell_versions

pytestmark = [pytest.mark.spark, pytest.mark.airflow]


def test_bad_store_setting_in_spark_conf_fails_the_job_naming_the_key(make_store, monkeypatch, tmp_path):
    from airflow_atlas.airflow.execution.spark import submit
    from airflow_atlas.airflow.execution.spark_types import RunSettings, SparkSweepFailed
    from airflow_atlas.kvs.address import StoreAddress
    from airflow_atlas.spark import TargetedSweepJob

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    monkeypatch.setenv("ATLAS_SPARK_ARTIFACT_DIR", str(tmp_path / "artifacts"))
    handle = make_store("sqlite", seed=5, transactions=20)
    before = cell_versions(handle.store)
    with pytest.raises(SparkSweepFailed) as err:
        submit(TargetedSweepJob(pairs=[(0, "THOROUGH")]),
               RunSettings(spark_conn_id="spark_default",
                           extra_conf={"spark.atlas.store.lock_lease_seconds": "NaN", "spark.ui.enabled": "false"}),
               StoreAddress.from_url(handle.url))
    doc = to_json(err.value.document)
    assert doc["error_type"] == "InvalidInputError" and doc["results"] == []
    assert "setting lock_lease_seconds must be a finite number" in doc["error"]
    assert cell_versions(handle.reopen()) == before
