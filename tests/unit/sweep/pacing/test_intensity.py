"""SweepPacer and the chunks of a batch (sweep/pacing/intensity.py): the pacing arithmetic, on an injected clock
and sleep (no sleeping)."""
from __future__ import annotations

import itertools

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.sweep.pacing.intensity import (
    DELETE_CHUNK_REQUESTS,
    PACED_BATCH_MAX_SECONDS,
    PACED_BATCH_MIN_ENTRIES,
    PACING_INTERVAL_SECONDS,
    SPREAD_CHUNKS,
    SweepPacer,
    chunk_step,
    delete_chunks,
    paced_batch_cap,
)


class FakeTime:
    """A monotonic clock that only the test (and the recorded sleeps) move."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def pacer(rate, t, max_wait=30.0):
    return SweepPacer(rate, max_wait_seconds=max_wait, clock=t.clock, sleep=t.sleep)


def test_unlimited_never_waits_and_keeps_the_batch_limit():
    t = FakeTime()
    p = pacer(0, t)
    assert p.unlimited
    assert [p.pace(n) for n in (10_000, 50_000, 0)] == [0.0, 0.0, 0.0]
    assert t.slept == [] and p.seconds_paced == 0.0 and p.waits == []
    assert p.batch_cap(10_000) == 10_000


def test_instant_iterations_are_paced_to_the_rate():
    t = FakeTime()
    p = pacer(1000, t)
    waits = [p.pace(500) for _ in range(4)]
    assert waits == [0.5, 0.5, 0.5, 0.5]
    assert t.slept == waits and p.waits == waits and p.seconds_paced == 2.0
    # 2,000 entries took 2 s: exactly the rate.
    assert 2000 / (t.now - 100.0) == 1000


def test_time_spent_working_counts_and_a_slow_iteration_earns_no_burst():
    t = FakeTime()
    p = pacer(1000, t)
    t.now += 0.3  # the iteration itself took 0.3 s for 500 entries (cost 0.5 s)
    assert p.pace(500) == pytest.approx(0.2)
    t.now += 2.0  # a slow iteration: 500 entries in 2 s, far under the rate
    assert p.pace(500) == 0.0
    # ... and the next fast one is paced again at once: no credit was saved up.
    assert p.pace(500) == pytest.approx(0.5)
    assert p.seconds_paced == pytest.approx(0.7)


def test_one_wait_is_bounded_and_the_rest_of_the_debt_is_carried():
    t = FakeTime()
    p = pacer(100, t, max_wait=2.0)
    assert p.pace(500) == 2.0  # owes 5 s, waits at most 2 s
    assert p.pace(0) == 2.0
    assert p.pace(0) == pytest.approx(1.0)
    assert p.pace(0) == 0.0
    assert p.seconds_paced == pytest.approx(5.0) and max(t.slept) == 2.0


def test_batch_cap_keeps_one_batch_within_the_pacing_interval_and_one_wait():
    t = FakeTime()
    # From 2,000 entries/s (PACED_BATCH_MIN_ENTRIES / the interval) up: a quarter second of the pace.
    assert pacer(8_000, t, max_wait=2.0).batch_cap(10_000) == int(8_000 * PACING_INTERVAL_SECONDS)
    assert pacer(2_000, t, max_wait=2.0).batch_cap(10_000) == PACED_BATCH_MIN_ENTRIES
    assert SweepPacer(100, max_wait_seconds=0.5, interval_seconds=5.0).batch_cap(10_000) == 50  # never above one wait
    assert SweepPacer(8_000, max_wait_seconds=40.0, interval_seconds=1.0).batch_cap(10_000) == 8_000
    assert pacer(1_000_000, t, max_wait=40.0).batch_cap(10_000) == 10_000
    assert pacer(1, t, max_wait=0.5).batch_cap(10_000) == 1  # never 0


@pytest.mark.parametrize(("rate", "entries"), [
    (100, 100),     # PACED_BATCH_MAX_SECONDS (1 s) of the pace: the application pace is fed between iterations
    (250, 250),     # one iteration a second, not four
    (500, 500),
    (1_000, 500),   # PACED_BATCH_MIN_ENTRIES: half a second
    (2_000, 500),   # from here a quarter second
    (16_000, 4_000),
])
def test_below_2000_entries_a_second_a_paced_batch_is_500_entries_or_a_second_of_the_pace(rate, entries):
    """Every iteration costs the store fixed Paxos work (progress read and check-and-set, the tombstone record's
    fresh timestamp): a quarter second's batch at 250/s was 4 of them a second (bench/ANALYSIS.md, "pacing")."""
    assert PACED_BATCH_MIN_ENTRIES == 500 and PACED_BATCH_MAX_SECONDS == 1.0
    assert paced_batch_cap(rate, 100_000) == entries
    assert pacer(rate, FakeTime(), max_wait=20.0).batch_cap(100_000) == entries
    assert paced_batch_cap(rate, 100) == min(entries, 100)  # batch_limit still bounds it


