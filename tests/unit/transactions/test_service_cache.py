"""The transaction service's bounded result cache (transactions/service.py ``_LruCache``): pure."""
from __future__ import annotations

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.transactions.service import _LruCache


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
