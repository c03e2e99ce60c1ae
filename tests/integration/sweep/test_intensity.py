"""Intensity (sweep_max_entries_per_second, sweep/pacing/intensity.py) on the real backends: a limited sweep paces
between iterations and still sweeps everything exactly as an unlimited one (oracle, nothing obsolete left,
no queue row leaked). No timing assertions: what the pacer did is read from the run's result
(``seconds_paced``, ``max_entries_per_second``), whose bounds are the pacing arithmetic's, not speed."""
from __future__ import annotations

import pytest

from airflow_atlas.errors import InvalidInputError

from .helpers import STRATEGIES, THOR


def _backlog(h, transactions: int, cells_each: int) -> tuple[str, int]:
    t = h.table(THOR)
    cells = h.cells_in_shard(t, 0, cells_each)
    for i in range(transactions):
        h.write(t, {c: b"v%d" % i for c in cells})
    h.settle()
    return t, transactions * cells_each


def test_a_limited_sweep_paces_between_iterations_and_sweeps_everything(harness):
    h = harness
    t, entries = _backlog(h, transactions=5, cells_each=4)  # 20 entries, 5 iterations of 4
    before = h.observe()
    ts = h.sweep_timestamps()
    rate = 20  # 4 entries cost 0.2 s: 4 waits between 5 iterations, ~0.8 s in all
    r = h.store.sweeper.sweep_shard(0, THOR, sweep_ts=ts[THOR.value], batch_limit=4, max_entries_per_second=rate)
    assert r.status == "caught_up" and r.max_entries_per_second == rate
    assert r.counts.entries_read == entries and r.iterations == 5
    assert r.counts.cells_tombstoned == entries  # one transaction per batch: each tombstones its 4 cells
    # The pacer waited (the iterations are far faster than 4 entries per 0.2 s), but never more than the
    # entries cost, and not after the last iteration.
    assert 0 < r.seconds_paced <= (entries - 4) / rate + 1e-6
    assert r.seconds_paced <= r.duration_seconds
    h.check(before, ts)
    h.sweep_all()  # the other strategy and shards, unlimited
    h.assert_no_obsolete(ts, [t])
    h.assert_no_leaks()
    for c in h.cells_in_shard(t, 0, 4):
        assert len(h.versions(t, c)) == 1


def test_the_setting_is_the_default_and_zero_is_unlimited(harness):
    h = harness
    t, entries = _backlog(h, transactions=3, cells_each=2)
    ts = h.sweep_timestamps()
    # 0 is unlimited: never paced, whatever the latency target.
    unlimited = h.store.sweeper.sweep_shard(0, THOR, sweep_ts=ts[THOR.value], batch_limit=2, max_entries_per_second=0,
                                            latency_target=0)
    assert unlimited.status == "caught_up" and unlimited.counts.entries_read == entries
    assert unlimited.seconds_paced == 0.0 and unlimited.max_entries_per_second == 0
    # No argument: the store's setting (the harness store uses the default).
    again = h.store.sweeper.sweep_shard(0, THOR, sweep_ts=ts[THOR.value])
    assert again.max_entries_per_second == h.store.config.sweep_max_entries_per_second
    assert again.status == "caught_up" and again.seconds_paced == 0.0  # nothing left: never paced
    h.assert_no_obsolete(ts, [t])


def test_a_rate_below_one_batch_per_wait_shrinks_the_batch_and_still_finishes(harness):
    """At 1 entry/s a batch holds 1 entry (a quarter second's worth rounds to 0, never below one; whole transactions:
    a batch never splits a start timestamp), and one wait is at most a third of the lease (10 s here)."""
    h = harness
    t, entries = _backlog(h, transactions=2, cells_each=1)
    ts = h.sweep_timestamps()
    r = h.store.sweeper.sweep_shard(0, THOR, sweep_ts=ts[THOR.value], max_entries_per_second=1)
    assert r.status == "caught_up" and r.counts.entries_read == entries and r.iterations == 2
    assert r.seconds_paced <= h.store.config.lock_lease_seconds / 3.0 + 1e-6
    h.assert_no_obsolete(ts, [t])
    h.assert_no_leaks()


def test_a_paced_batch_is_spread_in_chunks_and_sweeps_everything(harness):
    """One transaction of 150 cells at a fixed 100 entries/s: one batch (a batch never splits a transaction),
    its tombstones in chunks of 64, 64 and 22 with the pacer paid 64 entries (0.64 s) before the second and
    the third: a run of one iteration is paced inside its batch (never after it), and the waits are what the
    chunks cost less the time the work took (under 0.64 s, even on a loaded machine)."""
    h = harness
    t, entries = _backlog(h, transactions=1, cells_each=150)
    before = h.observe()
    ts = h.sweep_timestamps()
    r = h.store.sweeper.sweep_shard(0, THOR, sweep_ts=ts[THOR.value], max_entries_per_second=100, latency_target=0)
    assert r.status == "caught_up" and r.iterations == 1 and r.counts.cells_tombstoned == entries
    assert 0.64 < r.seconds_paced <= 1.28 + 1e-6
    h.check(before, ts)
    h.assert_no_obsolete(ts, [t])
    h.assert_no_leaks()


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_a_bad_rate_is_refused_before_anything_is_written(harness, bad):
    h = harness
    before = h.progress()
    with pytest.raises(InvalidInputError, match="max_entries_per_second must be"):  # the engine's argument check
        h.store.sweeper.sweep_shard(0, STRATEGIES[1], max_entries_per_second=bad)
    assert h.progress() == before


def test_by_default_a_run_no_client_publishes_to_keeps_the_safe_pace(harness):
    """The default is the application pace (docs/INTENSITY.md); the suite's stores do not publish
    (helpers.CONFIG), so the application is unseen and the run keeps the safe 250 entries/s."""
    h = harness
    assert (h.store.config.sweep_max_entries_per_second, h.store.config.sweep_latency_target) == (250, 1.2)
    t, entries = _backlog(h, transactions=5, cells_each=4)
    ts = h.sweep_timestamps()
    r = h.store.sweeper.sweep_shard(0, THOR, sweep_ts=ts[THOR.value], batch_limit=4)
    assert r.status == "caught_up" and r.counts.entries_read == entries and r.iterations == 5
    assert (r.max_entries_per_second, r.latency_target) == (250, 1.2)
    assert r.pace_reason is not None and r.pace_reason.startswith("unseen: ") and r.pace_entries_per_second == 250
    # Paced between iterations, never after the last; an iteration slower than its entries' cost (4 / 250 s: on
    # Cassandra) owes no wait, so the wait may be 0.
    assert 0 <= r.seconds_paced <= (entries - 4) / 250 + 1e-6
    h.assert_no_obsolete(ts, [t])
