"""Validation of the UI forms against the store's shape (unknown keys, shards, tables, strategies)."""
from __future__ import annotations

import pytest

from airflow_atlas.airflow.params import validate_full_sweep, validate_manual_sweep
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.tables import SweepStrategy as S

TABLES = {"orders": S.CONSERVATIVE, "events": S.THOROUGH, "audit": S.NOTHING}
DEFAULTS = {"tables": [], "shards": [], "strategy": "ALL", "dry_run": False, "max_batches": None, "max_entries_per_second": None}


def manual(conf=None, **params):
    return validate_manual_sweep(conf or {}, {**DEFAULTS, **params}, number_of_shards=4, user_tables=TABLES)


def test_defaults_mean_every_shard_and_both_strategies():
    assert manual() == {
        "shards": [0, 1, 2, 3],
        "strategies": ["CONSERVATIVE", "THOROUGH"],
        "tables": [],
        "dry_run": False,
        "max_batches": None,
        "max_entries_per_second": None,
        "store_config": {},  # no intensity given: the sweep tasks read the setting themselves
    }


def test_the_intensity_is_a_settings_layer_and_zero_means_unlimited():
    out = manual(max_entries_per_second=2500)
    assert out["max_entries_per_second"] == 2500
    assert out["store_config"] == {"sweep_max_entries_per_second": 2500, "sweep_latency_target": 0.0}  # a fixed rate
    assert manual(max_entries_per_second=0)["store_config"] == {"sweep_max_entries_per_second": 0,
                                                                 "sweep_latency_target": 0.0}


def test_the_forms_intensity_field_follows_the_settings_limits():
    from airflow_atlas.airflow.params import manual_sweep_params
    from airflow_atlas.config import MAX_SWEEP_ENTRIES_PER_SECOND, StoreConfig

    schema = manual_sweep_params()["max_entries_per_second"].schema
    assert schema["minimum"] == 0 and schema["maximum"] == MAX_SWEEP_ENTRIES_PER_SECOND
    assert "null" in schema["type"] and manual_sweep_params()["max_entries_per_second"].value is None
    StoreConfig(sweep_max_entries_per_second=schema["maximum"])  # the form's largest value is a valid setting


def test_tables_choose_the_strategies_and_shards_are_kept():
    out = manual(tables=["events"], shards=[3, 1, 3], max_batches=2, dry_run=True)
    assert out["strategies"] == ["THOROUGH"] and out["shards"] == [3, 1] and out["max_batches"] == 2 and out["dry_run"]


@pytest.mark.parametrize(
    "conf, params, message",
    [
        ({"shard": [1]}, {}, "unknown parameter(s) 'shard'; allowed: dry_run, max_batches, max_entries_per_second, shards, strategy, tables"),
        ({}, {"shards": [4]}, "shard(s) [4] out of range: the store has 4 shard(s) (0..3)"),
        ({}, {"tables": ["nope"]}, "unknown table(s) 'nope'; the store has: audit, events, orders"),
        ({}, {"tables": ["audit"]}, "'audit' have sweep strategy NOTHING"),
        ({}, {"strategy": "SOMETIMES"}, "unknown strategy 'SOMETIMES'"),
        ({}, {"tables": ["orders"], "strategy": "THOROUGH"}, "'orders' (CONSERVATIVE) do not use strategy THOROUGH"),
        ({}, {"max_batches": 0}, "max_batches must be an integer in 1..1000000 or empty, got 0"),
        ({}, {"max_batches": 1_000_001}, "max_batches must be an integer in 1..1000000"),
        ({}, {"max_batches": True}, "max_batches must be an integer"),
        ({}, {"max_batches": 2.0}, "max_batches must be an integer"),
        ({}, {"shards": [True]}, "shard(s) [True] out of range"),
        ({}, {"shards": [-1]}, "shard(s) [-1] out of range"),
        ({}, {"dry_run": "yes"}, "dry_run must be true or false"),
        # checked by the setting's declaration, naming the form's field as the source
        ({}, {"max_entries_per_second": -1},
         "setting sweep_max_entries_per_second must be between 0 and 10000000, got -1 (from the form's max_entries_per_second)"),
        ({}, {"max_entries_per_second": 10_000_001}, "setting sweep_max_entries_per_second must be between 0 and 10000000"),
        ({}, {"max_entries_per_second": 1.5}, "setting sweep_max_entries_per_second must be an integer"),
        ({}, {"max_entries_per_second": True}, "setting sweep_max_entries_per_second must be an integer"),
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


@pytest.mark.parametrize("parts", [0, 4097, True, 1.5, "4"])
def test_full_sweep_parts_out_of_range_or_not_an_integer(parts):
    with pytest.raises(InvalidInputError, match="parts must be an integer in 1..4096 or empty"):
        validate_full_sweep({}, {"tables": [], "parts": parts, "dry_run": False}, user_tables=TABLES)


def test_form_limits_come_from_the_settings_model():
    from airflow_atlas.airflow.params import full_sweep_params, manual_sweep_params
    from airflow_atlas.airflow.settings import MAX_FULL_SWEEP_PARTS
    from airflow_atlas.config import MAX_ITERATIONS_PER_SHARD
    from airflow_atlas.kvs.tables import SWEEPABLE_STRATEGY_NAMES
    from airflow_atlas.sweep.queue.constants import MAX_SHARDS

    form = {k: p.schema for k, p in manual_sweep_params().items()}
    assert form["shards"]["items"]["maximum"] == MAX_SHARDS - 1
    assert form["max_batches"]["maximum"] == MAX_ITERATIONS_PER_SHARD
    assert form["strategy"]["enum"] == ["ALL", *SWEEPABLE_STRATEGY_NAMES]
    assert full_sweep_params()["parts"].schema["maximum"] == MAX_FULL_SWEEP_PARTS
    assert validate_full_sweep({}, {"tables": [], "parts": MAX_FULL_SWEEP_PARTS, "dry_run": False}, user_tables=TABLES)["parts"] == MAX_FULL_SWEEP_PARTS


def test_validate_request_operator_pushes_each_key_and_fails_at_once_on_a_bad_form(embedded_store):
    from airflow_atlas.airflow.params import ValidateSweepRequestOperator
    from tests.airflow.conftest import SHARDS
    from tests.airflow.operators.conftest import TaskInstance, fails_at_once

    store, _ = embedded_store
    store.create_table("events", "THOROUGH")
    operator = ValidateSweepRequestOperator(task_id="validate_request", request="targeted")
    ti = TaskInstance()
    params = {"tables": ["events"], "shards": [1], "strategy": "ALL", "dry_run": True, "max_batches": None,
              "max_entries_per_second": None}
    out = operator.execute({"ti": ti, "params": params, "dag_run": None})
    assert out["shards"] == [1] and out["strategies"] == ["THOROUGH"] and out["tables"] == ["events"]
    # unset: no layer of its own, the settings (Variable and below) decide when the sweep task runs
    assert out["max_entries_per_second"] is None and out["store_config"] == {}
    assert ti.pushed["max_batches"] == 0 and ti.pushed["shards"] == [1] and ti.pushed["dry_run"] is True
    fails_at_once(lambda: operator.execute({"ti": TaskInstance(), "params": {**params, "shards": [SHARDS]}, "dag_run": None}),
                  "out of range")
    with pytest.raises(ValueError, match="request must be"):
        ValidateSweepRequestOperator(task_id="v", request="sideways")
