"""AdaptiveController (sweep/pacing/adaptive.py): the pace's decisions from given latencies and times (pure: no store,
no clock, no sleep)."""
from __future__ import annotations

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.sweep.pacing.adaptive import (
    ADDITIVE_INCREASE,
    MAX_WINDOW_SECONDS,
    MIN_ENTRIES_PER_SECOND,
    P99_MIN_SAMPLES,
    PROFILE_RISE_PER_RUN,
    QUIET_INCREASE_FACTOR,
    SLOW_START_QUIET_FACTOR,
    START_ENTRIES_PER_SECOND,
    WINDOW_SECONDS,
    AdaptiveController,
    between_buckets,
    merge_profiles,
    pace_bucket,
    percentile,
    window_statistic,
)

MS = 0.001


def flat(read: float = 1 * MS, delete: float = 20 * MS) -> dict:
    """A pace profile of a store whose quiet latency is the same at every pace (a sweep too light to load it):
    any rise of the latency is load."""
    return {"read": dict.fromkeys(range(16), read), "delete": dict.fromkeys(range(16), delete)}


FLAT = flat()
"""The default profile of :class:`Run`."""


class Run:
    """Drives a controller through windows: each window iterations of ``entries`` in all, with two read samples
    and one delete sample (MIN_WINDOW_SAMPLES). ``profile``: the store's pace profile the run starts from
    (default :func:`flat`; None: no earlier run)."""

    def __init__(self, target: float = 1.5, max_rate: int = 0, profile: dict | None = FLAT) -> None:
        self.now = 0.0
        self.c = AdaptiveController(target, max_entries_per_second=max_rate, now=self.now, profile=profile)

    def window(self, read: float = 1 * MS, delete: float | None = 20 * MS, entries: int | None = None,
               seconds: float = WINDOW_SECONDS) -> float:
        """One window of one iteration; ``entries`` default: what the pace allows in the window."""
        if entries is None:
            entries = int(self.c.rate * seconds)
        self.c.observe("read", read)
        self.c.observe("read", read)
        if delete is not None:
            self.c.observe("delete", delete)
        self.now += seconds
        return self.c.end_iteration(entries, self.now)


def test_it_starts_slowly_and_grows_4x_while_latency_stays_at_the_baseline():
    r = Run(profile=None)
    assert r.c.rate == START_ENTRIES_PER_SECOND and r.c.reason.startswith("starting at 1,000 entries/s")
    rates = [r.window() for _ in range(4)]
    assert rates == [1000 * SLOW_START_QUIET_FACTOR ** n for n in (1, 2, 3, 4)] == [4000, 16000, 64000, 256000]
    assert r.c.reason.startswith("increasing: ") and "<= target" in r.c.reason
    # The baselines of the pace buckets it swept at (1,000 / 4,000 / 16,000 / 64,000 entries/s).
    buckets = [pace_bucket(rate) for rate in (1000, 4000, 16000, 64000)]
    assert buckets == [4, 6, 8, 10]
    assert r.c.profile() == {"read": dict.fromkeys(buckets, 1 * MS), "delete": dict.fromkeys(buckets, 20 * MS)}


def test_in_the_slow_start_a_latency_within_target_but_past_half_the_headroom_only_doubles():
    r = Run()  # baseline 20 ms, target 30 ms: quiet up to 25 ms
    assert [r.window(delete=26 * MS) for _ in range(3)] == [2000, 4000, 8000]
    assert r.c.backoffs == 0 and r.c.reason.startswith("increasing: delete p50 26 ms <= target ")
    assert r.window(delete=20 * MS) == 8000 * SLOW_START_QUIET_FACTOR  # smoothed 23 ms: quiet again


