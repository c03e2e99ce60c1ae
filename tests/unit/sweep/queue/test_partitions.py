import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.sweep.queue import constants as k
from airflow_atlas.sweep.queue.partitions import (
    FINE_PER_COARSE,
    coarse,
    fine,
    fine_to_coarse,
    max_ts_of_coarse,
    max_ts_of_fine,
    min_ts_of_coarse,
    min_ts_of_fine,
)


def test_constants():
    assert (k.FINE_PARTITION, k.COARSE_PARTITION, k.MAX_SHARDS) == (50_000, 10_000_000, 256)
    assert (k.MAX_CELLS_GENERIC, k.MAX_CELLS_DEDICATED, k.MAX_DEDICATED_ROWS) == (50, 100_000, 64)
    assert (k.DEFAULT_BATCH_LIMIT, k.MAX_BATCH_LIMIT, k.INITIAL_PROGRESS) == (10_000, 100_000, -1)
    assert k.MAX_WRITES_PER_PARTITION == 6_400_000
    assert FINE_PER_COARSE == 200


@pytest.mark.parametrize(
    "ts, f, c",
    [
        (0, 0, 0),
        (49_999, 0, 0),
        (50_000, 1, 0),
        (50_001, 1, 0),
        (9_999_999, 199, 0),
        (10_000_000, 200, 1),
        (10_049_999, 200, 1),
        (10_050_000, 201, 1),
        (10**12, 20_000_000, 100_000),
        ((1 << 63) - 1, ((1 << 63) - 1) // 50_000, ((1 << 63) - 1) // 10_000_000),
    ],
)
def test_fine_and_coarse_at_boundaries(ts, f, c):
    assert fine(ts) == f
    assert coarse(ts) == c
    assert fine_to_coarse(f) == c
    assert min_ts_of_fine(f) <= ts <= max_ts_of_fine(f)
    assert min_ts_of_coarse(c) <= ts <= max_ts_of_coarse(c)


def test_partition_bounds():
    assert (min_ts_of_fine(1), max_ts_of_fine(1)) == (50_000, 99_999)
    assert (min_ts_of_coarse(1), max_ts_of_coarse(1)) == (10_000_000, 19_999_999)
    assert fine_to_coarse(199) == 0 and fine_to_coarse(200) == 1


@pytest.mark.parametrize("bad", [-1, 1 << 63, 1.5, "3", True, None])
def test_rejects_non_timestamps(bad):
    with pytest.raises(InvalidInputError):
        fine(bad)
    with pytest.raises(InvalidInputError):
        coarse(bad)
