"""Spec cases (spec 000 "Targeted Sweep", issue 4 section 7): dead writers are aborted and their writes
deleted; a transaction committed after the sweep timestamp holds progress back at its start - 1 without
being re-read; THOROUGH removes the write and the sentinel when the newest write is a delete;
CONSERVATIVE keeps the sentinel and the newest write; a read-only transaction that needs a swept version
fails instead of reading wrong data."""
from __future__ import annotations

import pytest

from airflow_atlas.errors import SweptVersionReadError
from airflow_atlas.kvs.api import SENTINEL_TIMESTAMP
from airflow_atlas.sweep.queue.shards import shard_for

from .helpers import CONS, STRATEGIES, THOR, cell


def test_dead_writer_is_aborted_and_its_writes_deleted(harness):
    h = harness
    tc, tt = h.table(CONS), h.table(THOR)
    s1, _ = h.write_many({tc: {cell(1): b"c1", cell(2): b"c2"}, tt: {cell(1): b"t1"}})
    dead = h.dead_writer({tc: {cell(1): b"dead", cell(3): b"dead"}, tt: {cell(1): b"dead", cell(2): b""}})
    assert h.commit_of(dead) is None
    s2, _ = h.write(tt, {cell(5): b"after"})  # a later committed write: sweep passes the dead one

    h.settle()
    before = h.observe()
    ts, results = h.sweep_all()
    h.check(before, ts)

    assert h.is_aborted(dead), "the dead writer must be marked aborted (-1) in the transactions table"
    assert sum(r.counts.transactions_aborted for r in results) == 1
    assert sum(r.counts.aborted_writes_deleted for r in results) == 4
    for table, c in ((tc, cell(1)), (tc, cell(3)), (tt, cell(1)), (tt, cell(2))):
        assert dead not in [v for v, _ in h.versions(table, c)], (table, c)
    # The committed data is intact; the dead writer's cells that had nothing else are gone entirely.
    assert h.store.transactions.run_read_only(lambda t: t.get(tc, [cell(1), cell(2), cell(3)])) == {
        cell(1): b"c1",
        cell(2): b"c2",
    }
    assert h.versions(tc, cell(3)) == []
    assert h.versions(tt, cell(2)) == []
    h.assert_no_obsolete(ts)
    h.assert_no_leaks()


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.value)
def test_late_commit_holds_progress_at_its_start_and_is_not_reread(harness, strategy):
    h = harness
    t = h.table(strategy)
    shard = shard_for(t, cell(1), h.shards)
    # Put every write into the same shard: cells of one row hash apart, so pick cells in ``shard``.
    cells = [c for c in (cell(i) for i in range(200)) if shard_for(t, c, h.shards) == shard][:3]
    a, b, c = cells
    s_old, _ = h.write(t, {a: b"a1"})
    s_old2, _ = h.write(t, {a: b"a2"})

    late = h.begin()
    h.stage(late, t, {b: b"late"})
    holder = h.begin()  # open: the immutable timestamp stays at its start ...
    late_commit = h.commit(late)  # ... and ``late`` commits after it
    assert late.start_timestamp < holder.start_timestamp < late_commit
    h.settle()

    sweeper = h.store.sweeper
    before = h.observe()
    first = sweeper.run_iteration(shard, strategy)
    assert first.sweep_ts == holder.start_timestamp
    assert first.status == "blocked", first
    assert first.new_progress == late.start_timestamp - 1
    assert first.blocked_by == {"start_ts": late.start_timestamp, "commit_ts": late_commit}
    assert first.counts.entries_read >= 3  # a1, a2 and the late write
    assert first.counts.cells_tombstoned == 1  # cell a, up to a2
    h.check(before, {strategy.value: first.sweep_ts})
    assert [v for v, _ in h.versions(t, a) if v >= 0] == [s_old2]

    # Still blocked: the sweeper does not read the blocked entries again.
    for _ in range(2):
        again = sweeper.run_iteration(shard, strategy)
        assert again.status == "blocked", again
        assert again.counts.entries_read == 0
        assert again.new_progress == late.start_timestamp - 1
    # A write after the holder started is above the sweep timestamp anyway.
    h.write(t, {c: b"c1"})

    h.commit(holder)  # nothing open any more: the late transaction becomes sweepable
    h.settle()
    before = h.observe()
    ts, _ = h.sweep_all()
    h.check(before, ts)
    assert h.progress()[(shard, strategy.value)] == ts[strategy.value] - 1
    assert h.store.queue.progress.get_progress(shard, strategy) > late.start_timestamp
    h.assert_no_obsolete(ts)
    h.assert_no_leaks()


