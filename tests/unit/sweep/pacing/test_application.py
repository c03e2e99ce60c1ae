"""ApplicationPaceController (sweep/pacing/application.py): the ceiling's decisions from given histograms of the
application's transactions, entries and times (pure: no store, no clock, no sleep)."""
from __future__ import annotations

from collections.abc import Sequence

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.sweep.pacing.adaptive import MIN_ENTRIES_PER_SECOND, PROFILE_RISE_PER_RUN
from airflow_atlas.sweep.pacing.application import (
    DECREASE_FACTOR,
    IDLE_SECONDS,
    LEARNING_ENTRIES_PER_SECOND,
    LEARNING_MAX_SECONDS,
    MIN_TRANSACTIONS,
    NEAR_GROWTH_FACTOR,
    OVER_SETTLES,
    QUIET_GROWTH_FACTOR,
    SETTLE_SECONDS,
    ApplicationPace,
    ApplicationPaceController,
    baseline_of,
    merge_application,
    quiet_stretches,
)
from airflow_atlas.transactions.histogram import LatencyHistogram

MS = 0.001
QUIET_P99 = 10 * MS
"""The application's latency without sweep in these tests (its p99 is its bucket's bound, 10.8 ms: "11 ms")."""
OWN = 20_000.0
"""The own-latency controller's pace in these tests: far above every ceiling they set."""


def hist(n: int, seconds: float) -> LatencyHistogram:
    """``n`` transactions of ``seconds`` each."""
    out = LatencyHistogram()
    for _ in range(n):
        out.record(seconds)
    return out


QUIET = hist(MIN_TRANSACTIONS, QUIET_P99)
BASE = QUIET.quantile(0.99)
TARGET = BASE * 1.5
SLOW = 50 * MS
"""Far over the target."""
NEAR = 14 * MS
"""Under the target (its bucket's bound 15.2 ms <= 16.2 ms) but more than half-way there (13.5 ms)."""
FAST = 11 * MS
"""Within half the headroom (bound 12.8 ms)."""


class Drive:
    """Feeds a controller: each :meth:`feed` ``seconds`` later, with ``entries`` swept at ``rate`` entries/s."""

    def __init__(self, *, quiet: Sequence[LatencyHistogram] | None = (QUIET,), stored: ApplicationPace | None = None,
                 target: float = 1.5, recent: LatencyHistogram | None = None) -> None:
        self.now = 0.0
        self.c = ApplicationPaceController(target, now=self.now, quiet=quiet, stored=stored, recent=recent)

    def feed(self, n: int, seconds: float = FAST, *, rate: float = 4_000.0, after: float = 0.25) -> float | None:
        self.now += after
        return self.c.feed(hist(n, seconds) if n else LatencyHistogram(), int(rate * after), self.now)

    def settle(self, rate: float = 4_000.0) -> None:
        """Lets the settle time pass with an empty feed (not long enough to be idle), sweeping at ``rate``."""
        self.feed(0, rate=rate, after=SETTLE_SECONDS)


def test_no_decision_below_100_transactions_the_feeds_are_pooled():
    d = Drive(stored=ApplicationPace(end_entries_per_second=1_000.0))  # steering: a growth is a decision
    for _ in range(9):
        d.feed(10, FAST)  # 90 transactions within the target pooled: no decision
    assert d.c.ceiling == 1_000.0 and d.c.reason.startswith("starting at"), d.c.reason
    d.feed(10, FAST)  # the 100th decides
    assert d.c.ceiling > 1_000.0 and "100 transactions" in d.c.reason, d.c.reason


def test_over_the_target_is_decided_once_two_transactions_are_over_it_before_the_pool_fills():
    assert OVER_SETTLES == 2  # the nearest-rank p99 of 100 is the second slowest
    d = Drive()
    assert d.feed(40, FAST) is None
    assert d.feed(1, SLOW) is None  # one slow transaction: the p99 of 100 may yet be within the target
    assert d.c.backoffs == 0 and d.c.state == "free"
    assert d.feed(1, SLOW) is not None  # two: the p99 of any 100 that include them is over the target
    assert d.c.backoffs == 1 and d.c.state == "steering"
    assert "42 transactions" in d.c.reason, d.c.reason


