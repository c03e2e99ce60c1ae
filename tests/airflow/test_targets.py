from __future__ import annotations

import pytest

from airflow_atlas.airflow.targets import SweepTarget, batches, normalize_targets
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.serialisation import to_json


def test_targets_from_a_list_or_one_pair():
    assert normalize_targets(shard=3, strategy="thorough") == [SweepTarget(3, "THOROUGH")]
    assert normalize_targets([{"shard": 0, "strategy": "CONSERVATIVE", "sweep_ts": 9}])[0].sweep_ts == 9
    assert normalize_targets({"shard": 1, "strategy": "THOROUGH"}) == [SweepTarget(1, "THOROUGH")]


def test_a_target_round_trips_through_json_with_none_kept():
    target = SweepTarget(2, "CONSERVATIVE", sweep_ts=40, execution_mode="spark")
    data = to_json(target)
    assert data["result"] is None and data["swept_tables"] is None and data["execution_mode"] == "spark"
    assert SweepTarget.from_json(data) == target


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"shard": 1},
        {"targets": [{"shard": -1, "strategy": "THOROUGH"}]},
        {"targets": [{"shard": 1, "strategy": "NOTHING"}]},
        {"targets": [{"shard": True, "strategy": "THOROUGH"}]},
        {"targets": "0:THOROUGH"},
        {"targets": [{"shard": 1, "strategy": "THOROUGH"}], "shard": 1},
        {"targets": [{"shard": 1, "strategy": "THOROUGH", "sweep_ts": "12"}]},
        {"targets": [{"shard": 1, "strategy": "THOROUGH", "execution_mode": "auto"}]},
        {"targets": [{"shard": 1, "strategy": "THOROUGH", "tabels": ["x"]}]},
        {"targets": [{"shard": 1, "strategy": "THOROUGH", "token": 3}]},  # no lease travels in a target (issue 47)
    ],
)
def test_bad_targets(kwargs):
    with pytest.raises(InvalidInputError):
        normalize_targets(**kwargs)


def test_a_target_names_its_lock():
    assert SweepTarget(1, "THOROUGH").lock_name == "sweep/thorough/1"


def test_batches():
    assert batches(list(range(5)), 2) == [[0, 1], [2, 3], [4]]
    assert batches([], 3) == []
