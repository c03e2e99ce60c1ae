"""RunPace (sweep/pacing/run_pace.py): when the pacer and the two controllers are asked, on a fake clock whose
sleeps advance it (pure: no store, no wait)."""
from __future__ import annotations

import pytest

from airflow_atlas.sweep.pacing.adaptive import START_ENTRIES_PER_SECOND, batch_cap_at
from airflow_atlas.sweep.pacing.application import MIN_TRANSACTIONS, ApplicationPace
from airflow_atlas.sweep.pacing.intensity import paced_batch_cap
from airflow_atlas.sweep.pacing.run_pace import RunPace
from airflow_atlas.sweep.results import ShardSweepResult
from airflow_atlas.transactions.histogram import LatencyHistogram

from .test_application import MS, hist
from .test_intensity import FakeTime as Clock


class Profiles:
    """The store's pace profiles as RunPace uses them: nothing stored; what a run merges is kept."""

    def __init__(self) -> None:
        self.merged: list[tuple] = []

    def load(self) -> dict:
        return {}

    def load_application(self) -> ApplicationPace:
        return ApplicationPace()

    def merge(self, learned, application=None) -> None:
        self.merged.append((learned, application))


class Source:
    """The application's latency: a quiet baseline of 10 ms; ``next`` is what the next read returns."""

    def __init__(self) -> None:
        self.next = LatencyHistogram()
        self.reads = 0

    def since_last_call(self) -> LatencyHistogram:
        self.reads += 1
        out, self.next = self.next, LatencyHistogram()
        return out

    def quiet(self) -> list[LatencyHistogram]:
        return [hist(MIN_TRANSACTIONS, 10 * MS)]

    def recent(self) -> LatencyHistogram:
        return hist(5, 10 * MS)

    def pressure(self):
        return None


def pace(clock: Clock, *, rate: int = 0, target: float = 0.0, dry_run: bool = False, source: Source | None = None,
         profiles: Profiles | None = None) -> RunPace:
    return RunPace(max_entries_per_second=rate, latency_target=target, dry_run=dry_run, max_wait_seconds=40.0,
                   profiles=profiles or Profiles(), application=None if source is None else (lambda: source),
                   clock=clock.clock, sleep=clock.sleep)


def test_a_fixed_rate_sizes_each_batch_by_the_pacer_and_pays_chunks_then_the_rest():
    clock = Clock()
    run = pace(clock, rate=250)
    assert run.adaptive is None and run.paced
    assert run.start_iteration(1_000, None) == paced_batch_cap(250, 1_000) == 250  # a second of the pace
    run.pay_chunk(100, clock.sleep)  # the first chunk's share, paid before the second chunk
    run.pay_chunk(100, clock.sleep)
    assert sum(clock.slept) == pytest.approx(200 / 250)
    run.end_iteration(250, clock.sleep)  # the rest of the iteration: 50 entries
    assert abs(sum(clock.slept) - 1.0) < 1e-9
    summary = ShardSweepResult(shard=0, strategy="THOROUGH", status="caught_up")
    run.finish(summary, 250)
    assert summary.pace_entries_per_second == 250.0 and summary.pace_reason.startswith("fixed rate")
    assert abs(summary.seconds_paced - 1.0) < 1e-6


def test_unlimited_and_dry_runs_are_not_paced_and_keep_the_callers_batch_limit():
    clock = Clock()
    for run in (pace(clock), pace(clock, rate=250, target=1.5, dry_run=True)):
        assert run.adaptive is None and not run.paced
        assert run.start_iteration(1_000, None) is None and run.start_iteration(1_000, 7) == 7
        run.end_iteration(10_000, clock.sleep)
    assert clock.slept == []


def test_the_own_latency_pace_sizes_batches_and_merges_its_profile():
    clock = Clock()
    profiles = Profiles()
    run = pace(clock, target=1.5, profiles=profiles)
    assert run.adaptive is not None and run.current() == START_ENTRIES_PER_SECOND
    assert run.start_iteration(100_000, None) == batch_cap_at(START_ENTRIES_PER_SECOND, 100_000)
    summary = ShardSweepResult(shard=0, strategy="THOROUGH", status="caught_up")
    run.finish(summary, 0)
    assert summary.pace_entries_per_second == START_ENTRIES_PER_SECOND
    assert len(profiles.merged) == 1 and profiles.merged[0][1] is None


def test_the_application_pace_backs_off_between_chunks_and_the_rest_of_the_batch_pays_the_new_pace():
    """Fed between chunks: a slow application halves the pace before the batch's next chunk, not after the
    iteration (a second's batch would otherwise delay the back-off by up to that second)."""
    clock = Clock()
    source = Source()
    run = pace(clock, target=1.5, source=source)
    start = run.pacer.max_entries_per_second
    cap = run.start_iteration(100_000, None)
    share = cap / 8
    run.pay_chunk(share, clock.sleep)
    assert run.pacer.max_entries_per_second == start  # an empty read: nothing decided
    source.next = hist(5, 500 * MS)  # the application slowed: far over 1.5 x its 10 ms
    reads = source.reads
    run.pay_chunk(share, clock.sleep)
    assert source.reads == reads + 1
    backed_off = run.pacer.max_entries_per_second
    assert backed_off < start, "the application pace did not back off between chunks"
    assert run.current() == backed_off
    before = sum(clock.slept)
    run.pay_chunk(share, clock.sleep)  # the next chunk's wait is at the new pace
    assert abs(sum(clock.slept) - before - share / backed_off) < 1e-9
    run.end_iteration(cap, clock.sleep)  # the iteration's rest: what the chunks did not pay
    assert run.pacer.max_entries_per_second <= backed_off
    summary = ShardSweepResult(shard=0, strategy="THOROUGH", status="caught_up")
    run.finish(summary, 0)
    assert summary.pace_backoffs >= 1 and "application" in summary.pace_reason


def test_an_idle_application_changes_nothing_between_chunks():
    clock = Clock()
    source = Source()
    run = pace(clock, target=1.5, source=source)
    start = run.pacer.max_entries_per_second
    cap = run.start_iteration(100_000, None)
    for _ in range(8):
        run.pay_chunk(cap / 8, clock.sleep)
    assert run.pacer.max_entries_per_second == start
    assert source.reads == 8
