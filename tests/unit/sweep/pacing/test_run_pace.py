"""RunPace (sweep/pacing/run_pace.py): which mode a run gets, and when the application pace is asked and the
pacer follows it, on fake clocks whose sleeps advance them (pure: no store, no wait)."""
from __future__ import annotations

import pytest

from airflow_atlas.sweep.pacing.application import (
    BASELINE_POOLS,
    MIN_TRANSACTIONS,
    SETTLE_INTERVALS,
    Observation,
    PaceState,
)
from airflow_atlas.sweep.pacing.intensity import DELETE_CHUNK_REQUESTS, paced_batch_cap
from airflow_atlas.sweep.pacing.run_pace import CARRY_INTERVALS, FIXED_REASON, FREE_POLL_SECONDS, PaceCarry, RunPace
from airflow_atlas.sweep.results import ShardSweepResult

from .test_application import hist
from .test_intensity import FakeTime


class Clocks(FakeTime):
    """One fake time for the pacer's monotonic clock and the wall clock of the publications."""

    def wall(self) -> float:
        return self.now


class Source:
    """The publications: ``next`` is what the next poll returns (then nothing new); ``fail`` raises instead."""

    def __init__(self, first: Observation) -> None:
        self.next = first
        self.polls = 0
        self.fail = False

    def poll(self) -> Observation:
        self.polls += 1
        if self.fail:
            raise OSError("the store is unreachable")
        out, self.next = self.next, Observation()
        return out


def run_pace(t: Clocks, *, rate: int = 250, target: float = 1.2, dry_run: bool = False,
             source: Source | None = None, carry: PaceCarry | None = None) -> RunPace:
    return RunPace(max_entries_per_second=rate, latency_target=target, dry_run=dry_run, max_wait_seconds=20.0,
                   source=None if source is None else (lambda: source), interval_seconds=1.0, carry=carry,
                   clock=t.clock, wall=t.wall, sleep=t.sleep)


def test_a_rate_of_0_and_a_dry_run_are_unpaced():
    t = Clocks()
    for pace in (run_pace(t, rate=0, source=Source(Observation())), run_pace(t, dry_run=True)):
        assert not pace.paced and pace.application is None
        assert pace.start_iteration(10_000, None) is None and pace.start_iteration(10_000, 77) == 77
        assert pace.current() is None
        pace.end_iteration(10_000, t.sleep)
    assert t.slept == []


def test_a_target_of_0_is_a_fixed_rate_for_the_whole_run():
    t = Clocks()
    pace = run_pace(t, target=0.0, source=Source(Observation()))
    assert pace.paced and pace.application is None
    assert pace.start_iteration(10_000, None) == paced_batch_cap(250, 10_000)
    pace.end_iteration(250, t.sleep)
    assert t.slept == [pytest.approx(1.0)]
    summary = ShardSweepResult(shard=0, strategy="THOROUGH", status="caught_up")
    pace.finish(summary)
    assert summary.pace_entries_per_second == 250.0 and summary.pace_reason == FIXED_REASON


def test_a_resting_application_lets_the_run_sweep_unthrottled_in_eighths_of_its_batch():
    t = Clocks()
    source = Source(Observation(heard_at=t.now - 0.3))
    pace = run_pace(t, source=source)
    assert pace.application is not None and pace.application.state is PaceState.RESTING
    assert pace.start_iteration(10_000, None) == 10_000 and pace.current() == 0.0
    assert pace.step(10_000) == 1250
    pace.end_iteration(10_000, t.sleep)
    assert t.slept == []


def test_an_application_that_starts_mid_batch_slows_the_rest_of_it_at_once():
    t = Clocks()
    source = Source(Observation(heard_at=t.now - 0.3))
    pace = run_pace(t, source=source)
    pace.start_iteration(10_000, None)
    t.now += 0.05
    source.next = Observation(heard_at=t.now, busy_at=t.now, transactions=hist(1, 0.01))
    pace.pay_chunk(1250, t.sleep)  # not yet: polled less than FREE_POLL_SECONDS ago
    assert pace.current() == 0.0 and source.polls == 1
    t.now += FREE_POLL_SECONDS
    pace.pay_chunk(1250, t.sleep)
    assert source.polls == 2 and pace.current() == 250.0
    assert pace.step(10_000) == DELETE_CHUNK_REQUESTS  # the rest of the batch in the safe pace's chunks
    pace.pay_chunk(64, t.sleep)
    assert t.slept == [pytest.approx(64 / 250)]  # what ran free owes nothing; the new pace's chunks are paid