def test_over_the_target_halves_the_rate_reached_not_the_nominal_pace():
    d = Drive()
    ceiling = d.feed(MIN_TRANSACTIONS, SLOW, rate=3_000.0, after=1.0)
    assert ceiling == pytest.approx(3_000.0 * DECREASE_FACTOR)
    assert d.c.pace(OWN) == ceiling  # the nominal own pace (20,000) does not matter
    assert d.c.reason.startswith("backed off to 1,500 entries/s (half the 3,000 reached)"), d.c.reason
    assert "application p99 51 ms > target 16 ms (baseline 11 ms x 1.5, 100 transactions)" in d.c.reason, d.c.reason
    # A ceiling the sweeper does not reach (the own controller held it at 400): halved from 400, not 1,500.
    d.settle(rate=400.0)
    d.feed(MIN_TRANSACTIONS, SLOW, rate=400.0, after=1.0)
    assert d.c.ceiling == pytest.approx(400 * DECREASE_FACTOR)


def test_the_rate_reached_is_at_most_the_highest_pace_of_the_pool():
    d = Drive()
    d.c.pace(1_000.0)  # the pacer's wait for the last iteration comes after the feed: entries / seconds overshoot
    d.feed(MIN_TRANSACTIONS, SLOW, rate=27_800.0, after=0.04)
    assert d.c.ceiling == pytest.approx(1_000.0 * DECREASE_FACTOR)


def test_a_back_off_never_goes_below_the_minimum_pace():
    d = Drive()
    d.feed(MIN_TRANSACTIONS, SLOW, rate=0.0, after=1.0)
    assert d.c.ceiling == MIN_ENTRIES_PER_SECOND


def test_the_feeds_after_a_back_off_are_dropped_for_the_settle_time():
    d = Drive()
    d.feed(MIN_TRANSACTIONS, SLOW, rate=2_000.0, after=1.0)
    first = d.c.ceiling
    d.feed(MIN_TRANSACTIONS, SLOW, after=SETTLE_SECONDS / 2)  # published before the back-off took effect
    assert d.c.ceiling == first and d.c.backoffs == 1
    d.feed(MIN_TRANSACTIONS, SLOW, rate=first, after=SETTLE_SECONDS)
    assert d.c.backoffs == 2 and d.c.ceiling == pytest.approx(first * DECREASE_FACTOR, rel=0.05)


def test_under_the_target_the_ceiling_grows_fast_when_quiet_and_creeps_near_the_target():
    d = Drive(stored=ApplicationPace(end_entries_per_second=1_000.0))
    d.feed(MIN_TRANSACTIONS, FAST, rate=1_000.0, after=1.0)
    assert d.c.ceiling == pytest.approx(1_000 * QUIET_GROWTH_FACTOR)
    assert d.c.reason.startswith("growing to 1,500 entries/s"), d.c.reason
    d.feed(MIN_TRANSACTIONS, NEAR, rate=1_500.0, after=1.0)
    assert d.c.ceiling == pytest.approx(1_500 * NEAR_GROWTH_FACTOR)
    assert d.c.backoffs == 0


def test_a_ceiling_the_sweeper_does_not_reach_is_not_raised_past_twice_what_it_reached():
    d = Drive(stored=ApplicationPace(end_entries_per_second=1_000.0))
    d.feed(MIN_TRANSACTIONS, FAST, rate=300.0, after=1.0)  # the sweeper reached 300 (own speed)
    assert d.c.ceiling == 1_000.0  # not lowered either


def test_under_the_target_a_free_run_stays_free():
    d = Drive()
    assert d.feed(MIN_TRANSACTIONS, FAST) is None
    assert d.c.state == "free" and d.c.reason.startswith("free: application p99"), d.c.reason


def test_an_idle_application_runs_free_up_to_the_own_latency_pace():
    d = Drive()
    d.feed(MIN_TRANSACTIONS, SLOW, rate=2_000.0, after=1.0)
    assert d.c.pace(OWN) == pytest.approx(1_000.0)
    d.feed(0, after=IDLE_SECONDS / 2)
    assert d.c.ceiling is not None  # one empty publication is no idle application
    d.feed(0, after=IDLE_SECONDS / 2)
    assert d.c.ceiling is None and d.c.state == "free" and "no application transaction" in d.c.reason
    assert d.c.pace(OWN) == OWN  # the own-latency controller alone decides
    # ... and a free controller with traffic that comes back pools it again: a slow pool backs off.
    d.feed(MIN_TRANSACTIONS, SLOW, rate=8_000.0, after=1.0)
    assert d.c.ceiling == pytest.approx(4_000.0)


