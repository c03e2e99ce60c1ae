"""Invariants the reference implementation's bugs taught (issue 4 section 3): a batch never splits a
start timestamp; a failed delete fails the iteration and progress stays; a dropped or truncated table
neither makes sweep loop nor gets sentinels; a sweeper whose lease was taken over stops before cleanup
and progress; interleaved sweepers keep progress correct through check-and-set."""
from __future__ import annotations

import dataclasses
import time

import pytest

from airflow_atlas.errors import LockNotHeldError, StoreUnavailableError, SweptVersionReadError
from airflow_atlas.kvs.api import SENTINEL_TIMESTAMP
from airflow_atlas.sweep.targeted import TargetedSweeper

from .helpers import CONS, STRATEGIES, THOR, cell
from .test_crash_points import View, sentinels_then_tombstones


# ----- batches ------------------------------------------------------------------------------------
def test_batch_limit_never_splits_a_start_timestamp(harness):
    h = harness
    t = h.table(THOR)
    cells = h.cells_in_shard(t, 0, 40)
    sizes = [3, 7, 1, 12, 4]
    starts, used = [], 0
    for size in sizes:
        s, _ = h.write(t, {c: b"v%d" % len(starts) for c in cells[used : used + size]})
        starts.append(s)
        used += size
    h.settle()
    sweep_ts = h.sweep_timestamps()[THOR.value]
    old = h.store.queue.progress.get_progress(0, THOR)

    # The reader: every start timestamp of a batch comes with all of its entries.
    batch = h.store.queue.reader.read_batch(0, THOR, old, sweep_ts, 4)
    assert [e.start_ts for e in batch.entries] == [starts[0]] * 3 + [starts[1]] * 7
    assert not batch.read_to_end and batch.last_start_ts == starts[1]

    # The sweeper: progress lands on the last start timestamp read, never inside a transaction.
    reads, progress = [], []
    for _ in range(3):
        r = h.store.sweeper.run_iteration(0, THOR, sweep_ts=sweep_ts, batch_limit=4)
        reads.append(r.counts.entries_read)
        progress.append(r.new_progress)
    assert reads == [10, 13, 4]
    assert progress[:2] == [starts[1], starts[3]]
    assert progress[2] == sweep_ts - 1
    for c in cells[:used]:
        assert len(h.versions(t, c)) == 1