def test_while_running_the_publications_are_read_every_half_interval():
    t = Clocks()
    source = Source(Observation(heard_at=t.now, busy_at=t.now, transactions=hist(1, 0.01)))
    pace = run_pace(t, source=source)
    assert pace.current() == 250.0
    for _ in range(10):
        t.now += 0.12
        pace.start_iteration(10_000, None)
    assert source.polls == 1 + 2  # at 0.6 and 1.2 s


def test_a_source_that_fails_is_heard_as_silence_and_the_run_falls_back_to_the_safe_pace(caplog):
    t = Clocks()
    source = Source(Observation(heard_at=t.now))
    pace = run_pace(t, source=source)
    assert pace.current() == 0.0
    source.fail = True
    for _ in range(8):
        t.now += 0.5
        pace.start_iteration(10_000, None)
    assert pace.current() == 250.0 and pace.application is not None
    assert pace.application.state is PaceState.UNSEEN
    assert "could not read the application's publications" in caplog.text


def test_the_result_reports_the_pace_and_why():
    t = Clocks()
    pace = run_pace(t, source=Source(Observation(heard_at=t.now)))
    summary = ShardSweepResult(shard=0, strategy="THOROUGH", status="caught_up")
    pace.finish(summary)
    assert summary.pace_entries_per_second == 0.0 and summary.latency_target == 1.2
    assert summary.pace_reason == "resting: clients alive, no transaction published yet: unthrottled"


# ----- one run after another: the pace carried -------------------------------------------------------------
def raised(t: Clocks, source: Source, carry: PaceCarry) -> RunPace:
    """A run whose application pace measured its baseline and then raised the pace once (500 entries/s)."""
    pace = run_pace(t, source=source, carry=carry)
    assert pace.application is not None
    t.now += SETTLE_INTERVALS + 0.1
    for _ in range(BASELINE_POOLS + 1):
        source.next = Observation(heard_at=t.now, busy_at=t.now, transactions=hist(MIN_TRANSACTIONS, 0.01))
        t.now += 0.6
        pace.start_iteration(10_000, None)
    assert pace.current() == 500.0, pace.application.reason
    return pace


def test_the_next_run_of_the_process_takes_over_the_pace_the_previous_one_left():
    """A group's pairs swept one after another are paced as one run: the second starts at the raised pace with the
    baseline known, reads on where the first stopped, and reports only its own backoffs."""
    t, carry = Clocks(), PaceCarry()
    source = Source(Observation(heard_at=t.now, busy_at=t.now, transactions=hist(1, 0.01)))
    first = raised(t, source, carry)
    first.finish(ShardSweepResult(shard=0, strategy="THOROUGH", status="caught_up"))
    polls = source.polls
    t.now += 0.5
    second = run_pace(t, source=Source(Observation()), carry=carry)  # its own source is never made
    assert second.application is first.application and second.current() == 500.0
    assert second.application.baseline is not None
    assert source.polls == polls + 1  # the carried source, read on at the run's start
    summary = ShardSweepResult(shard=1, strategy="THOROUGH", status="caught_up")
    second.finish(summary)
    assert summary.pace_backoffs == 0 and summary.pace_entries_per_second == 500.0


def test_a_pace_left_too_long_ago_or_under_other_settings_is_not_taken():
    t, carry = Clocks(), PaceCarry()
    source = Source(Observation(heard_at=t.now, busy_at=t.now, transactions=hist(1, 0.01)))
    raised(t, source, carry).finish(ShardSweepResult(shard=0, strategy="THOROUGH", status="caught_up"))
    t.now += CARRY_INTERVALS * 1.0 + 0.1
    late = run_pace(t, source=Source(Observation(heard_at=t.now, busy_at=t.now)), carry=carry)
    assert late.current() == 250.0 and late.application is not None and late.application.baseline is None
    late.finish(ShardSweepResult(shard=1, strategy="THOROUGH", status="caught_up"))
    other = run_pace(t, target=1.5, source=Source(Observation(heard_at=t.now, busy_at=t.now)), carry=carry)
    assert other.application is not late.application


def test_two_runs_at_once_never_share_a_pace():
    t, carry = Clocks(), PaceCarry()
    source = Source(Observation(heard_at=t.now, busy_at=t.now, transactions=hist(1, 0.01)))
    raised(t, source, carry).finish(ShardSweepResult(shard=0, strategy="THOROUGH", status="caught_up"))
    one = run_pace(t, source=Source(Observation(heard_at=t.now, busy_at=t.now)), carry=carry)
    two = run_pace(t, source=Source(Observation(heard_at=t.now, busy_at=t.now)), carry=carry)
    assert one.current() == 500.0 and two.current() == 250.0
    assert one.application is not two.application
