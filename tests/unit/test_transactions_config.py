"""Pure parts of the transaction layer: configuration validation and the bounded result cache."""
from __future__ import annotations

import dataclasses

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.api import MAX_VALUE_BYTES
from airflow_atlas.transactions.manager import TransactionConfig
from airflow_atlas.transactions.service import _LruCache


def test_config_defaults():
    config = TransactionConfig()
    assert (config.lease_seconds, config.punch_interval_seconds, config.running_writer_wait_seconds) == (60, 60, 5)
    assert config.max_value_bytes == MAX_VALUE_BYTES


@pytest.mark.parametrize(
    "override",
    [
        {"lease_seconds": 0},
        {"lease_seconds": -1},
        {"punch_interval_seconds": -1},
        {"running_writer_wait_seconds": -0.1},
        {"max_value_bytes": 0},
        {"max_value_bytes": MAX_VALUE_BYTES + 1},
        {"metadata_cache_seconds": 0},
    ],
)
def test_config_rejects_bad_values(override):
    with pytest.raises(InvalidInputError, match=next(iter(override))):
        dataclasses.replace(TransactionConfig(), **override)


def test_config_allows_punching_on_every_begin():
    assert TransactionConfig(punch_interval_seconds=0).punch_interval_seconds == 0


def test_lru_cache_is_bounded_and_keeps_recent_entries():
    cache = _LruCache(3)
    cache.put_many({1: 10, 2: 20, 3: 30})
    assert cache.get_many([1]) == {1: 10}  # 1 becomes the most recent
    cache.put_many({4: 40})
    assert len(cache) == 3
    assert cache.get_many([1, 2, 3, 4]) == {1: 10, 3: 30, 4: 40}


def test_lru_cache_of_size_zero_caches_nothing():
    cache = _LruCache(0)
    cache.put_many({1: 10})
    assert cache.get_many([1]) == {} and len(cache) == 0
    with pytest.raises(InvalidInputError):
        _LruCache(-1)
