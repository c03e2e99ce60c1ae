"""THE settings resolver (airflow_atlas.settings_resolver): every layer, its precedence applied once, one
immutable StoreConfig. Pure logic: no services."""
from __future__ import annotations

import dataclasses
import itertools

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.address import StoreAddress
from airflow_atlas.kvs.url import STORE_URL_ENV, store_url_from_environment
from airflow_atlas.settings_resolver import (
    Layer,
    Rank,
    address_layer,
    parse_assignments,
    resolve,
    text_layer,
    with_address,
)

KEY = "consistency_queue_cleanup"  # a key every layer may set, the store layer included


def _layers():
    """One layer per rank, each setting KEY (to its own level) and one key of its own."""
    return [
        Layer(Rank.VARIABLE, "the atlas_settings Variable", {KEY: "ONE", "batch_limit": 500}),
        Layer(Rank.TASK, "the task's store_config", {KEY: "TWO", "unreadable_window_seconds": 5}),
        text_layer(Rank.SPARK_CONF, {KEY: "THREE", "lock_lease_seconds": "30"}, "spark.atlas.store.* conf"),
        text_layer(Rank.COMMAND_LINE, {KEY: "QUORUM", "max_iterations_per_shard": "7"}, "--set"),
        Layer(Rank.STORE, "connection 'c' extras", {KEY: "local_one", "repair_interval_seconds": "3600"}, text=True),
    ]


def test_precedence_across_every_layer_in_any_order():
    expected = {KEY: "LOCAL_ONE", "batch_limit": 500, "unreadable_window_seconds": 5.0, "lock_lease_seconds": 30.0,
                "max_iterations_per_shard": 7, "repair_interval_seconds": 3600}
    for order in itertools.permutations(_layers()):
        config = resolve(*order)
        assert {k: getattr(config, k) for k in expected} == expected
        assert config.transaction_lease_seconds == StoreConfig().transaction_lease_seconds  # the default
    # take the top layers away one by one: the next one down wins
    layers = _layers()
    for top, level in zip(range(len(layers), 0, -1), ["LOCAL_ONE", "QUORUM", "THREE", "TWO", "ONE"], strict=True):
        assert getattr(resolve(*layers[:top]), KEY) == level
    assert getattr(resolve(), KEY) == "LOCAL_QUORUM"  # the declaration's default


def test_the_result_is_one_immutable_object_serialised_once():
    config = resolve(*_layers())
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.batch_limit = 1  # type: ignore[misc]
    assert StoreConfig(**config.to_json()) == config  # what a Spark task rebuilds from the conf


def test_base_stands_for_the_layers_below():
    base = resolve(Layer(Rank.VARIABLE, "v", {"batch_limit": 500, KEY: "ONE"}))
    config = resolve(Layer(Rank.STORE, "the store URL", {KEY: "TWO"}, text=True), base=base)
    assert (config.batch_limit, getattr(config, KEY)) == (500, "TWO")


def test_errors_name_the_key_and_the_layer():
    with pytest.raises(InvalidInputError, match=r"setting batch_limit must be between 1 and 100000, got 0 \(from --set\)"):
        resolve(text_layer(Rank.COMMAND_LINE, {"batch_limit": "0"}, "--set"))
    with pytest.raises(InvalidInputError, match=r"unknown setting\(s\): batch \(from the task's store_config\)"):
        resolve(Layer(Rank.TASK, "the task's store_config", {"batch": 1}))
    with pytest.raises(InvalidInputError, match="settings must be a mapping"):
        Layer(Rank.TASK, "the task's store_config", [("batch_limit", 1)])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"setting 'x' is not NAME=VALUE \(from --setting\)"):
        parse_assignments(["x"], "--setting")
    assert parse_assignments([" batch_limit = 5 "], "--setting") == [("batch_limit", "5")]


def test_the_store_url_is_the_top_layer():
    url = "cassandra://user:pw@h1/ks?consistency_sweep_delete=quorum&allow_weak_sweep_consistency=yes&page_size=5"
    address = StoreAddress.from_url(url)
    layer = address_layer(address)
    assert layer.values == {"consistency_sweep_delete": "quorum", "allow_weak_sweep_consistency": "yes"}
    assert layer.rank is Rank.STORE and layer.source == "the store URL"
    assert address_layer(StoreAddress.from_url("sqlite:///a.db")).values == {}
    below = StoreConfig(batch_limit=9)
    config = with_address(below, address)
    assert (config.consistency_sweep_delete, config.allow_weak_sweep_consistency, config.batch_limit) == ("QUORUM", True, 9)
    assert with_address(below, StoreAddress.from_url("cassandra://h1/ks")) is below  # nothing in the URL: as it was


def test_the_store_url_variable_has_one_reader(monkeypatch):
    monkeypatch.setenv(STORE_URL_ENV, "  sqlite:///x.db ")
    assert store_url_from_environment() == "sqlite:///x.db"
    assert store_url_from_environment({STORE_URL_ENV: " "}) is None
    monkeypatch.delenv(STORE_URL_ENV)
    assert store_url_from_environment() is None
