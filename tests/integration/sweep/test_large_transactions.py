"""Large transactions (issue 4 sections 1 and 7): more than 50 writes of one transaction into one shard
and strategy go to a dedicated row behind a reference cell; more than 100,000 to two dedicated rows. They
are read whole (a batch never splits a start timestamp), swept completely, and their dedicated rows are
cleaned - also for a dead writer (the reference implementation leaks those)."""
from __future__ import annotations

from airflow_atlas.kvs.api import Cell
from airflow_atlas.sweep.queue.shards import shard_for
from airflow_atlas.sweep.queue.write_info import WriteInfo

from .helpers import CONS, FINE, THOR


def test_more_than_50_writes_committed_and_dead(harness):
    h = harness
    tc, tt = h.table(CONS), h.table(THOR)
    cc = h.cells_in_shard(tc, 0, 70)
    ct = h.cells_in_shard(tt, 0, 70)
    old, _ = h.write_many({tc: {c: b"old" for c in cc[:20]}, tt: {c: b"old" for c in ct[:20]}})  # 20: inline
    big, _ = h.write_many({tc: {c: b"big" for c in cc[:60]}, tt: {c: (b"" if i % 3 else b"big") for i, c in enumerate(ct[:60])}})
    dead = h.dead_writer({tc: {c: b"dead" for c in cc[10:62]}, tt: {c: b"dead" for c in ct[5:70]}})
    h.settle()

    for strategy, dead_writes in ((CONS, 52), (THOR, 65)):
        rows = h.queue_rows(0, strategy, dead + 1_000_000)
        assert (big, 0) in rows.dedicated_rows and (dead, 0) in rows.dedicated_rows, rows
        # One reference cell (write_index -1 = one dedicated row) instead of 60 inline cells.
        assert h.queue_columns(0, strategy, big) == [(-1, 60)]
        assert h.queue_columns(0, strategy, dead) == [(-1, dead_writes)]
        assert h.queue_columns(0, strategy, old) == [(i, -1) for i in range(20)]

    before = h.observe([tc, tt])
    ts = h.sweep_timestamps()
    for strategy, dead_writes in ((CONS, 52), (THOR, 65)):
        # A batch limit far below each transaction's size: every batch holds one whole transaction.
        reads = []
        for _ in range(3):
            r = h.store.sweeper.run_iteration(0, strategy, sweep_ts=ts[strategy.value], batch_limit=5)
            reads.append(r.counts.entries_read)
        assert reads == [20, 60, dead_writes], (strategy, reads)
    ts, results = h.sweep_all(ts)
    h.check(before, ts)

    assert h.is_aborted(dead)
    for strategy in (CONS, THOR):
        assert not h.queue_rows(0, strategy, ts[strategy.value] - 1), "dedicated rows must be cleaned"
    assert h.versions(tt, ct[65]) == []  # only the dead writer wrote it
    assert [v for v, _ in h.versions(tt, ct[1])] == [], "THOROUGH: newest is a delete, all gone"
    assert [v for v, _ in h.versions(tt, ct[0])] == [big]
    assert [v for v, _ in h.versions(tc, cc[0])] == [-1, big]
    h.assert_no_obsolete(ts, [tc, tt])
    h.assert_no_leaks()


def test_more_than_100000_writes(harness):
    """100,001 writes of one transaction into one shard and strategy: two dedicated rows. Both backends
    run the case the reference gets wrong, a *dead* writer (it died after writing the first 1,000 of its
    cells): aborted, all 100,001 writes deleted, both dedicated rows cleaned. SQLite also sweeps a
    committed one; on Cassandra that would add 100,000 more single-cell range deletes (one request each)
    and take the test past its 30 s budget."""
    h = harness
    n = 100_001
    t = h.table(THOR, "big")
    shards = h.shards
    cells = []
    i = 0
    while len(cells) < n:
        c = Cell(b"big%05d" % (i // 100), b"c%02d" % (i % 100))
        if shards == 1 or shard_for(t, c, shards) == 0:
            cells.append(c)
        i += 1
    # Older committed versions of a few cells, then the dead writer.
    older = h.raw_write(t, {c: b"older" for c in cells[:200]})
    h.raw_commit(older)
    dead = h.store.timestamps.fresh_timestamp()
    h.store.queue.writer.enqueue([WriteInfo(t, c, dead, False) for c in cells])
    h.store.kvs.put(t, {c: b"dead" for c in cells[:1000]}, dead)  # ... and died here
    committed = None
    if h.backend == "sqlite":
        committed = h.raw_write(t, {c: b"new" for c in cells[50_000:]} | {cells[0]: b"new"})
        h.raw_commit(committed)
    h.settle()

    rows = h.queue_rows(0, THOR, dead + 2 * FINE)
    assert (dead, 0) in rows.dedicated_rows and (dead, 1) in rows.dedicated_rows, rows
    assert h.queue_columns(0, THOR, dead) == [(-2, n)], "one reference to two dedicated rows"
    ts, results = h.sweep_all(unpaced=True)  # paced, the 100,001 entries waited about a minute per backend
    assert all(r.counts.corrupt_entries == 0 for r in results)
    assert h.is_aborted(dead)
    assert sum(r.counts.transactions_aborted for r in results) == 1
    assert sum(r.counts.aborted_writes_deleted for r in results) == n
    assert not h.queue_rows(0, THOR, ts[THOR.value] - 1), "the dead writer's dedicated rows must be cleaned"
    h.assert_no_leaks()

    sample = cells[:5] + cells[190:210] + cells[995:1005] + cells[-5:]
    found = h.store.kvs.get_all_timestamps(t, sample)
    for c in sample:
        assert dead not in found.get(c, []), c
    if committed is None:
        assert found[cells[0]] == [older]
        assert cells[-1] not in found
    else:
        assert found[cells[0]] == [committed], "THOROUGH: the older version is swept"
        assert found[cells[199]] == [older]
        assert found[cells[-1]] == [committed]
        h.assert_no_obsolete(ts, [t])