def test_wide_partition_read_in_pages_never_splits_a_transaction(harness):
    """102 transactions of 50 inline writes each in one fine partition: 5,100 cells, more than one page
    of the reader (5,000). Small batch limits end batches mid-partition and mid-page; every batch still
    holds whole transactions, and nothing is missed."""
    h = harness
    t = h.table(THOR)
    cells = h.cells_in_shard(t, 0, 300)
    h.jump_to(h.next_boundary(50_000))  # all of them in one fine partition
    starts = []
    for i in range(102):
        start = h.raw_write(t, {cells[(i * 7 + j) % 300]: b"%d-%d" % (i, j) for j in range(50)})
        h.raw_commit(start)
        starts.append(start)
    assert len({s // 50_000 for s in starts}) == 1
    h.settle()
    ts = h.sweep_timestamps()
    old = h.store.queue.progress.get_progress(0, THOR)
    reader = h.store.queue.reader
    for limit, expected in ((100_000, 5_100), (5_001, 5_050), (4_975, 5_000), (4_999, 5_000)):
        batch = reader.read_batch(0, THOR, old, ts[THOR.value], limit)
        assert len(batch.entries) == expected, (limit, len(batch.entries))
        assert batch.read_to_end is (expected == 5_100)
    before = h.observe([t])
    reads = []
    for limit in (75, 3_000, 100_000):
        r = h.store.sweeper.run_iteration(0, THOR, sweep_ts=ts[THOR.value], batch_limit=limit)
        reads.append(r.counts.entries_read)
        assert r.counts.entries_read % 50 == 0 and r.counts.entries_read >= min(limit, 5_100 - sum(reads[:-1])), reads
    assert sum(reads) == 5_100, reads
    ts, _ = h.sweep_all(ts)
    h.check(before, ts)
    h.assert_no_obsolete(ts, [t])
    h.assert_no_leaks()


# ----- failed deletes -----------------------------------------------------------------------------
class FailingKvs(View):
    def __init__(self, inner, failing: str):
        super().__init__(inner)
        self._failing = failing

    def delete_all_timestamps(self, table, ranges, **kw):
        if self._failing == "delete_all_timestamps":
            raise StoreUnavailableError("injected: cassandra delete_all_timestamps timed out")
        return self._inner.delete_all_timestamps(table, ranges, **kw)

    def add_gc_sentinels(self, table, cells, **kw):
        if self._failing == "add_gc_sentinels":
            raise StoreUnavailableError("injected: cassandra add_gc_sentinels timed out")
        return self._inner.add_gc_sentinels(table, cells, **kw)

    # Sentinels, then tombstones, as two calls through the failing methods above.
    add_gc_sentinels_and_delete_all_timestamps = sentinels_then_tombstones

    def delete(self, table, versions, **kw):
        if self._failing == "delete":
            raise StoreUnavailableError("injected: cassandra delete timed out")
        return self._inner.delete(table, versions, **kw)


@pytest.mark.parametrize(
    "strategy,failing",
    [(THOR, "delete_all_timestamps"), (CONS, "delete_all_timestamps"), (CONS, "add_gc_sentinels"), (THOR, "delete")],
    ids=["thorough-range", "conservative-range", "conservative-sentinel", "aborted-writes"],
)
def test_failed_delete_fails_the_iteration_and_progress_stays(harness, strategy, failing):
    h = harness
    t = h.table(strategy)
    c = h.cells_in_shard(t, 0, 2)
    s1, _ = h.write(t, {c[0]: b"v1"})
    s2, _ = h.write(t, {c[0]: b"v2"})
    dead = h.dead_writer({t: {c[1]: b"dead"}})
    h.write(t, {c[1]: b"later"})
    h.settle()
    old = h.store.queue.progress.get_progress(0, strategy)
    rows_before = h.queue_rows(0, strategy, dead + 10**8)

    broken = TargetedSweeper(View(h.store, kvs=FailingKvs(h.store.kvs, failing)))
    with pytest.raises(StoreUnavailableError, match="injected"):
        broken.run_iteration(0, strategy)
    assert h.store.queue.progress.get_progress(0, strategy) == old, "progress must not pass an unswept entry"
    assert h.queue_rows(0, strategy, dead + 10**8) == rows_before, "nothing may be cleaned either"
    assert h.store.locks.describe(h.store.sweeper.lock_name(0, strategy)).expired
    if failing == "add_gc_sentinels":
        # Sentinel first: without it, nothing was deleted.
        assert [v for v, _ in h.versions(t, c[0])] == [s1, s2]

    ts, _ = h.sweep_all()
    assert h.is_aborted(dead)
    h.assert_no_obsolete(ts, [t])
    h.assert_no_leaks()


# ----- dropped and truncated tables ---------------------------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.value)
def test_dropped_table_does_not_make_sweep_loop(harness, strategy):
    h = harness
    gone, kept = h.table(strategy, "gone"), h.table(strategy, "kept")
    for i in range(3):
        h.write_many({gone: {cell(j): b"g%d" % i for j in range(4)}, kept: {cell(0): b"k%d" % i}})
    h.dead_writer({gone: {cell(5): b"dead"}})
    h.store.drop_table(gone)
    h.settle()
    ts = h.sweep_timestamps()
    results = []
    for shard in range(h.shards):
        r = h.store.sweeper.sweep_shard(shard, strategy, sweep_ts=ts[strategy.value], max_iterations=5)
        assert r.status == "caught_up", r
        results.append(r)
    assert sum(r.counts.entries_skipped_dropped_tables for r in results) >= 5  # 4 cells (newest write each) + 1 dead
    assert not h.store.kvs.table_exists(gone)
    h.assert_no_obsolete(ts, [kept])
    h.sweep_all()
    h.assert_no_leaks()

    # The same name again: the old queue entries never touch the new table.
    h.store.create_table(gone, strategy)
    s_new, _ = h.write(gone, {cell(0): b"new"})
    h.settle()
    ts, _ = h.sweep_all()
    for j in range(1, 6):
        assert h.versions(gone, cell(j)) == [], f"cell {j} was only written before the drop"
    expected = [(SENTINEL_TIMESTAMP, b""), (s_new, b"new")] if strategy is CONS else [(s_new, b"new")]
    assert h.versions(gone, cell(0)) == expected
    h.assert_no_leaks()


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.value)
def test_truncated_table_gets_no_sentinels(harness, strategy):
    h = harness
    t = h.table(strategy)
    for i in range(3):
        h.write(t, {cell(j): b"v%d" % i for j in range(5)})
    h.dead_writer({t: {cell(7): b"dead"}})
    h.store.truncate_table(t)
    h.settle()
    ts, results = h.sweep_all()
    assert all(r.status == "caught_up" for r in results)
    assert list(h.store.kvs.scan(t)) == [], "sweep wrote into the truncated table"
    assert sum(r.counts.sentinels_written for r in results) == 0
    h.assert_no_leaks()
    again = h.sweep_all()[1]
    assert sum(r.counts.entries_read for r in again) == 0

    # Writes after the truncate are swept as usual.
    h.write(t, {cell(0): b"a"})
    s_b, _ = h.write(t, {cell(0): b"b"})
    h.settle()
    ts, _ = h.sweep_all()
    tail = [(s_b, b"b")]
    assert h.versions(t, cell(0)) == ([(SENTINEL_TIMESTAMP, b"")] + tail if strategy is CONS else tail)
    assert [c for c, _, _ in h.store.kvs.scan(t) if c != cell(0)] == []
    h.assert_no_leaks()


# ----- leases and interleaving --------------------------------------------------------------------
def test_iteration_whose_lease_was_taken_over_stops_before_cleanup_and_progress(harness):
    h = harness
    t = h.table(THOR)
    c = h.cells_in_shard(t, 0, 3)
    h.write(t, {c[0]: b"1"})
    h.write(t, {c[0]: b"2", c[1]: b"x"})
    h.jump_to(h.next_boundary(50_000) + 1)  # progress will cross a fine partition: cleanup is due
    h.write(t, {c[2]: b"3"})
    h.settle()
    name = h.store.sweeper.lock_name(0, THOR)
    locks = h.store.locks
    old = h.store.queue.progress.get_progress(0, THOR)
    rows_before = h.queue_rows(0, THOR, 10**15)
    assert rows_before.cells_rows

    stale = h.acquire(name, "sweeper-a", 0.2)
    time.sleep(0.3)
    fresh = h.acquire(name, "sweeper-b", 30)
    assert fresh is not None and fresh.token > stale.token
    before = h.observe([t])
    with pytest.raises(LockNotHeldError):
        h.store.sweeper.run_iteration(0, THOR, lease=stale)
    assert h.store.queue.progress.get_progress(0, THOR) == old
    assert h.queue_rows(0, THOR, 10**15) == rows_before
    h.check(before, h.sweep_timestamps())

    # The new holder sweeps; a sweeper without the lock is turned away.
    assert h.store.sweeper.run_iteration(0, THOR).status == "skipped_locked"
    r = h.store.sweeper.sweep_shard(0, THOR, lease=fresh)
    assert r.status == "caught_up"
    locks.release(fresh)
    h.assert_no_leaks()


def test_interleaved_sweepers_keep_progress_correct(harness):
    """Sweeper B passes its fencing check, then stalls in the cleanup; its lease expires, sweeper A takes
    the shard and sweeps it to the end; then B persists its (lower) progress: check-and-set keeps A's."""
    h = harness
    t = h.table(THOR)
    c = h.cells_in_shard(t, 0, 4)
    for i in range(4):
        h.write(t, {c[i]: b"a", c[(i + 1) % 4]: b"b%d" % i})
        h.jump_to(h.next_boundary(50_000) + i)
    h.settle()
    store = h.store
    name = store.sweeper.lock_name(0, THOR)
    sweep_ts = h.sweep_timestamps()[THOR.value]
    a_results = []
    b_lease = h.acquire(name, "sweeper-b", 2.0)  # long enough to pass its fencing check

    class StallingCleaner(View):
        def clean(self, shard, strategy, old, new):
            out = self._inner.clean(shard, strategy, old, new)
            time.sleep(max(0.0, b_lease.expires_at - time.time()) + 0.05)  # B stalls: its lease expires
            lease = h.acquire(name, "sweeper-a", 30)
            assert lease is not None
            try:
                a_results.append(store.sweeper.sweep_shard(0, THOR, lease=lease, sweep_ts=sweep_ts))
            finally:
                store.locks.release(lease)
            return out

    queue = store.queue
    b = TargetedSweeper(View(store, queue=View(queue, cleaner=StallingCleaner(queue.cleaner))))
    r = b.run_iteration(0, THOR, lease=b_lease, sweep_ts=sweep_ts, batch_limit=1)
    assert a_results and a_results[0].status == "caught_up"
    assert a_results[0].new_progress == sweep_ts - 1
    assert r.new_progress == sweep_ts - 1, "B reports the persisted progress, not its own lower value"
    assert store.queue.progress.get_progress(0, THOR) == sweep_ts - 1
    ts, _ = h.sweep_all()
    h.assert_no_obsolete(ts, [t])
    h.assert_no_leaks()


class _SlowReader(View):
    def __init__(self, inner, pause: float, during=None):
        super().__init__(inner)
        self._pause = pause
        self._during = during

    def read_batch(self, *args, **kwargs):
        batch = self._inner.read_batch(*args, **kwargs)
        time.sleep(self._pause)
        if self._during is not None:
            self._during()
        return batch


class _FlakyRefresh(View):
    def refresh(self, lease, lease_seconds):
        raise StoreUnavailableError("injected: lock refresh timed out")


def _slow_sweeper(store, *, lease_seconds: float, pause: float, during=None, flaky_refresh: bool = False):
    queue = store.queue
    overrides = {
        "config": dataclasses.replace(store.config, lock_lease_seconds=lease_seconds),
        "queue": View(queue, reader=_SlowReader(queue.reader, pause, during)),
    }
    if flaky_refresh:
        overrides["locks"] = _FlakyRefresh(store.locks)
    return TargetedSweeper(View(store, **overrides))


def _two_partitions(h, t):
    c = h.cells_in_shard(t, 0, 2)
    h.write(t, {c[0]: b"1"})
    h.write(t, {c[0]: b"2"})
    h.jump_to(h.next_boundary(50_000) + 1)
    h.write(t, {c[1]: b"3"})
    h.settle()


def test_short_lease_is_refreshed_during_a_long_iteration(harness):
    h = harness
    t = h.table(THOR)
    _two_partitions(h, t)
    sweeper = _slow_sweeper(h.store, lease_seconds=1.0, pause=2.0)  # refreshed every third of the lease
    r = sweeper.run_iteration(0, THOR)
    assert r.status in ("swept", "caught_up") and r.new_progress > r.old_progress
    assert h.store.locks.describe(sweeper.lock_name(0, THOR)).expired  # released


def test_lease_lost_mid_iteration_stops_before_cleanup_and_progress(harness):
    """The lease keeper cannot refresh (lock service hiccup), the lease expires while the batch is being
    read, another sweeper takes the shard: the iteration must stop at its fencing check."""
    h = harness
    t = h.table(THOR)
    _two_partitions(h, t)
    store = h.store
    name = store.sweeper.lock_name(0, THOR)
    taken = []

    def take_over():
        taken.append(h.acquire(name, "sweeper-other", 30))

    old = store.queue.progress.get_progress(0, THOR)
    rows = h.queue_rows(0, THOR, 10**15)
    sweeper = _slow_sweeper(store, lease_seconds=1.0, pause=2.0, during=take_over, flaky_refresh=True)
    with pytest.raises(LockNotHeldError):
        sweeper.run_iteration(0, THOR)
    assert taken and taken[0] is not None, "the expired lease should have been taken over"
    assert store.queue.progress.get_progress(0, THOR) == old
    assert h.queue_rows(0, THOR, 10**15) == rows
    assert store.locks.describe(name).holder == "sweeper-other", "the loser must not release the new holder's lock"
    store.locks.release(taken[0])
    ts, _ = h.sweep_all()
    h.assert_no_obsolete(ts, [t])
    h.assert_no_leaks()


# ----- strategy changes ---------------------------------------------------------------------------
def test_young_read_only_reader_after_thorough_to_conservative_change(harness):
    """Writes queued while a table was THOROUGH, swept after it became CONSERVATIVE, must not take a
    version from a read-only transaction inside the read-only window (read-only readers are allowed on the
    table again); nor may writes made just after the change be queued as THOROUGH."""
    h = harness
    t = h.table(THOR)
    h.write(t, {cell(0): b"v1", cell(1): b"w1"})
    before_change = h.store.transactions.begin(read_only=True)  # young: well inside the read-only window
    h.write(t, {cell(0): b"v2"})  # queued THOROUGH
    h.store.set_sweep_strategy(t, CONS)
    after_change = h.store.transactions.begin(read_only=True)
    h.write(t, {cell(1): b"w2"})  # written after the change
    assert before_change.get(t, [cell(0), cell(1)]) == {cell(0): b"v1", cell(1): b"w1"}
    assert after_change.get(t, [cell(1)]) == {cell(1): b"w1"}

    h.sweep_all()
    # Young (inside the window) on a CONSERVATIVE table: protected, they read what they read before
    # (failing on a sentinel would at least not be wrong data, but is not what the window promises).
    assert before_change.get(t, [cell(0), cell(1)]) == {cell(0): b"v1", cell(1): b"w1"}
    assert after_change.get(t, [cell(1)]) == {cell(1): b"w1"}

    # Once the window has passed, everything is swept the CONSERVATIVE way (sentinel kept).
    h.settle()
    ts, _ = h.sweep_all()
    assert [v for v, _ in h.versions(t, cell(0))][0] == SENTINEL_TIMESTAMP
    assert [v for v, _ in h.versions(t, cell(1))][0] == SENTINEL_TIMESTAMP
    with pytest.raises(SweptVersionReadError):
        before_change.get(t, [cell(0)])
    h.assert_no_obsolete(ts, [t])
    h.assert_no_leaks()


def test_strategy_changes_to_thorough_and_to_nothing(harness):
    """Writes queued under CONSERVATIVE follow the table's strategy at sweep time: THOROUGH removes the
    sentinel and a newest delete; NOTHING is never swept (and does not hold the shard back)."""
    h = harness
    to_thorough, to_nothing = h.table(CONS), h.table(CONS)
    s1, _ = h.write_many({to_thorough: {cell(0): b"1", cell(1): b"1"}, to_nothing: {cell(0): b"1"}})
    s2, _ = h.write_many({to_thorough: {cell(0): b"", cell(1): b"2"}, to_nothing: {cell(0): b"2"}})
    h.store.set_sweep_strategy(to_thorough, THOR)
    h.store.set_sweep_strategy(to_nothing, "NOTHING")
    h.settle()
    ts, results = h.sweep_all()
    assert all(r.status == "caught_up" for r in results)
    assert h.versions(to_thorough, cell(0)) == []
    assert h.versions(to_thorough, cell(1)) == [(s2, b"2")]
    assert [v for v, _ in h.versions(to_nothing, cell(0))] == [s1, s2]
    h.assert_no_obsolete(ts, [to_thorough])
    h.assert_no_leaks()