def test_the_pace_is_the_lower_of_the_two_controllers_and_the_reason_names_the_governing_one():
    d = Drive(stored=ApplicationPace(end_entries_per_second=2_000.0))
    assert d.c.pace(5_000.0) == 2_000.0 and d.c.governs(5_000.0)
    assert d.c.reason_with(5_000.0, "increasing: delete p50 10 ms <= target 16 ms").startswith(
        "application: starting at the previous run's end pace, 2,000 entries/s [own latency: 5,000 entries/s")
    assert d.c.pace(1_200.0) == 1_200.0 and not d.c.governs(1_200.0)  # the own controller backed off below it
    assert d.c.reason_with(1_200.0, "backed off: delete p90 38 ms > target 25 ms").startswith("backed off: delete")
    assert d.c.last_pace == 1_200.0


def test_a_run_starts_at_the_pace_the_previous_run_ended_with():
    d = Drive(stored=ApplicationPace(end_entries_per_second=750.0))
    assert d.c.state == "steering" and d.c.pace(OWN) == 750.0
    assert Drive(stored=ApplicationPace()).c.pace(OWN) == OWN  # none stored: free
    d.feed(MIN_TRANSACTIONS, SLOW, rate=700.0, after=1.0)
    # the last pace(); the baseline its quiet windows gave (kept: a run without enough quiet transactions uses it)
    assert d.c.kept() == ApplicationPace(baseline_p99_seconds=QUIET.quantile(0.99), end_entries_per_second=750.0)
    d.c.pace(OWN)
    assert d.c.kept().end_entries_per_second == pytest.approx(350.0)


def test_a_run_after_an_idle_application_starts_free_not_at_the_previous_end_pace():
    """No transaction in the seconds before the run: the application is idle, the run starts free (a run that
    started at the previous run's end pace swept an idle store at 500 entries/s until its first idle feed);
    traffic then, or not known, and the end pace holds; traffic later starts the decisions as usual."""
    stored = ApplicationPace(end_entries_per_second=500.0)
    idle = Drive(stored=stored, recent=LatencyHistogram())
    assert idle.c.state == "free" and idle.c.pace(OWN) == OWN
    assert "no application transaction in the 2 s before the run" in idle.c.reason
    assert Drive(stored=stored, recent=hist(3, FAST)).c.pace(OWN) == 500.0  # busy just before: the end pace
    assert Drive(stored=stored, recent=None).c.pace(OWN) == 500.0  # not known: the end pace
    idle.feed(MIN_TRANSACTIONS, SLOW, rate=8_000.0, after=1.0)  # the application comes back, slowed
    assert idle.c.state == "steering" and idle.c.pace(OWN) == 4_000.0  # half the 8,000 reached