def test_thorough_delete_removes_the_write_and_the_sentinel(harness):
    h = harness
    t = h.table(THOR)
    # A sentinel left in a THOROUGH table (e.g. from before a strategy change, or legacy sweep).
    h.store.kvs.add_gc_sentinels(t, [cell(1), cell(2)])
    h.write(t, {cell(1): b"v1", cell(2): b"w1"})
    h.write(t, {cell(1): b"v2", cell(2): b"w2"})
    s_del, _ = h.write(t, {cell(1): b""})
    s_keep, _ = h.write(t, {cell(2): b"w3"})

    h.settle()
    before = h.observe()
    ts, results = h.sweep_all()
    h.check(before, ts)
    assert h.versions(t, cell(1)) == [], "THOROUGH: a delete as newest write goes, with sentinel and all"
    assert h.versions(t, cell(2)) == [(s_keep, b"w3")], "THOROUGH: the newest value stays, sentinel goes"
    assert sum(r.counts.sentinels_written for r in results) == 0
    h.assert_no_obsolete(ts)
    h.assert_no_leaks()


def test_conservative_keeps_the_sentinel_and_the_newest_write(harness):
    h = harness
    t = h.table(CONS)
    h.write(t, {cell(1): b"v1", cell(2): b"w1"})
    h.write(t, {cell(1): b"v2", cell(2): b"w2"})
    s_val, _ = h.write(t, {cell(1): b"v3"})
    s_del, _ = h.write(t, {cell(2): b""})
    s_one, _ = h.write(t, {cell(3): b"only"})

    h.settle()
    before = h.observe()
    ts, results = h.sweep_all()
    h.check(before, ts)
    assert h.versions(t, cell(1)) == [(SENTINEL_TIMESTAMP, b""), (s_val, b"v3")]
    assert h.versions(t, cell(2)) == [(SENTINEL_TIMESTAMP, b""), (s_del, b"")], "a delete as newest write stays"
    assert h.versions(t, cell(3)) == [(SENTINEL_TIMESTAMP, b""), (s_one, b"only")]
    assert sum(r.counts.sentinels_written for r in results) == 3
    h.assert_no_obsolete(ts)
    h.assert_no_leaks()

    # Sweeping again changes nothing.
    h.settle()
    ts2, results2 = h.sweep_all()
    assert sum(r.counts.entries_read for r in results2) == 0
    assert h.versions(t, cell(1)) == [(SENTINEL_TIMESTAMP, b""), (s_val, b"v3")]


def test_read_only_transaction_needing_a_swept_version_raises(harness):
    h = harness
    t = h.table(CONS)
    h.write(t, {cell(1): b"v1"})
    old_reader = h.store.transactions.begin(read_only=True)
    assert old_reader.get(t, [cell(1)]) == {cell(1): b"v1"}
    h.write(t, {cell(1): b"v2"})

    # Within the read-only window the reader is protected: sweep stays below it.
    r = h.store.sweeper.sweep_shard(shard_for(t, cell(1), h.shards), CONS)
    assert r.sweep_ts <= old_reader.start_timestamp
    assert old_reader.get(t, [cell(1)]) == {cell(1): b"v1"}

    # Once the window has passed, sweep removes v1; the old reader fails rather than read nothing.
    h.settle()
    young_reader = h.store.transactions.begin(read_only=True)
    ts, _ = h.sweep_all()
    assert ts[CONS.value] > old_reader.start_timestamp
    assert [v for v, _ in h.versions(t, cell(1))][0] == SENTINEL_TIMESTAMP
    with pytest.raises(SweptVersionReadError):
        old_reader.get(t, [cell(1)])
    assert young_reader.get(t, [cell(1)]) == {cell(1): b"v2"}
    # A read-write transaction of the same age would have held sweep back; a new one reads v2.
    assert h.store.transactions.run(lambda txn: txn.get(t, [cell(1)])) == {cell(1): b"v2"}
