"""bench/foreground_impact/summary.py: the variants of each phase, the pooled p99s with their intervals and the goals,
from given measurements (pure: no store, no sweep)."""
from __future__ import annotations

import pytest

from bench.foreground_impact import summary as S

from .measured import LIMITS, RATES, windows


def test_each_phase_measures_its_variants_and_the_default_in_every_one():
    assert S.default_variant() == S.DEFAULT == "default"
    assert S.variants("steady", (2_000,)) == [S.NO_SWEEP, S.UNTHROTTLED, 2_000, S.DEFAULT]
    assert S.variants("burst", LIMITS) == [S.NO_SWEEP, S.UNTHROTTLED, 1_000, 250, S.DEFAULT]
    assert S.variants("arrival", LIMITS) == [S.NO_SWEEP, S.UNTHROTTLED, S.DEFAULT]  # a fixed rate has no arrival
    assert S.variants("idle", LIMITS) == S.variants("idle_again", LIMITS) == [S.UNTHROTTLED, S.DEFAULT]

def test_pooled_p99_ratios_have_a_confidence_interval_and_each_phase_its_own_baselines():
    phases = S.summarise(windows(), LIMITS, RATES)
    default = phases["steady"]["variants"]["default"]
    assert default["foreground_transactions"] == 2_100 and default["p99_ms"] == 48.0
    assert default["p99_vs_no_sweep"] == 48 / 40
    lo, hi = default["p99_ratio_ci"]
    assert lo <= 48 / 40 <= hi and hi < 1.5
    assert phases["burst"]["variants"]["1000"]["p99_vs_no_sweep"] == 160 / 80
    assert default["sweep_entries_per_second"] == 600.0 and default["share_of_unthrottled"] == 600 / 15_000
    arrival = phases["arrival"]["variants"]
    assert set(arrival) == {"no_sweep", "unthrottled", "default"} and arrival["default"]["p99_vs_no_sweep"] == 56 / 40
    assert arrival["default"]["share_of_unthrottled"] == 2_000 / 15_000  # against the arrival's own unthrottled
    idle = phases["idle"]["variants"]
    assert set(idle) == {"unthrottled", "default"} and idle["default"]["p99_ms"] is None
    assert "p99_vs_no_sweep" not in idle["default"] and idle["default"]["share_of_unthrottled"] == 18_000 / 20_000

def test_fewer_than_1000_transactions_give_no_p99_but_say_too_few_samples():
    phases = S.summarise(windows(reps=1, per_window=900), LIMITS, RATES)
    row = phases["steady"]["variants"]["default"]
    assert row["p99_ms"] is None and row["p99_vs_no_sweep"] is None and row["p99_ratio_ci"] is None
    assert row["p99_note"] == "too few samples (900 < 1,000)"
    assert row["p50_ms"] == 24.0  # a median needs no thousand
    goals = {g["name"]: g for g in S.evaluate_goals(phases, LIMITS)}
    steady = goals["steady: application p99 / no sweep (default)"]
    assert steady["met"] is None and steady["note"] == "too few samples (900 < 1,000)"

def test_the_interval_is_wide_when_the_tail_is_a_few_transactions_and_narrow_when_it_is_many():
    base = sorted([10.0] * 1_900 + [20.0] * 100)  # 5% slow: its p99 firmly 20
    few = sorted([10.0] * 1_985 + [30.0] * 15)  # p99 lands on the edge of the slow 0.75%
    many = sorted([10.0] * 1_900 + [30.0] * 100)  # 5% slow: p99 firmly 30
    lo_few, hi_few = S.p99_ratio_ci(few, base)
    lo_many, hi_many = S.p99_ratio_ci(many, base)
    assert lo_few <= 0.5 + 1e-9 and hi_few >= 1.5  # from 10/20 to 30/20: the data cannot tell
    assert (lo_many, hi_many) == (1.5, 1.5)
    assert S.p99_ratio_ci(many, base) == (lo_many, hi_many)  # seeded: the same data, the same interval
    with pytest.raises(ValueError):
        S.p99_ratio_ci([], base)

def test_the_goals_are_judged_at_the_default_in_every_phase():
    phases = S.summarise(windows(), LIMITS, RATES)
    goals = {g["name"]: g for g in S.evaluate_goals(phases, LIMITS, placement="confined")}
    assert len(goals) == 2 + 3 * 2 + 1 and all(g["binding"] for g in goals.values())
    assert goals["steady: application p99 / no sweep (default, confined)"]["met"] is True  # 1.2x
    assert goals["steady: upper 90% bound of that ratio (default, confined)"]["met"] is True
    assert goals["burst: application p99 / no sweep (default, confined)"]["met"] is True  # 1.2x
    arrival = goals["arrival: application p99 / no sweep (default, confined)"]
    assert arrival["value"] == 56 / 40 and arrival["met"] is False  # 1.4x: the arrival came late to the pace
    assert goals["idle: sweep rate / unthrottled (default, confined)"]["met"] is True  # 0.9
    assert goals["idle_again: sweep rate / unthrottled (default, confined)"]["met"] is False  # 0.6
    best = next(g for k, g in goals.items() if k.startswith("steady: sweep rate"))
    assert "250/s, swept 250/s" in best["name"] and best["value"] == 600 / 250 and best["met"] is True

def test_with_no_fixed_limit_gentle_enough_the_rate_goal_says_so():
    runs = [r for r in windows() if r["variant"] != 250]  # 1,000/s costs 1.5x: no fixed limit meets the p99 goal
    goals = S.evaluate_goals(S.summarise(runs, LIMITS, RATES), LIMITS)
    rate = goals[-1]
    assert rate["name"].startswith("steady: sweep rate") and rate["met"] is None
    assert rate["note"] == "no fixed limit kept p99 within the goal"
