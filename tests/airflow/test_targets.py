from __future__ import annotations

import pytest

from airflow_atlas.airflow.targets import batches, lease_from, lease_to_json, normalize_targets
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.locks import Lease


def test_targets_from_a_list_or_one_pair():
    assert normalize_targets(shard=3, strategy="thorough") == [{"shard": 3, "strategy": "THOROUGH"}]
    assert normalize_targets([{"shard": 0, "strategy": "CONSERVATIVE", "sweep_ts": 9}])[0]["sweep_ts"] == 9
    assert normalize_targets({"shard": 1, "strategy": "THOROUGH"}) == [{"shard": 1, "strategy": "THOROUGH"}]


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
    ],
)
def test_bad_targets(kwargs):
    with pytest.raises(InvalidInputError):
        normalize_targets(**kwargs)


def test_leases_round_trip_through_json():
    lease = Lease("sweep/thorough/1", "me", 7, 123.5)
    target = {"shard": 1, "strategy": "THOROUGH", **lease_to_json(lease), "acquired": True}
    assert lease_from(target) == lease
    assert lease_from({**target, "acquired": False}) is None


def test_batches():
    assert batches(list(range(5)), 2) == [[0, 1], [2, 3], [4]]
    assert batches([], 3) == []
