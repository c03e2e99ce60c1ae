"""The application-latency pace (sweep/pacing/application.py) wired into the sweeper (sweep/targeted.py), on the
embedded store: a run fed "slow" histograms of the application's transactions ends slower than one fed "fast"
ones, keeps its end pace in the store's pace profile for the next run to start from, and without a source (or
with the setting at its default) is today's run.

The application here is a fake source (the publication of the real one is issue 31 item 1); the runs use
``latency_target`` 100 so that the own-latency controller (the same target) never backs off on a busy shared
machine: only the application's latency moves the pace. Directions only, no speeds."""
from __future__ import annotations

import dataclasses
import itertools
import time

import pytest

from airflow_atlas.sweep.pacing.application import MIN_TRANSACTIONS, ApplicationPace
from airflow_atlas.transactions.histogram import LatencyHistogram

from .helpers import CONFIG, THOR, Harness, open_store

QUIET_SECONDS = 0.010
"""The application's latency without sweep."""
TARGET = 100.0
"""``latency_target`` of the runs: the application may be 100x slower than without sweep (1.1 s)."""


def hist(n: int, seconds: float) -> LatencyHistogram:
    out = LatencyHistogram()
    for _ in range(n):
        out.record(seconds)
    return out


class FakeApplication:
    """A source of the application's latency: every call, ``MIN_TRANSACTIONS`` transactions of ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls = 0

    def since_last_call(self) -> LatencyHistogram:
        self.calls += 1
        return hist(MIN_TRANSACTIONS, self.seconds)

    def quiet(self) -> list[LatencyHistogram]:
        return [hist(MIN_TRANSACTIONS, QUIET_SECONDS)]

    def recent(self) -> LatencyHistogram:
        return hist(MIN_TRANSACTIONS, self.seconds)  # busy before the run too

    def pressure(self):
        return None  # not read: the embedded store has no nodes


class PressedNodes(FakeApplication):
    """A fast application on nodes that report a request stage queueing beyond its threads on every call."""

    def pressure(self):
        from airflow_atlas.kvs.pressure import NodePressure

        return [NodePressure.from_rows("127.0.0.9", [
            {"name": "MutationStage", "pending_tasks": 64, "active_tasks_limit": 16, "blocked_tasks": 0}])]


class Unreadable(FakeApplication):
    def since_last_call(self) -> LatencyHistogram:
        self.calls += 1
        raise ConnectionError("the latency table cannot be read")


@pytest.fixture
def new_store(tmp_path):
    made: list[Harness] = []

    def make(signal: str = "application") -> Harness:
        store, clock = open_store(f"sqlite:///{tmp_path / f'{len(made)}.db'}",
                                  dataclasses.replace(CONFIG, sweep_pace_signal=signal))
        h = Harness(store, clock, "sqlite")
        made.append(h)
        return h

    yield make
    for h in made:
        h.close_all()
        h.store.close()


def _sweep(h: Harness, source, transactions: int = 60, **kw):
    """A backlog of ``transactions`` x 25 entries in shard 0, swept by one run of at most 30 iterations of one
    transaction (at 500 entries/s, 20 a second: the run lasts beyond the settle time after a first back-off);
    returns the run and each iteration's pace."""
    t = h.table(THOR)
    cells = h.cells_in_shard(t, 0, 25)
    for i in range(transactions):
        h.write(t, {c: b"v%d" % i for c in cells})
    h.settle()
    paces: list[float] = []
    run = h.store.sweeper.sweep_shard(0, THOR, sweep_ts=h.sweep_timestamps()[THOR.value], max_iterations=30,
                                      batch_limit=25, latency_target=TARGET, application_latency=source,
                                      on_iteration=lambda it: paces.append(it.pace_entries_per_second), **kw)
    return run, paces


def test_a_sweep_fed_slow_application_latency_ends_slower_than_one_fed_fast(new_store):
    slow_app, fast_app = FakeApplication(5.0), FakeApplication(QUIET_SECONDS)  # 5 s: over 100 x 10.8 ms
    slow, slow_paces = _sweep(new_store(), slow_app)
    fast, fast_paces = _sweep(new_store(), fast_app)
    assert slow_app.calls > 0 and fast_app.calls > 0
    assert slow.pace_backoffs >= 2, slow  # halved at least twice (the settle time between the decisions)
    assert slow.pace_reason.startswith("application: backed off to"), slow.pace_reason
    assert "[application: free: application p99" in fast.pace_reason, fast.pace_reason
    assert slow.pace_entries_per_second * 4 <= fast.pace_entries_per_second, (slow_paces, fast_paces)
    assert slow.pace_entries_per_second <= slow_paces[0] / 4, slow_paces  # two halvings of at most the pace


