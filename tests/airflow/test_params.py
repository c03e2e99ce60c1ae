"""Validation of the UI forms against the store's shape (unknown keys, shards, tables, strategies)."""
from __future__ import annotations

import pytest

from airflow_atlas.airflow.params import validate_full_sweep, validate_manual_sweep
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.api import SweepStrategy as S

TABLES = {"orders": S.CONSERVATIVE, "events": S.THOROUGH, "audit": S.NOTHING}
DEFAULTS = {"tables": [], "shards": [], "strategy": "ALL", "dry_run": False, "max_batches": None}


def manual(conf=None, **params):
    return validate_manual_sweep(conf or {}, {**DEFAULTS, **params}, number_of_shards=4, user_tables=TABLES)


def test_defaults_mean_every_shard_and_both_strategies():
    assert manual() == {
        "shards": [0, 1, 2, 3],
        "strategies": ["CONSERVATIVE", "THOROUGH"],
        "tables": [],
        "dry_run": False,
        "max_batches": None,
    }


def test_tables_choose_the_strategies_and_shards_are_kept():
    out = manual(tables=["events"], shards=[3, 1, 3], max_batches=2, dry_run=True)
    assert out["strategies"] == ["THOROUGH"] and out["shards"] == [3, 1] and out["max_batches"] == 2 and out["dry_run"]


@pytest.mark.parametrize(
    "conf, params, message",
    [
        ({"shard": [1]}, {}, "unknown parameter(s) 'shard'; allowed: dry_run, max_batches, shards, strategy, tables"),
        ({}, {"shards": [4]}, "shard(s) [4] out of range: the store has 4 shard(s) (0..3)"),
        ({}, {"tables": ["nope"]}, "unknown table(s) 'nope'; the store has: audit, events, orders"),
        ({}, {"tables": ["audit"]}, "'audit' have sweep strategy NOTHING"),
        ({}, {"strategy": "SOMETIMES"}, "unknown strategy 'SOMETIMES'"),
        ({}, {"tables": ["orders"], "strategy": "THOROUGH"}, "'orders' (CONSERVATIVE) do not use strategy THOROUGH"),
        ({}, {"max_batches": 0}, "max_batches must be a positive integer"),
    ],
)
def test_bad_requests_are_rejected_with_a_clear_message(conf, params, message):
    with pytest.raises(InvalidInputError) as err:
        manual(conf, **params)
    assert message in str(err.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(InvalidInputError) as err:
        manual({"bogus": 1}, shards=[9], tables=["nope"])
    text = str(err.value)
    assert "'bogus'" in text and "[9]" in text and "'nope'" in text


def test_full_sweep_request():
    assert validate_full_sweep({}, {"tables": [], "parts": None, "dry_run": False}, user_tables=TABLES)["tables"] == ["events", "orders"]
    with pytest.raises(InvalidInputError, match="unknown parameter"):
        validate_full_sweep({"table": "x"}, {"tables": []}, user_tables=TABLES)
    with pytest.raises(InvalidInputError, match="unknown table"):
        validate_full_sweep({}, {"tables": ["x"]}, user_tables=TABLES)