def test_latency_above_the_target_halves_the_pace_and_names_the_request_and_the_numbers():
    r = Run()
    for _ in range(2):
        r.window()
    assert r.c.rate == 16000
    r.window(delete=38 * MS)  # baseline 20 ms, target 1.5x = 30 ms; smoothed: (20 + 38) / 2 = 29 ms: not quiet
    assert r.c.rate == 32000 and r.c.backoffs == 0
    r.window(delete=41 * MS)  # smoothed (29 + 41) / 2 = 35 ms
    assert r.c.rate == 16000 and r.c.backoffs == 1
    assert r.c.reason == "backed off: delete p50 35 ms > target 30 ms"  # baseline 20 ms (2%/s)
    r.window(read=9 * MS, delete=15 * MS)  # read baseline 1.05 ms: target max(1.5x, + 2 ms headroom)
    assert r.c.rate == 8000 and r.c.reason == "backed off: read p50 5.0 ms > target 3.0 ms"


def test_after_a_back_off_the_pace_grows_additively_near_the_target_and_by_a_factor_when_quiet():
    r = Run()
    r.window()
    r.window(delete=100 * MS)
    assert r.c.backoffs == 1
    steps = []
    for delete in (27, 27, 27, 27, 20, 20, 20, 20):  # near the target (baseline ~22 ms, target ~33 ms), then quiet
        before = r.c.rate
        after = r.window(delete=delete * MS)
        steps.append((before, after, r.c.reason))
    grown = [(a, b, why) for a, b, why in steps if b > a]
    additive = [b - a for a, b, why in grown if "quiet" not in why]
    factors = [b / a for a, b, why in grown if "quiet" in why]
    assert additive and set(additive) == {ADDITIVE_INCREASE}, steps
    assert len(factors) >= 4 and set(factors) == {QUIET_INCREASE_FACTOR}, steps
    assert r.c.reason.startswith("increasing: delete p50 ") and r.c.reason.endswith(" (quiet: x1.25)")


def test_after_a_back_off_a_quiet_store_gives_the_speed_back_within_a_few_seconds():
    """The load of a busy phase stops: from a pace halved twice, the quiet increase regains it in under 4 s,
    the smoothed latency's way down included (the additive increase alone: 24 windows, 6 s, after that)."""
    r = Run()
    for _ in range(2):
        r.window()
    assert r.c.rate == 16000
    r.window(delete=200 * MS)
    r.window(delete=200 * MS)
    assert r.c.rate == 4000 and r.c.backoffs == 2
    windows = 0
    while r.c.rate < 16000:
        r.window()
        windows += 1
    assert windows * WINDOW_SECONDS <= 4.0 < (16000 - 4000) / ADDITIVE_INCREASE * WINDOW_SECONDS, windows


def test_jitter_within_the_headroom_is_not_load():
    r = Run()
    r.window(read=0.2 * MS)
    r.window(read=1.5 * MS)  # 7x the baseline, but only 1.3 ms more: below the 2 ms headroom
    assert r.c.backoffs == 0 and r.c.rate == 16000


def test_one_very_slow_request_is_a_strong_signal():
    r = Run()
    r.window()
    for _ in range(5):
        r.c.observe("read", 1 * MS)
    r.c.observe("read", 1.2)  # a timed-out request the driver retried: alone in a window of six
    r.now += WINDOW_SECONDS
    assert r.c.end_iteration(100, r.now) == 2000
    assert r.c.reason == "backed off: read took 1200 ms (>= 1 s)"


def test_the_pace_never_falls_below_the_minimum():
    r = Run()
    r.window()
    for _ in range(20):
        r.window(delete=500 * MS)
    assert r.c.rate == MIN_ENTRIES_PER_SECOND and r.c.backoffs == 20


def test_the_max_setting_is_the_upper_bound():
    r = Run(max_rate=6000)
    assert [r.window() for _ in range(3)] == [4000, 6000, 6000]
    assert r.c.reason.startswith("at max (6,000 entries/s): ")
    small = Run(max_rate=200)
    assert small.c.rate == 200


