"""Replica-safety settings in Airflow connection extras: validated, passed to the store, carried to Spark."""
from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest

from airflow_atlas.airflow.hooks.atlas import AtlasHook, describe_connection, replica_extras, store_url
from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.consistency import replica_settings


def conn(conn_id="c", **fields):
    from airflow.sdk import Connection

    return Connection.from_json(json.dumps(fields), conn_id=conn_id)


EXTRA = {
    "consistency_sweep_delete": "quorum",
    "allow_weak_sweep_consistency": True,
    "consistency_queue_cleanup": "ONE",
    "repair_interval_seconds": 3600,
}


def test_extras_travel_in_the_store_url_and_parse_back_to_the_same_policy():
    c = conn(conn_type="cassandra", host="h1", schema="ks", extra=EXTRA)
    assert replica_extras(c) == {
        "consistency_sweep_delete": "QUORUM",
        "allow_weak_sweep_consistency": True,
        "consistency_queue_cleanup": "ONE",
        "repair_interval_seconds": 3600,
    }
    query = {k: v[0] for k, v in parse_qs(urlsplit(store_url(c)).query).items()}
    assert query["consistency_sweep_delete"] == "QUORUM" and query["allow_weak_sweep_consistency"] == "true"
    assert query["consistency_queue_cleanup"] == "ONE" and query["repair_interval_seconds"] == "3600"
    assert replica_settings(query) == replica_settings(replica_extras(c))  # executors get the task's policy
    plain = conn(conn_type="cassandra", host="h1", schema="ks")
    assert "consistency" not in store_url(plain)  # nothing set: executors use their settings' values


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"consistency_sweep_delete": "MOST"}, "extra setting consistency_sweep_delete must be one of"),
        ({"allow_weak_sweep_consistency": "perhaps"}, "extra setting allow_weak_sweep_consistency must be true or false"),
    ],
)
def test_bad_extras_are_rejected_naming_the_connection(extra, message):
    with pytest.raises(InvalidInputError, match=f"connection 'c': {message}"):
        describe_connection(conn(conn_type="cassandra", host="h1", schema="ks", extra=extra))


@pytest.mark.airflow
@pytest.mark.cassandra
def test_hook_layers_extras_over_atlas_settings(monkeypatch, cassandra_node, fresh_keyspace):
    host, port = cassandra_node
    monkeypatch.setenv(
        "AIRFLOW_CONN_ATLAS_HOOK_CL",
        json.dumps({"conn_type": "cassandra", "host": host, "port": port, "schema": fresh_keyspace, "extra": EXTRA}),
    )
    config = StoreConfig(consistency_data_read="ONE", consistency_queue_cleanup="TWO", repair_interval_seconds=60)
    with AtlasHook("atlas_hook_cl", config=config) as hook:
        kvs = hook.get_store().kvs
        assert kvs.consistency.sweep_delete == "QUORUM" and kvs.consistency.allow_weak_sweep_consistency
        assert kvs.consistency.queue_cleanup == "ONE"  # the connection wins over atlas_settings
        assert kvs.consistency.data_read == "ONE"  # atlas_settings fill in
        assert kvs.gc_grace_guard.repair_interval_seconds == 3600
    weak = StoreConfig(consistency_abort_delete="ONE")  # no override anywhere: refused before connecting
    monkeypatch.setenv(
        "AIRFLOW_CONN_ATLAS_HOOK_CL2",
        json.dumps({"conn_type": "cassandra", "host": host, "port": port, "schema": fresh_keyspace}),
    )
    with pytest.raises(InvalidInputError, match="consistency_abort_delete=ONE is below ALL"):
        AtlasHook("atlas_hook_cl2", config=weak).get_store()
