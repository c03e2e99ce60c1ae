"""Partition boundaries (issue 4 section 7): transactions whose start timestamps sit exactly on the last
and first timestamp of fine (50,000) and coarse (10,000,000) partitions. Progress crosses the partitions
one batch at a time, and the cleanup removes the cells rows, the dedicated rows and the
sweepableTimestamps rows progress has left - never a row it still needs."""
from __future__ import annotations

import pytest

from airflow_atlas.sweep.queue.partitions import coarse, fine

from .helpers import COARSE, CONS, FINE, THOR


@pytest.mark.parametrize("strategy", [THOR, CONS], ids=lambda s: s.value)
def test_progress_crosses_fine_and_coarse_partitions_and_cleans_behind(harness, strategy):
    h = harness
    t = h.table(strategy)
    shard = 0
    small = h.cells_in_shard(t, shard, 6)
    large = h.cells_in_shard(t, shard, 60, offset=10_000)  # > 50 writes: a reference and a dedicated row

    h.write(t, {small[0]: b"old0", small[1]: b"old1", small[2]: b"old2", small[3]: b"old3"})
    # Two start timestamps can only be adjacent when the first is a writer drawing one timestamp (a
    # transaction's begin also draws the next spare), so the last timestamp of the partition is a writer
    # that commits late, while the transaction at the first timestamp of the next partition is open.
    b = h.next_boundary(FINE)
    h.warm_up()
    h.jump_to(b - 1)
    last = h.raw_write(t, {small[0]: b"x0", small[1]: b""}, start=b - 1)  # 49_999 on a new store
    first = h.begin_at(b, warm=False)  # 50_000
    h.stage(first, t, {small[2]: b"y2", small[4]: b"y4", **{c: b"L" for c in large}})  # disjoint cells
    h.raw_commit(last)
    h.commit(first)
    dead = h.dead_writer({t: {small[3]: b"dead", **{c: b"D" for c in large[:55]}}})  # dedicated, dead
    assert fine(dead) == fine(b)

    c = h.next_boundary(COARSE)
    h.warm_up()
    h.jump_to(c - 1)
    last2 = h.raw_write(t, {small[0]: b"z0"}, start=c - 1)  # the last timestamp of a coarse partition
    first2 = h.begin_at(c, warm=False)  # the first of the next
    h.stage(first2, t, {small[2]: b"z2", small[4]: b""})
    h.raw_commit(last2)
    h.commit(first2)
    dead2 = h.dead_writer({t: {small[5]: b"dead2"}})
    assert coarse(dead2) == coarse(c)
    # Move well past the last partition, so a complete sweep leaves every one of these rows behind.
    h.jump_to(h.next_boundary(FINE) + 5)
    h.settle()

    everything = h.queue_rows(shard, strategy, c + COARSE)
    assert fine(b - 1) in everything.cells_rows and fine(b) in everything.cells_rows
    assert fine(c - 1) in everything.cells_rows and fine(c) in everything.cells_rows
    assert (b, 0) in everything.dedicated_rows and (dead, 0) in everything.dedicated_rows
    assert coarse(b) in everything.timestamps_rows and coarse(c) in everything.timestamps_rows

    before = h.observe([t])
    sweeper = h.store.sweeper
    sweep_ts = h.sweep_timestamps()[strategy.value]
    progress = [h.store.queue.progress.get_progress(shard, strategy)]
    for _ in range(50):
        r = sweeper.run_iteration(shard, strategy, sweep_ts=sweep_ts, batch_limit=1)
        assert r.new_progress >= progress[-1]
        progress.append(r.new_progress)
        p = r.new_progress
        # Nothing below progress is left, and nothing at or above it was removed.
        assert not h.queue_rows(shard, strategy, p), (p, h.queue_rows(shard, strategy, p))
        remaining = h.queue_rows(shard, strategy, c + COARSE)
        for partition in everything.cells_rows:
            if partition > fine(p):
                assert partition in remaining.cells_rows, (p, partition)
        for start, ordinal in everything.dedicated_rows:
            if start > p:
                assert (start, ordinal) in remaining.dedicated_rows, (p, start)
        if r.status == "caught_up":
            break
    else:
        pytest.fail(f"not caught up after 50 iterations: {progress}")

    # Progress stopped exactly at the end of each partition, and on the start timestamps in between.
    assert b - 1 in progress, progress
    assert b in progress, progress  # batch limit 1: the big transaction at b, then the dead one
    assert (fine(b) + 1) * FINE - 1 in progress, progress
    assert c - 1 in progress and c in progress, progress
    assert progress[-1] == sweep_ts - 1

    h.check(before, {strategy.value: sweep_ts})
    assert h.is_aborted(dead) and h.is_aborted(dead2)
    h.assert_no_obsolete({strategy.value: sweep_ts, (CONS if strategy is THOR else THOR).value: 0}, [t])
    assert not h.queue_rows(shard, strategy, sweep_ts - 1)
    h.sweep_all()
    h.assert_no_leaks()