def test_the_pace_stays_near_what_the_sweeper_reaches():
    """A store that keeps up but a sweeper that reaches only 5,000/s: the pace is not raised without bound..."""
    r = Run()
    rates = [r.window(entries=int(min(r.c.rate, 5000) * WINDOW_SECONDS)) for _ in range(8)]
    assert rates[:2] == [4000, 16000] and rates[2:] == [16_000] * 6
    assert r.c.reason.startswith("at the sweeper's own speed (~5,000 entries/s): ")


def test_a_sweeper_slower_than_its_pace_does_not_lower_the_pace():
    """... nor lowered: a sweeper held to 300/s by its per-iteration work on a saturated machine keeps its
    pace (and so its batch size), where setting the pace to twice what it reached shrank the batches and with
    them the rate it reached, window after window."""
    r = Run()
    r.window()
    assert r.c.rate == 4000
    rates = [r.window(entries=int(300 * WINDOW_SECONDS)) for _ in range(6)]
    assert rates == [4000] * 6 and r.c.batch_cap(10_000) == 1000


def _strong_back_off(r: Run) -> None:
    """One request of over a second: backs off at once, even from a window of one sample (ends the slow start)."""
    r.c.observe("read", 1.2)
    r.now += WINDOW_SECONDS
    r.c.end_iteration(100, r.now)
    assert r.c.backoffs == 1 and r.c.reason == "backed off: read took 1200 ms (>= 1 s)"


def test_after_the_slow_start_decisions_wait_for_a_full_window():
    r = Run()
    _strong_back_off(r)
    assert r.c.rate == START_ENTRIES_PER_SECOND / 2
    assert r.window(seconds=0.1) == 500
    assert r.window(seconds=0.1) == 500
    assert r.window(seconds=0.1) == 500 * QUIET_INCREASE_FACTOR  # latency at the baseline: quiet


def test_the_slow_start_grows_after_every_iteration_within_target():
    """An iteration is a quarter second of the pace with one progress read: no waiting for three samples."""
    r = Run()
    for expected in (4000, 16000, 64000):
        r.c.observe("read", 1 * MS)
        r.now += WINDOW_SECONDS
        assert r.c.end_iteration(int(r.c.rate * WINDOW_SECONDS), r.now) == expected
    assert r.c.reason.startswith("increasing: read p50 1.0 ms <= target ")


def test_in_the_slow_start_a_sample_over_target_holds_the_pace_until_a_full_window_decides():
    r = Run()
    r.c.observe("read", 1 * MS)
    r.now += WINDOW_SECONDS
    assert r.c.end_iteration(250, r.now) == 4000
    r.c.observe("read", 9 * MS)  # smoothed 5 ms > target 3 ms: hold, but one sample is no evidence for a back-off
    r.now += WINDOW_SECONDS
    assert r.c.end_iteration(1000, r.now) == 4000 and r.c.backoffs == 0
    assert r.c.reason.startswith("holding 4,000 entries/s: read p50 5.0 ms > target ")
    assert r.c.reason.endswith(" (a full window decides)")
    r.c.observe("read", 9 * MS)
    r.now += WINDOW_SECONDS
    assert r.c.end_iteration(1000, r.now) == 4000 and r.c.backoffs == 0
    r.c.observe("read", 9 * MS)  # the third sample: a full window, over target
    r.now += WINDOW_SECONDS
    assert r.c.end_iteration(1000, r.now) == 2000 and r.c.backoffs == 1
    assert r.c.reason.startswith("backed off: read p50 5.0 ms > target ")  # smoothed with the 1 ms before


