from __future__ import annotations

import pytest

from airflow_atlas.airflow.targets import SweepTarget, batches, normalize_targets
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.locks import Lease


def test_targets_from_a_list_or_one_pair():
    assert normalize_targets(shard=3, strategy="thorough") == [SweepTarget(3, "THOROUGH")]
    assert normalize_targets([{"shard": 0, "strategy": "CONSERVATIVE", "sweep_ts": 9}])[0].sweep_ts == 9
    assert normalize_targets({"shard": 1, "strategy": "THOROUGH"}) == [SweepTarget(1, "THOROUGH")]


def test_a_target_round_trips_through_json_with_none_kept():
    target = SweepTarget(2, "CONSERVATIVE", sweep_ts=40, execution_mode="spark")
    data = target.to_json()
    assert data["token"] is None and data["result"] is None and data["execution_mode"] == "spark"
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
    ],
)
def test_bad_targets(kwargs):
    with pytest.raises(InvalidInputError):
        normalize_targets(**kwargs)


def test_leases_round_trip_through_json():
    lease = Lease("sweep/thorough/1", "me", 7, 123.5)
    target = SweepTarget.from_json(SweepTarget(1, "THOROUGH").with_lease(lease).to_json())
    assert target.lease() == lease and target.lock_name == "sweep/thorough/1"
    assert target.with_(acquired=False).lease() is None


def test_batches():
    assert batches(list(range(5)), 2) == [[0, 1], [2, 3], [4]]
    assert batches([], 3) == []
