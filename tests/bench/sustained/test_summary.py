"""bench/sustained/summary.py: percentiles, the lag summary, the backlog's troughs and the boundedness judgement,
the highest bounded rate (no store, no Airflow: the benchmark itself is run by ``python -m bench.run --only
sustained``, never by the test suite)."""
from __future__ import annotations

import pytest

from bench.sustained import summary as S


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))  # 1..100
    assert S.percentile(values, 50) == 50 and S.percentile(values, 99) == 99 and S.percentile(values, 100) == 100
    assert S.percentile([7.0], 99) == 7.0 and S.percentile([], 50) is None
    assert S.percentile([3, 1, 2], 0) == 1
    with pytest.raises(ValueError):
        S.percentile(values, 101)


def test_lag_summary_leaves_unknown_samples_out():
    s = S.lag_summary([10.0, None, 30.0, 20.0])
    assert s == {"samples": 4, "unknown": 1, "p50": 20.0, "p99": 30.0, "max": 30.0}
    assert S.lag_summary([])["p99"] is None


def sawtooth(rate: float, seconds: float, interval: float = 60.0, step: float = 5.0, carried: float = 1.0):
    """(t, backlog) samples: ``rate`` entries/s arrive; at each interval the sweep removes ``carried`` of
    what is queued."""
    out, backlog, t = [], 0.0, 0.0
    while t < seconds:
        out.append((t, int(backlog)))
        t += step
        backlog += rate * step
        if t % interval == 0:
            backlog -= carried * backlog
    return out


def test_troughs_are_the_minimum_per_interval():
    samples = [(0, 5), (30, 2), (60, 9), (90, 4), (120, 8), (125, 1)]
    # the last window (120..180) is not half full at t=125: left out
    assert S.troughs(samples, 60) == [(0, 2), (60, 4)]
    assert S.troughs([], 60) == []


def test_a_sweep_that_carries_the_rate_keeps_the_backlog_bounded():
    verdict = S.judge_bounded(sawtooth(100, 600), 60.0, 100.0)
    assert verdict["bounded"] is True
    assert abs(verdict["trough_growth_per_second"]) <= 1.0


def test_a_sweep_that_does_not_carry_the_rate_is_unbounded():
    samples = [(t, int(40 * t)) for t in range(0, 600, 5)]  # never swept: the troughs grow at the ingest rate
    verdict = S.judge_bounded(samples, 60.0, 40.0)
    assert verdict["bounded"] is False and verdict["trough_growth_per_second"] == pytest.approx(40.0, rel=0.05)


def test_a_slowly_growing_small_backlog_is_still_bounded():
    # troughs grow a little but stay under one interval of ingest
    samples = [(t, int(t / 10)) for t in range(0, 600, 5)]
    assert S.judge_bounded(samples, 60.0, 100.0)["bounded"] is True


def test_too_few_samples_cannot_be_judged():
    assert S.judge_bounded([(0, 500), (5, 600)], 60.0, 10.0)["bounded"] is None
    assert S.judge_bounded([(0, 0), (5, 0)], 60.0, 10.0)["bounded"] is True  # nothing queued at all


def step(rate: float, bounded: bool | None, p99: float = 70.0) -> dict:
    return {"achieved_entries_per_second": rate, "backlog": {"bounded": bounded},
            "lag_seconds": {"p50": 40.0, "p99": p99, "max": p99 + 5}}


def test_the_highest_bounded_rate_stops_at_the_first_unbounded_step():
    steps = [step(50, True), step(100, None), step(300, True), step(600, False), step(1200, True)]
    assert S.highest_bounded(steps)["achieved_entries_per_second"] == 300
    assert S.highest_bounded([step(50, False)]) is None
    assert S.highest_bounded([]) is None


def test_the_worst_lag_is_over_every_step_bounded_or_not():
    steps = [step(150, True, p99=88.0), step(300, True, p99=106.0), step(449, False, p99=162.0)]
    assert S.worst_lag(steps)["achieved_entries_per_second"] == 449
    assert S.worst_lag([step(50, True, p99=90.0), step(100, True, p99=70.0)])["achieved_entries_per_second"] == 50
    assert S.worst_lag([{**step(50, True), "lag_seconds": {"p50": None, "p99": None, "max": None}}]) is None
    assert S.worst_lag([]) is None


def test_the_rates_stop_at_an_unbounded_step_or_a_saturated_workload():
    assert S.stop_reason([]) is None
    assert S.stop_reason([step(50, True), step(300, True)]) is None
    assert S.stop_reason([step(50, True), step(300, False)]) == "unbounded"
    limited = {**step(280, True), "workload_limited": True}
    assert S.stop_reason([step(275, True), limited]) == "workload_saturated"  # no faster than the step before
    assert S.stop_reason([limited]) is None  # nothing to compare with
    assert S.stop_reason([step(100, True), limited]) is None  # short of its target, but still faster
    assert S.stop_reason([step(275, True), {**step(280, False), "workload_limited": True}]) == "unbounded"