def test_in_the_slow_start_a_held_window_grows_again_when_its_samples_come_back_within_target():
    r = Run()
    r.c.observe("read", 1 * MS)
    r.now += WINDOW_SECONDS
    r.c.end_iteration(250, r.now)
    r.c.observe("read", 9 * MS)
    r.now += WINDOW_SECONDS
    assert r.c.end_iteration(1000, r.now) == 4000
    r.c.observe("read", 1 * MS)  # the window's median (nearest rank of 1 and 9 ms) is 1 ms again: quiet
    r.now += WINDOW_SECONDS
    assert r.c.end_iteration(1000, r.now) == 16000 and r.c.backoffs == 0


def test_a_window_without_samples_holds_the_pace():
    r = Run()
    r.now += MAX_WINDOW_SECONDS
    assert r.c.end_iteration(0, r.now) == START_ENTRIES_PER_SECOND
    assert r.c.reason.startswith("holding 1,000 entries/s")


def test_delete_samples_are_chunk_times_at_every_pace():
    """A chunk of deletes has one size at every pace (sweep/pacing/intensity.py DELETE_CHUNK_REQUESTS): the samples
    taken at 8,000 entries/s compare with the baseline taken at 1,000 (no back-off at the same latency)."""
    r = Run()
    for _ in range(3):
        for _ in range(4):
            r.c.observe_delete(20 * MS)
        r.c.observe("read", 1 * MS)
        r.now += WINDOW_SECONDS
        r.c.end_iteration(int(r.c.rate * WINDOW_SECONDS), r.now)
    assert r.c.rate == 64000 and r.c.backoffs == 0 and set(r.c.profile()["delete"].values()) == {20 * MS}


def test_the_batch_is_a_quarter_second_of_the_pace_from_2000_a_second_at_most_the_batch_limit():
    r = Run()
    assert r.c.batch_cap(10_000) == 500  # at the 1,000/s start: PACED_BATCH_MIN_ENTRIES (sweep/pacing/intensity.py)
    for _ in range(2):
        r.window()
    assert r.c.batch_cap(10_000) == 4000 and r.c.batch_cap(100) == 100


def test_after_the_slow_start_a_window_needs_a_few_samples_unless_it_is_long():
    r = Run()
    _strong_back_off(r)
    r.c.observe("read", 1 * MS)
    r.now += WINDOW_SECONDS
    assert r.c.end_iteration(125, r.now) == 500  # one sample: not yet
    r.now += MAX_WINDOW_SECONDS
    assert r.c.end_iteration(500, r.now) == 500 * QUIET_INCREASE_FACTOR  # a long window decides on what it has


def test_one_slow_sample_among_a_few_is_noise_but_most_of_them_slow_is_load():
    r = Run()
    r.window()
    for slow in (1, 2):
        r.c.observe("read", 1 * MS)
        r.c.observe("read", 1 * MS)
        r.c.observe("read", 1 * MS)
        for _ in range(slow * 2):
            r.c.observe("read", 50 * MS)
        r.now += WINDOW_SECONDS
        r.c.end_iteration(100, r.now)
    assert r.c.backoffs == 1 and r.c.reason == "backed off: read p50 26 ms > target 3.0 ms"


def test_the_statistic_is_the_median_of_a_few_samples_the_p90_of_many_and_the_p99_of_a_hundred():
    assert window_statistic([3.0]) == ("p50", 3.0)
    assert window_statistic([5.0, 1.0, 2.0]) == ("p50", 2.0)
    assert window_statistic([float(i) for i in range(1, 21)]) == ("p90", 18.0)
    assert window_statistic([float(i) for i in range(1, P99_MIN_SAMPLES)]) == ("p90", 90.0)  # 99: p99 = the slowest
    assert window_statistic([float(i) for i in range(1, P99_MIN_SAMPLES + 1)]) == ("p99", 99.0)  # not the slowest


def test_the_reason_names_the_p99_when_the_window_held_enough_samples():
    r = Run()
    r.window(delete=20 * MS)
    for i in range(P99_MIN_SAMPLES):
        r.c.observe_delete((20 if i < 90 else 80) * MS)  # the slowest tenth: p90 20 ms, p99 80 ms
    r.now += WINDOW_SECONDS
    r.c.end_iteration(500, r.now)
    assert r.c.backoffs == 1 and r.c.reason == "backed off: delete p99 50 ms > target 30 ms"  # smoothed (20 + 80) / 2
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.0