def test_fine_boundary_within_one_batch(harness):
    """A batch never spans two fine partitions: 49_999 and 50_000 are swept in separate batches, and
    the cleanup of the first row happens when progress reaches the end of its partition."""
    h = harness
    t = h.table(THOR)
    cells = h.cells_in_shard(t, 0, 3)
    b = h.next_boundary(FINE)
    h.warm_up()
    h.jump_to(b - 2)
    at = {}
    for target, value in ((b - 2, b"a"), (b - 1, b"b"), (b, b"c"), (b + 1, b"d")):
        at[target] = h.raw_write(t, {cells[0]: value, cells[1]: value}, start=target)
    for start in at.values():
        h.raw_commit(start)
    h.settle()
    r1 = h.store.sweeper.run_iteration(0, THOR)  # large batch limit: still stops at the row's end
    assert r1.new_progress == b - 1
    assert r1.counts.entries_read == 4
    assert not h.queue_rows(0, THOR, b - 1)
    r2 = h.store.sweeper.run_iteration(0, THOR)
    assert r2.counts.entries_read == 4
    assert r2.status == "caught_up"
    assert [v for v, _ in h.versions(t, cells[0])] == [b + 1]
    ts, _ = h.sweep_all()
    h.assert_no_obsolete(ts, [t])
    h.assert_no_leaks()


def test_huge_timestamp_gaps_are_crossed_and_cleaned(harness):
    """Timestamps 3 * 10^10 apart: thousands of empty coarse partitions in between. The index finds the
    next partition with one scan instead of walking them, and progress and cleanup cross the gap."""
    h = harness
    tc, tt = h.table(CONS), h.table(THOR)
    cc, ct = h.cells_in_shard(tc, 0, 2), h.cells_in_shard(tt, 0, 2)
    h.write_many({tc: {cc[0]: b"1"}, tt: {ct[0]: b"1"}})
    h.write_many({tc: {cc[0]: b"2"}, tt: {ct[0]: b""}})
    h.jump_to(h.store.timestamps.current_bound() + 3 * 10**10)
    middle, _ = h.write_many({tc: {cc[0]: b"3", cc[1]: b"x"}, tt: {ct[1]: b"x"}})
    h.dead_writer({tc: {cc[1]: b"dead"}, tt: {ct[1]: b"dead"}})
    h.jump_to(h.store.timestamps.current_bound() + 3 * 10**10)
    h.settle()
    before = h.observe([tc, tt])
    ts = h.sweep_timestamps()
    for strategy in (CONS, THOR):
        first = h.store.sweeper.run_iteration(0, strategy, sweep_ts=ts[strategy.value])
        assert first.new_progress < middle
        reader = h.store.queue.reader
        batch = reader.read_batch(0, strategy, first.new_progress, ts[strategy.value])
        assert batch.fine_partition == fine(middle)
        assert reader.index.last_used_scan, "3000 empty coarse partitions should be skipped with one scan"
        r = h.store.sweeper.sweep_shard(0, strategy, sweep_ts=ts[strategy.value], max_iterations=4)
        assert r.status == "caught_up", r
    h.check(before, ts)
    h.assert_no_obsolete(ts, [tc, tt])
    ts, _ = h.sweep_all()
    h.assert_no_leaks()