def test_a_run_starts_at_the_pace_the_previous_run_ended_with(new_store):
    h = new_store()
    first, _ = _sweep(h, FakeApplication(5.0))
    kept = h.store.pace_profiles.load_application()
    assert kept.end_entries_per_second == pytest.approx(first.pace_entries_per_second, abs=0.1)
    assert kept.baseline_p99_seconds == hist(MIN_TRANSACTIONS, QUIET_SECONDS).quantile(0.99)  # the quiet windows
    assert h.store.pace_profiles.load()  # the own-latency controller's profile is kept beside it
    _, paces = _sweep(h, FakeApplication(QUIET_SECONDS), transactions=4)
    assert paces[0] == pytest.approx(kept.end_entries_per_second, abs=0.1)  # not the own controller's 1,000


def test_with_the_default_setting_the_run_is_todays(new_store):
    h = new_store(signal="sweep")
    ignored = FakeApplication(5.0)
    run, _ = _sweep(h, ignored, transactions=20)
    assert ignored.calls == 0 and run.status == "caught_up"
    assert "application" not in (run.pace_reason or "")
    assert h.store.pace_profiles.load_application() == ApplicationPace()


def test_without_a_source_the_store_s_published_latency_is_the_source(new_store):
    """No transaction runs during the sweep (the backlog's were published before it): the application is
    idle, the run is free (the end-to-end case with traffic: test_application_pace_published.py)."""
    h = new_store()
    run, _ = _sweep(h, None, transactions=20)
    assert run.status == "caught_up"
    assert "[application: free: no application transaction seen yet]" in (run.pace_reason or ""), run.pace_reason


def test_an_unreadable_source_never_fails_the_run(new_store, caplog):
    source = Unreadable(5.0)
    run, _ = _sweep(new_store(), source, transactions=20)
    assert run.status == "caught_up" and source.calls > 0 and run.pace_backoffs == 0
    assert "could not read the application's latency (transactions)" in caplog.text


def test_a_run_marks_when_it_swept_and_takes_its_baseline_from_the_quiet_windows_before_it(new_store):
    """Issue 31 item 2: the baseline "learned where no sweep ran". The application's transactions published
    before the run (no sweep claim over them) give the run its baseline, which the pace profile keeps; the run
    claims the time it swept (sweep/pacing/activity.py), so what the application published meanwhile is not
    quiet for the next run; a dry run claims nothing."""
    from airflow_atlas.transactions.latency_source import StoreApplicationLatency
    from airflow_atlas.transactions.latency_table import read_sweep_marks, write_summaries

    h = new_store()
    kvs = h.store.kvs
    quiet = hist(MIN_TRANSACTIONS + 50, 0.020)
    write_summaries(kvs, "quiet-app", time.time() - 2.0, {"commit": quiet}, 600)
    before = time.time()
    run, _ = _sweep(h, None, transactions=20)  # the store's own table is the source
    after = time.time()
    assert run.status == "caught_up"
    assert h.store.pace_profiles.load_application().baseline_p99_seconds == quiet.quantile(0.99)

    claims = read_sweep_marks(kvs, before - 1, after + 1)
    assert claims and before <= claims[0][0] and claims[-1][1] <= after, claims
    for (_, end), (start, _) in itertools.pairwise(claims):
        assert start <= end, claims  # renewed before the previous claim ran out: no gap
    write_summaries(kvs, "during-the-run", (claims[0][0] + claims[-1][1]) / 2, {"commit": hist(500, 1.0)}, 600)
    later = StoreApplicationLatency(kvs, 1.0, 600, clock=lambda: after + 1.0)
    assert [h.count for h in later.quiet()] == [quiet.count]  # the run's own time is not quiet

    dry = h.store.sweeper.sweep_shard(0, THOR, dry_run=True)
    assert dry.status == "dry_run" and read_sweep_marks(kvs, before - 1, time.time()) == claims


def test_a_sweep_on_nodes_under_pressure_backs_off_with_a_fast_application(new_store):
    """The node-pressure guard (sweep/pacing/pressure.py) in the run: the application is as fast as without
    sweep, but the nodes report a queue longer than their threads: the run backs off and says why."""
    pressed, calm = _sweep(new_store(), PressedNodes(QUIET_SECONDS)), _sweep(new_store(), FakeApplication(QUIET_SECONDS))
    (run, paces), (free, free_paces) = pressed, calm
    assert run.pace_backoffs >= 1, run  # (the run lasts about one settle time of the guard)
    assert run.pace_reason.startswith("node pressure, backed off to"), run.pace_reason
    assert "127.0.0.9: MutationStage 64 pending > 16 threads" in run.pace_reason
    assert free.pace_backoffs == 0 and "node pressure" not in free.pace_reason
    assert run.pace_entries_per_second * 2 <= free.pace_entries_per_second, (paces, free_paces)
