"""The transaction manager's configuration (transactions/manager.py ``TransactionConfig``): its validation. Pure."""
from __future__ import annotations

import dataclasses

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.api import MAX_VALUE_BYTES
from airflow_atlas.transactions.manager import TransactionConfig


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
