"""Sensors: the non-deferrable poke path against a real store, the deferrable path's error handling.
(The deferrable path end to end, trigger run inline by dag.test(), is in
tests/airflow/dags/test_example_bulk_load_then_sweep.py.)"""
from __future__ import annotations

import json

import pytest

from airflow_atlas.airflow.sensors import LockFreeSensor, SweepableWorkSensor, SweepTimestampSensor

CONN = "atlas_sensor_test"


@pytest.fixture
def store(monkeypatch, tmp_path):
    from airflow_atlas.airflow.hooks.atlas import AtlasHook

    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN.upper()}", json.dumps({"conn_type": "atlas_embedded", "host": str(tmp_path / "s.db")}))
    monkeypatch.setenv("AIRFLOW_VAR_ATLAS_SETTINGS", json.dumps({"store_conn_id": CONN}))
    with AtlasHook(CONN) as hook:
        store = hook.get_store()
        store.initialize(shards=1)
        store.create_table("events", "THOROUGH")
        yield store


def test_poke_follows_the_store(store):
    from airflow_atlas.kvs.api import Cell

    blocker = store.transactions.begin()
    txn = store.transactions.begin()
    txn.put("events", {Cell(b"r", b"c"): b"v"})
    commit = txn.commit()
    sensor = SweepTimestampSensor(task_id="ts", target_ts=str(commit), strategy="THOROUGH", deferrable=False)
    assert sensor.poke({}).is_done is False  # the open transaction holds the sweep timestamp back
    blocker.abort()
    done = sensor.poke({})
    assert done.is_done and done.xcom_value["sweep_timestamps"]["THOROUGH"] > commit

    work = SweepableWorkSensor(task_id="work", shard=0, strategy="THOROUGH", deferrable=False)
    assert work.poke({}).is_done

    lease = store.locks.acquire("sweep/thorough/0", "me", 60)
    free = LockFreeSensor(task_id="free", shard=0, strategy="THOROUGH", deferrable=False)
    assert free.poke({}).is_done is False
    store.locks.release(lease)
    assert free.poke({}).xcom_value == {"lock": "sweep/thorough/0", "last_holder": None, "token": lease.token}


def test_bad_input_fails_without_retries(store):
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowFailException, match="out of range"):
        SweepableWorkSensor(task_id="w", shard=5, strategy="THOROUGH", deferrable=False).poke({})
    with pytest.raises(AirflowFailException, match="target_ts must be an integer"):
        SweepTimestampSensor(task_id="t", target_ts="soon").poke({})
    with pytest.raises(ValueError):
        LockFreeSensor(task_id="l")


def test_an_error_event_fails_the_sensor(store):
    from airflow.sdk.exceptions import AirflowException

    sensor = SweepTimestampSensor(task_id="ts", target_ts=1)
    with pytest.raises(AirflowException, match="3 consecutive store errors"):
        sensor.execute_complete({}, {"status": "error", "message": "3 consecutive store errors, last: ..."})
    assert sensor.execute_complete({}, {"status": "success", "target_ts": 1}) == {"target_ts": 1, "deferred": True}