def test_a_paced_batch_cap_refuses_bad_arguments():
    with pytest.raises(InvalidInputError, match="rate"):
        paced_batch_cap(-1, 10)
    with pytest.raises(InvalidInputError, match="batch_limit"):
        paced_batch_cap(10, 0)


def test_wait_for_is_the_bookkeeping_without_sleeping():
    t = FakeTime()
    p = pacer(10, t)
    assert p.wait_for(5) == 0.5
    assert t.slept == [] and p.seconds_paced == 0.0


@pytest.mark.parametrize("rate", [-1, 1.5, True, "10", None])
def test_bad_rates_are_refused(rate):
    with pytest.raises(InvalidInputError, match="max_entries_per_second"):
        SweepPacer(rate, max_wait_seconds=1.0)


@pytest.mark.parametrize("wait", [0, -1, float("nan"), float("inf"), True])
def test_bad_max_waits_and_intervals_are_refused(wait):
    with pytest.raises(InvalidInputError, match="max_wait_seconds"):
        SweepPacer(10, max_wait_seconds=wait)
    with pytest.raises(InvalidInputError, match="interval_seconds"):
        SweepPacer(10, max_wait_seconds=1.0, interval_seconds=wait)


def test_bad_entry_counts_are_refused():
    p = pacer(10, FakeTime())
    with pytest.raises(InvalidInputError, match="entries"):
        p.pace(-1)


@pytest.mark.parametrize("entries", [float("nan"), float("inf"), "3", True])
def test_entry_counts_that_are_not_finite_numbers_are_refused(entries):
    with pytest.raises(InvalidInputError, match="entries"):
        pacer(10, FakeTime()).pace(entries)


# ----- the schedule of one batch's deletes (delete_chunks, chunk_step): pure ---------------------------------

def chunks_of(sizes, step):
    return list(delete_chunks(sizes, lambda: step))


def test_delete_chunks_come_in_order_and_never_span_two_groups():
    assert chunks_of([130, 0, 64, 5], 64) == [
        (0, 0, 64), (0, 64, 128), (0, 128, 130), (2, 0, 64), (3, 0, 5),
    ]
    assert chunks_of([], 64) == [] and chunks_of([0, 0], 64) == []
    assert chunks_of([DELETE_CHUNK_REQUESTS + 1], 500) == [(0, 0, DELETE_CHUNK_REQUESTS),
                                                          (0, DELETE_CHUNK_REQUESTS, DELETE_CHUNK_REQUESTS + 1)]
    with pytest.raises(InvalidInputError, match="chunk step"):
        chunks_of([100], 0)
    with pytest.raises(InvalidInputError, match="group size"):
        chunks_of([-1], 64)


def test_each_chunk_after_the_first_is_as_long_as_the_step_says_when_it_is_cut():
    """The step is asked once per chunk, after the wait before it: a pace that drops between two chunks cuts
    the rest of the batch in the new pace's chunks."""
    steps = iter([250, 250, 64, 64, 64])
    assert [stop - start for _, start, stop in delete_chunks([700], lambda: next(steps))] == [64, 250, 250, 64, 64, 8]