def test_the_baseline_is_the_quiet_windows_p99_else_the_stored_one():
    assert baseline_of(None) is None
    assert baseline_of([hist(MIN_TRANSACTIONS - 1, QUIET_P99)]) is None  # too few to mean a p99
    assert baseline_of([hist(MIN_TRANSACTIONS // 2, QUIET_P99)] * 2) == BASE  # summaries pool into a stretch
    assert baseline_of([QUIET]) == BASE
    stored = ApplicationPace(baseline_p99_seconds=0.020)
    assert Drive(quiet=[QUIET], stored=stored).c.baseline == BASE
    assert Drive(quiet=[hist(10, QUIET_P99)], stored=stored).c.baseline == 0.020
    assert Drive(quiet=None, stored=stored).c.baseline == 0.020


def test_quiet_summaries_pool_into_stretches_of_a_decisions_size_in_the_order_they_ended():
    tens = [hist(10, QUIET_P99) for _ in range(25)]
    assert [s.count for s in quiet_stretches(tens)] == [MIN_TRANSACTIONS, MIN_TRANSACTIONS + 50]  # the rest joins
    assert quiet_stretches(tens[:9]) == []
    assert [s.count for s in quiet_stretches([hist(250, QUIET_P99), hist(3, SLOW)])] == [253]


def test_a_minute_of_overload_without_sweep_does_not_become_the_baseline():
    """The quiet windows of a focused benchmark run (2026-11-30): the capacity probe's saturated minute, then the
    application at its own rate. Pooled, the probe's seconds were the p99 (5.5 s: the controller never backed off
    from the 30-47 ms of the application without sweep); the median of the stretches' p99s is the application's."""
    overload = [hist(50, 6.0) for _ in range(8)]  # 400 transactions, 4 stretches of seconds
    quiet = [hist(10, QUIET_P99) for _ in range(80)]  # 800 transactions, 8 stretches of the application's own
    pooled = LatencyHistogram.pooled(overload + quiet)
    assert pooled.quantile(0.99) > 5.0  # what the pooled p99 was
    assert baseline_of(overload + quiet) == BASE
    assert baseline_of(quiet + overload) == BASE  # wherever the overload was
    assert baseline_of(overload + quiet[:40]) == BASE  # the lower middle of 4 slow and 4 fast stretches
    assert baseline_of(overload + quiet[:30]) > 5.0  # overload most of the quiet time: that is the application's


def test_without_a_baseline_a_busy_application_is_learned_at_the_minimum_pace():
    d = Drive(quiet=None)
    assert d.feed(0) is None and d.c.state == "free"  # no traffic: nothing to learn, free
    assert d.feed(20, SLOW) == LEARNING_ENTRIES_PER_SECOND and d.c.state == "learning"
    d.feed(60, SLOW, after=SETTLE_SECONDS / 2)  # published before the pace fell: dropped
    d.feed(60, QUIET_P99, after=SETTLE_SECONDS / 2)
    assert d.c.baseline is None
    d.feed(40, QUIET_P99)
    assert d.c.baseline == BASE and d.c.state == "free" and d.c.ceiling is None
    assert d.c.reason.startswith("free: learned the application's baseline p99 11 ms (100 transactions"), d.c.reason
    d.c.pace(OWN)
    assert d.c.kept() == ApplicationPace(baseline_p99_seconds=BASE, end_entries_per_second=OWN)
    # From now on it steers on it.
    d.feed(MIN_TRANSACTIONS, SLOW, rate=2_000.0, after=1.0)
    assert d.c.ceiling == pytest.approx(1_000.0)


def test_learning_gives_up_on_a_sparse_application_and_leaves_the_run_to_the_own_controller():
    d = Drive(quiet=None)
    d.feed(5, FAST)
    assert d.c.state == "learning"
    d.c.pace(OWN)
    assert d.c.kept().end_entries_per_second is None  # the learning pace is no steering result
    elapsed = 0.0
    while d.c.state == "learning":
        d.feed(5, FAST, after=1.0)
        elapsed += 1.0
        assert elapsed <= LEARNING_MAX_SECONDS + SETTLE_SECONDS + 1
    assert d.c.ceiling is None and d.c.baseline is None and "no baseline" in d.c.reason
    for _ in range(5):
        d.feed(MIN_TRANSACTIONS, SLOW, after=1.0)  # with sweep: never taken for the baseline
    assert d.c.ceiling is None and d.c.baseline is None and d.c.backoffs == 0


def test_learning_starts_again_when_traffic_comes_back_after_an_idle_gap():
    d = Drive(quiet=None)
    d.feed(5, FAST)
    assert d.c.state == "learning"
    d.feed(0, after=IDLE_SECONDS)
    assert d.c.state == "free" and d.c.ceiling is None
    assert d.feed(5, FAST) == LEARNING_ENTRIES_PER_SECOND and d.c.state == "learning"


def test_the_stored_application_pace_is_a_moving_minimum_and_the_last_end_pace():
    old = ApplicationPace(baseline_p99_seconds=0.010, end_entries_per_second=500.0)
    assert merge_application(old, ApplicationPace()) == old
    assert merge_application(old, ApplicationPace(0.008, 900.0)) == ApplicationPace(0.008, 900.0)
    risen = merge_application(old, ApplicationPace(0.050, None))  # learned under load: rises a tenth at most
    assert risen == ApplicationPace(pytest.approx(0.010 * (1 + PROFILE_RISE_PER_RUN)), 500.0)
    assert merge_application(ApplicationPace(), ApplicationPace(0.02, 10.0)) == ApplicationPace(0.02, 10.0)


@pytest.mark.parametrize("target", [1.0, 0.5, -1, float("nan"), 101])
def test_a_bad_target_is_refused(target):
    with pytest.raises(InvalidInputError, match="latency_target"):
        ApplicationPaceController(target, now=0.0)


def test_a_bad_entry_count_is_refused():
    with pytest.raises(InvalidInputError, match="entries"):
        ApplicationPaceController(1.5, now=0.0).feed(LatencyHistogram(), -1, 1.0)
