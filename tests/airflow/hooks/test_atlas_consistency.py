"""Replica-safety settings in Airflow connection extras: the settings resolver's top layer (STORE) for
that store, validated naming the connection, carried to Spark in the resolved settings (never a second
copy in the store URL)."""
from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest

from airflow_atlas.airflow.hooks.atlas import AtlasHook, connection_layer, describe_connection, store_url
from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.settings_resolver import Layer, Rank, resolve


def conn(conn_id="c", **fields):
    from airflow.sdk import Connection

    return Connection.from_json(json.dumps(fields), conn_id=conn_id)


EXTRA = {
    "consistency_sweep_delete": "quorum",
    "allow_weak_sweep_consistency": True,
    "consistency_queue_cleanup": "ONE",
    "repair_interval_seconds": 3600,
}


def test_extras_are_the_store_layer_and_not_in_the_store_url():
    c = conn(conn_type="cassandra", host="h1", schema="ks", extra=EXTRA)
    layer = connection_layer(c)
    assert layer.rank is Rank.STORE and dict(layer.values) == EXTRA and layer.source == "connection 'c' extras"
    below = Layer(Rank.VARIABLE, "the atlas_settings Variable", {"consistency_queue_cleanup": "TWO", "consistency_data_read": "ONE"})
    config = resolve(below, layer)
    assert (config.consistency_sweep_delete, config.allow_weak_sweep_consistency) == ("QUORUM", True)
    assert config.consistency_queue_cleanup == "ONE" and config.consistency_data_read == "ONE"  # the connection wins
    assert config.repair_interval_seconds == 3600
    query = {k: v[0] for k, v in parse_qs(urlsplit(store_url(c)).query).items()}
    assert not any(k.startswith("consistency_") or k.startswith("allow_") or k.startswith("repair") for k in query)
    assert connection_layer(conn(conn_type="atlas_embedded", host="/tmp/x.db")).values == {}


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"consistency_sweep_delete": "MOST"}, "setting consistency_sweep_delete must be one of"),
        ({"allow_weak_sweep_consistency": "perhaps"}, "setting allow_weak_sweep_consistency must be true or false"),
    ],
)
def test_bad_extras_are_rejected_naming_the_connection(extra, message):
    with pytest.raises(InvalidInputError, match=f"{message}.*from connection 'c' extras"):
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
        store = hook.get_store()
        kvs = store.kvs
        assert kvs.consistency.sweep_delete == "QUORUM" and store.config.allow_weak_sweep_consistency
        assert kvs.consistency.queue_cleanup == "ONE"  # the connection wins over atlas_settings
        assert kvs.consistency.data_read == "ONE"  # atlas_settings fill in
        assert kvs.gc_grace_guard.repair_interval_seconds == 3600
        assert hook.resolved_config() == store.config  # what a Spark job of this store gets (to_json)
    with pytest.raises(InvalidInputError, match="consistency_abort_delete=ONE needs setting allow_weak_sweep_consistency"):
        StoreConfig(consistency_abort_delete="ONE")  # refused where it is declared
    monkeypatch.setenv(
        "AIRFLOW_CONN_ATLAS_HOOK_CL2",
        json.dumps({"conn_type": "cassandra", "host": host, "port": port, "schema": fresh_keyspace,
                    "extra": {"consistency_abort_delete": "ONE"}}),
    )
    with pytest.raises(InvalidInputError, match=r"consistency_abort_delete=ONE needs setting allow_weak_sweep_consistency"
                                                r".*settings from: connection 'atlas_hook_cl2' extras"):
        AtlasHook("atlas_hook_cl2", config=StoreConfig()).get_store()  # no override anywhere: refused before connecting


def test_a_spark_job_gets_the_resolved_settings_once(monkeypatch):
    """The Spark path (the operator's ``run_settings`` and ``store_address``, from the task's one hook) sends
    the task's settings resolved with the connection's extras as Spark conf (``settings``), and a store address
    without replica-safety options (nor its URL): one copy, one meaning. Nothing connects to the store for it."""
    from airflow_atlas.airflow.operators.sweep import SweepShardOperator
    from airflow_atlas.airflow.settings import AtlasSettings

    monkeypatch.setenv("AIRFLOW_CONN_ATLAS_SPARK_CL", json.dumps(
        {"conn_type": "cassandra", "host": "h1", "port": 9042, "schema": "ks", "extra": EXTRA}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CL", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    settings = AtlasSettings.from_mapping({"consistency_data_read": "ONE", "batch_limit": 77})
    operator = SweepShardOperator(task_id="sweep", store_conn_id="atlas_spark_cl", spark_conn_id="spark_cl",
                                  store_config={"consistency_queue_cleanup": "TWO"}, shard=0, strategy="THOROUGH")
    with operator.open_hook(settings):
        run_settings = operator.run_settings(settings)
        seen = {"address": operator.store_address(), "settings": run_settings.settings}
    assert run_settings.spark_conn_id == "spark_cl"
    sent = seen["settings"]
    assert sent == StoreConfig(**sent).to_json()  # a whole, valid settings object
    assert (sent["consistency_sweep_delete"], sent["allow_weak_sweep_consistency"]) == ("QUORUM", True)  # extras
    assert sent["consistency_queue_cleanup"] == "ONE"  # the connection over the task's store_config
    assert (sent["consistency_data_read"], sent["batch_limit"]) == ("ONE", 77)  # the Variable
    assert seen["address"].settings == ()
    url = seen["address"].to_url()  # what spark-submit writes into its private URL file
    assert "consistency" not in url and "allow_weak" not in url