def test_a_large_batch_goes_in_a_first_chunk_of_64_and_then_eighths_of_the_batch():
    """A chunk waits for its slowest request: 64-request chunks throughout would cap the sweeper at 64
    requests per round trip."""
    assert chunk_step(2000, 0, 10_000) == 250  # unthrottled: an eighth of the batch
    sizes = [stop - start for _, start, stop in chunks_of([2000], chunk_step(2000, 0, 10_000))]
    assert sizes == [64] + [250] * 7 + [186] and len(sizes) <= SPREAD_CHUNKS + 1
    assert chunk_step(250, 1000, 10_000) == DELETE_CHUNK_REQUESTS  # 1,000/s: 64 a chunk


def test_a_batch_read_unthrottled_goes_in_the_chunks_of_the_pace_it_is_sent_at():
    """A 10,000-entry batch read while the application rested, sent once it runs at the safe 250 entries/s:
    chunks of 64 (an eighth of a 250-entry batch, at least 64), not 1,250."""
    assert chunk_step(10_000, 0, 10_000) == 1250
    assert chunk_step(10_000, 250, 10_000) == DELETE_CHUNK_REQUESTS
    assert chunk_step(10_000, 8000, 10_000) == 250  # a quarter second of 8,000/s, in eighths
    with pytest.raises(InvalidInputError, match="batch_entries"):
        chunk_step(-1, 0, 10)


def _spread_batch(p: SweepPacer, t: FakeTime, requests: int, entries: int, work_per_chunk: float) -> list[float]:
    """What sweep_shard and batch_deletes do with one batch: a chunk's work, then before each next chunk the
    pacer is paid its predecessor's share (entries in proportion to its requests); after the batch, the rest.
    Returns the instants the chunks start."""
    chunks = chunks_of([requests], chunk_step(requests, p.max_entries_per_second, 10_000))
    starts, paid, previous = [], 0.0, 0
    for _, start, stop in chunks:
        if previous:
            p.pace(entries * previous / requests)
            paid += entries * previous / requests
        starts.append(t.now)
        t.now += work_per_chunk
        previous = stop - start
    p.pace(entries - paid)
    return starts


def test_a_batch_s_deletes_are_spread_evenly_over_its_cost_at_the_pace():
    """1,000 entries/s: a batch of 250 entries (a quarter second's worth) in chunks of 64 requests, one every
    64 ms (each taking 5 ms), not 250 at once; the batch costs what it cost unspread, and no wait is longer than
    the interval (so never longer than a third of the lease)."""
    t = FakeTime()
    p = pacer(1000, t, max_wait=10.0)
    starts = _spread_batch(p, t, 250, 250, 0.005)
    assert [round(b - a, 6) for a, b in itertools.pairwise(starts)] == [0.064, 0.064, 0.064]
    assert t.now - 100.0 == pytest.approx(0.25)  # the batch's cost at the pace: the average rate holds
    assert max(p.waits) <= PACING_INTERVAL_SECONDS
    # The next batch starts after this one is paid: chunks keep their spacing across batches.
    assert _spread_batch(p, t, 250, 250, 0.005)[0] - starts[-1] == pytest.approx(0.058)


def test_a_sweeper_slower_than_its_pace_is_never_held_by_the_spread():
    t = FakeTime()
    p = pacer(32_000, t)
    _spread_batch(p, t, 8000, 8000, 0.3)  # chunks of 0.3 s: far below 32,000 entries/s
    assert p.waits == []


def test_a_rate_set_to_unlimited_and_back_owes_nothing_for_the_time_it_ran_free():
    t = FakeTime()
    p = pacer(250, t)
    p.set_rate(0)
    assert p.unlimited and p.pace(10_000) == 0.0
    t.now += 5.0
    p.set_rate(250)
    assert p.pace(250) == pytest.approx(1.0)  # a second of the new pace, not the 40 s the free entries cost