@pytest.mark.parametrize("target", [1.0, 0.5, 0, 101, True, "2"])
def test_a_target_that_is_not_a_ratio_above_one_is_refused(target):
    with pytest.raises(InvalidInputError, match="latency_target"):
        AdaptiveController(target, now=0.0)


def test_a_lasting_slower_store_becomes_the_baseline_and_the_pace_recovers():
    """Other work on the machine keeps the store 3x slower than the run's quietest moment: the pace backs
    off, then the baseline drifts up (BASELINE_DRIFT_PER_SECOND) and, within about a minute, the pace grows
    again."""
    r = Run(profile=flat(read=1 * MS, delete=10 * MS))
    r.window(read=1 * MS, delete=10 * MS)
    rates = [r.window(read=3 * MS, delete=30 * MS) for _ in range(int(70 / WINDOW_SECONDS))]
    assert min(rates) < rates[0] and rates[-1] > min(rates) and r.c.reason.startswith("increasing: ")
    assert min(rates[: int(10 / WINDOW_SECONDS)]) == MIN_ENTRIES_PER_SECOND  # not within the first 10 s


def test_a_load_that_raises_the_latency_by_1_7x_backs_off_within_two_seconds():
    """The step the real-node test met (read p50 6.4 ms against 3.7 ms): seen against the baseline of before
    the load, not absorbed by the baseline's drift (5% per window did: the pace held for 11 s of load)."""
    r = Run(max_rate=300, profile=None)
    for _ in range(16):  # 4 s at the baseline (at the bound: 300 entries/s)
        r.window(read=3.7 * MS, delete=10 * MS)
    assert r.c.rate == 300 and r.c.backoffs == 0
    for _ in range(int(2 / WINDOW_SECONDS)):
        r.window(read=6.4 * MS, delete=17 * MS)
        if r.c.backoffs:
            break
    assert r.c.backoffs == 1 and r.c.rate == 150, r.c.reason


def test_the_smoothed_latency_falling_after_a_load_backs_nothing_off():
    """A spike's tail in the smoothed latency: the windows after it are at the baseline, so the pace grows
    (the smoothed statistic alone stayed over the target for three more windows: three more halvings)."""
    r = Run()
    for _ in range(2):
        r.window()
    r.window(delete=200 * MS)
    r.window(delete=200 * MS)
    assert r.c.rate == 4000 and r.c.backoffs == 2
    rates = [r.window() for _ in range(4)]
    assert r.c.backoffs == 2 and rates == sorted(rates) and rates[-1] > 4000, rates


# ----- the baseline per pace bucket and the store's pace profile --------------------------------------------
def self_loaded(rate: float, load: float = 1.0) -> tuple[float, float]:
    """(read, delete) latency of a store the sweep itself slows down: 1 ms / 20 ms up to 1,000 entries/s, then
    with the square root of the pace (at 16,000 entries/s a delete chunk takes 4x), times ``load`` (an
    application)."""
    factor = max(1.0, rate / 1000) ** 0.5 * load
    return 1 * MS * factor, 20 * MS * factor


def drive(r: Run, seconds: float, load: float = 1.0) -> list[float]:
    rates = []
    for _ in range(int(seconds / WINDOW_SECONDS)):
        read, delete = self_loaded(r.c.rate, load)
        rates.append(r.window(read=read, delete=delete))
    return rates


def test_pace_buckets_double():
    assert [pace_bucket(r) for r in (0, 50, 99, 100, 999, 1000, 1600, 16_000, 1e9)] == [0, 0, 0, 1, 4, 4, 5, 8, 24]


