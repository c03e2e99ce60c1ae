"""The fixed-bucket latency histogram (airflow_atlas/transactions/histogram.py): quantiles, pooling, encoding."""
from __future__ import annotations

import math
import random

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.transactions.histogram import BOUNDS, LatencyHistogram


def test_quantile_is_the_upper_bound_of_the_bucket_within_a_fifth_of_the_true_value() -> None:
    rng = random.Random(7)
    samples = [rng.lognormvariate(math.log(0.005), 0.8) for _ in range(5000)]
    h = LatencyHistogram()
    for s in samples:
        h.record(s)
    true_p99 = sorted(samples)[math.ceil(0.99 * len(samples)) - 1]
    assert true_p99 <= h.quantile(0.99) <= true_p99 * 2 ** 0.25 * 1.0001
    assert h.count == 5000
    assert h.mean() == pytest.approx(sum(samples) / len(samples))


def test_pooled_histograms_give_the_quantile_of_all_their_samples() -> None:
    fast, slow = LatencyHistogram(), LatencyHistogram()
    for _ in range(99):
        fast.record(0.001)
    slow.record(2.0)
    slow.record(2.0)
    pooled = LatencyHistogram.pooled([fast, slow])
    assert pooled.count == 101
    assert pooled.quantile(0.99) >= 2.0  # rank 100 of 101 lies in the slow bucket
    assert pooled.quantile(0.5) < 0.0012
    assert fast.count == 99  # the inputs are not changed


def test_overflow_and_edges() -> None:
    h = LatencyHistogram()
    h.record(BOUNDS[-1] * 10)
    assert h.quantile(1.0) == math.inf
    h2 = LatencyHistogram()
    h2.record(0.0)
    assert h2.quantile(0.5) == BOUNDS[0]
    with pytest.raises(InvalidInputError, match="non-negative"):
        h.record(-1)
    with pytest.raises(InvalidInputError, match="empty"):
        LatencyHistogram().quantile(0.99)
    with pytest.raises(InvalidInputError, match=r"\(0, 1\]"):
        h.quantile(0)


def test_encoding_round_trips_and_refuses_garbage() -> None:
    h = LatencyHistogram()
    for s in (0.0002, 0.003, 0.003, 0.5):
        h.record(s)
    raw = h.to_bytes()
    assert len(raw) < 100
    assert LatencyHistogram.from_bytes(raw) == h
    for bad in (b"", b"{}", b'{"v": 2, "c": {}, "s": 0}', b'{"v": 1, "c": {"999": 1}, "s": 0}', b"\xff"):
        with pytest.raises(InvalidInputError, match="not a latency histogram"):
            LatencyHistogram.from_bytes(bad)


def test_count_over_agrees_with_the_quantiles_buckets() -> None:
    h = LatencyHistogram()
    for seconds in (0.001, 0.002, 0.010, 0.050, 200.0):  # the last in the overflow bucket
        h.record(seconds)
    assert h.count_over(0.0) == 5
    assert h.count_over(0.010) == 3  # 10 ms is in a bucket whose bound exceeds 10 ms: counted
    assert h.count_over(h.quantile(0.6)) == 2  # nothing in the quantile's own bucket is over its bound
    assert h.count_over(1_000.0) == 1
    assert LatencyHistogram().count_over(0.0) == 0
