import collections
import os
import subprocess
import sys

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.sweep.queue.shards import shard_for, write_hash

N_PER_SHARD = 400


def _assert_roughly_uniform(shards, buckets=256):
    counts = collections.Counter(shards)
    n = len(shards)
    mean = n / buckets
    assert len(counts) == buckets, "every shard gets writes"
    # binomial std ~ sqrt(mean); 6 sigma bounds keep this deterministic test far from flaky
    sigma = mean**0.5
    assert min(counts.values()) > mean - 6 * sigma
    assert max(counts.values()) < mean + 6 * sigma
    chi2 = sum((counts[b] - mean) ** 2 / mean for b in range(buckets))
    assert chi2 < 400  # df = 255; the 99.99th percentile is ~ 350


def test_stable_known_values():
    # Pinned: the shard of a write must not change between processes or releases.
    assert write_hash("t", Cell(b"r", b"c")) == 16602272816751205391
    assert shard_for("t", Cell(b"r", b"c"), 256) == 15
    assert shard_for("table", Cell(b"row", b"row"), 256) == 144
    assert shard_for("t", Cell(b"r", b"c"), 7) == 3


def test_stable_across_processes():
    code = (
        "from airflow_atlas.sweep.queue.shards import write_hash;from airflow_atlas.kvs.api import Cell;"
        "print(write_hash('t', Cell(b'r', b'c')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "123"},
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))).stdout
    assert int(out) == write_hash("t", Cell(b"r", b"c"))


def test_uniform_over_sequential_rows():
    n = 256 * N_PER_SHARD
    _assert_roughly_uniform([shard_for("tbl", Cell(b"row%d" % i, b"c"), 256) for i in range(n)])


def test_row_equal_to_column_is_not_special():
    n = 256 * N_PER_SHARD
    shards = [shard_for("tbl", Cell(b"%d" % i, b"%d" % i), 256) for i in range(n)]
    assert collections.Counter(shards)[0] < 2 * N_PER_SHARD
    _assert_roughly_uniform(shards)


def test_uniform_over_fixed_long_rows_and_small_shard_counts():
    rows = [i.to_bytes(8, "big") for i in range(20_000)]
    for shards in (2, 3, 16, 100):
        counts = collections.Counter(shard_for("t", Cell(r, b"v"), shards) for r in rows)
        assert len(counts) == shards
        mean = len(rows) / shards
        assert max(abs(c - mean) for c in counts.values()) < 6 * mean**0.5


def test_length_prefix_separates_components():
    assert write_hash("t", Cell(b"ab", b"c")) != write_hash("t", Cell(b"a", b"bc"))
    assert write_hash("ta", Cell(b"b", b"c")) != write_hash("t", Cell(b"ab", b"c"))


def test_table_matters():
    cells = [Cell(b"r%d" % i, b"c") for i in range(200)]
    a = [shard_for("a", c, 256) for c in cells]
    b = [shard_for("b", c, 256) for c in cells]
    assert a != b


@pytest.mark.parametrize("n", [0, 257, -1, 1.0, True])
def test_num_shards_validated(n):
    with pytest.raises(InvalidInputError):
        shard_for("t", Cell(b"r", b"c"), n)


def test_single_shard():
    assert {shard_for("t", Cell(b"r%d" % i, b"c"), 1) for i in range(100)} == {0}