def test_the_sweeps_own_load_is_not_load_the_pace_reaches_the_max_on_an_idle_store():
    """Each new pace's latency is its own baseline: a sweep whose requests slow the store as it speeds up
    (and nothing else does) is not held back by them. (Against the latency at 1,000 entries/s, as until
    2026-11-27, it backed off at 2,000: the idle phases of foreground_impact swept at 0.15 of unthrottled.)"""
    r = Run(max_rate=64_000, profile=None)
    rates = drive(r, 5)
    assert r.c.backoffs == 0 and rates[-1] == 64_000, (rates, r.c.reason)


def test_a_load_at_the_same_pace_backs_off():
    r = Run(max_rate=16_000, profile=None)
    drive(r, 3)
    assert r.c.rate == 16_000 and r.c.backoffs == 0
    drive(r, 1, load=1.7)  # the same paces, 1.7x slower: an application
    assert r.c.backoffs >= 1 and r.c.rate < 16_000 and r.c.reason.startswith("backed off: "), r.c.reason


def test_a_run_that_starts_under_load_compares_with_the_profile_of_earlier_runs():
    """A run that begins while an application is busy cannot tell its own load from the application's; the
    store's profile, learned by an earlier run on the quiet store, can."""
    quiet = Run(max_rate=16_000, profile=None)
    drive(quiet, 3)
    learned = quiet.c.profile()
    assert sorted(learned["delete"]) == [4, 6, 8]  # 1,000 / 4,000 / 16,000 entries/s: x4 on a quiet store
    informed = Run(max_rate=16_000, profile=merge_profiles({}, learned))
    rates = drive(informed, 2, load=1.7)
    assert informed.c.backoffs >= 1 and max(rates) < 16_000, rates
    blind = Run(max_rate=16_000, profile=None)  # without a profile the load is the baseline
    assert drive(blind, 2, load=1.7)[-1] == 16_000 and blind.c.backoffs == 0


def test_the_stored_profile_is_a_moving_minimum_that_rises_by_at_most_a_tenth_per_run():
    stored = {"delete": {4: 20 * MS, 5: 30 * MS}, "read": {4: 1 * MS}}
    learned = {"delete": {4: 15 * MS, 5: 90 * MS, 6: 50 * MS}}
    merged = merge_profiles(stored, learned)
    assert merged == {"delete": {4: 15 * MS, 5: pytest.approx(30 * MS * (1 + PROFILE_RISE_PER_RUN)), 6: 50 * MS},
                      "read": {4: 1 * MS}}
    assert stored == {"delete": {4: 20 * MS, 5: 30 * MS}, "read": {4: 1 * MS}}  # not changed in place


def test_a_short_burst_is_filed_under_the_pace_not_under_its_momentary_rate():
    """The pacer waits after an iteration, so a fast iteration's entries / elapsed can far exceed the pace:
    the baseline it measures belongs to the pace's bucket."""
    r = Run(max_rate=300, profile=None)
    r.c.observe("read", 1 * MS)
    r.now += 0.003
    r.c.end_iteration(8, r.now)  # 8 entries in 3 ms: 2,667 entries/s for a moment, at a pace of 300
    assert set(r.c.profile()["read"]) == {pace_bucket(300)}, r.c.profile()


def test_a_bucket_the_slow_start_jumped_over_takes_the_geometric_mean_of_its_known_neighbours():
    """The x4 slow start skips every other bucket; a back-off into a skipped one must not take the load's
    latency as that pace's baseline (test_a_load_at_the_same_pace_backs_off fails without it)."""
    known = {4: 10 * MS, 6: 40 * MS, 8: 90 * MS}
    assert between_buckets(known, 5) == pytest.approx(20 * MS)
    assert between_buckets(known, 7) == pytest.approx(60 * MS)
    assert between_buckets(known, 3) is None and between_buckets(known, 9) is None  # beyond: its own window's
    assert between_buckets({}, 5) is None
