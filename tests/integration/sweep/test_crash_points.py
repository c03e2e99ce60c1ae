"""Crash points (issue 4 section 7): an iteration that dies after any step - after aborting dead writers,
between the sentinel and the ranged delete, between THOROUGH's exclusive and inclusive delete, after the
tombstones and before the cleanup, in the middle of the cleanup (after the dedicated rows, after the cells
rows) and after the cleanup before progress - and is then run again loses nothing (the oracle holds at
every point), leaks nothing (no queue row below progress once caught up) and never moves progress back.

Faults are injected by wrapping the engine's own components (key-value service, cleaner, progress) in a
view of the real store that the sweeper under test is built on; the data and queue are real.
"""
from __future__ import annotations

import pytest

from airflow_atlas.kvs.consistency import Operation
from airflow_atlas.sweep.queue.cleaner import SweepQueueCleaner
from airflow_atlas.sweep.queue.progress import ShardProgress
from airflow_atlas.sweep.queue.queue_tables import SWEEPABLE_CELLS, SWEEPABLE_TIMESTAMPS, decode_cells_row
from airflow_atlas.sweep.targeted import TargetedSweeper

from .helpers import COARSE, CONS, FINE, STRATEGIES, THOR


class Crash(Exception):
    """The injected failure."""


def sentinels_then_tombstones(kvs, table, cells, ranges) -> None:
    """The CONSERVATIVE write as two separate calls, sentinels first, through ``kvs``'s own methods: the
    weakest form the contract allows (kvs/api.py's ``LogicalWrites.sentinels_and_tombstones`` default)."""
    cells = list(cells)
    kvs.add_gc_sentinels(table, cells, operation=Operation.SENTINEL)
    if ranges:
        kvs.delete_all_timestamps(table, ranges, operation=Operation.SWEEP_DELETE)


class View:
    """The real store (or one of its parts) with some attributes replaced."""

    def __init__(self, inner, **overrides):
        self._inner = inner
        self.__dict__.update(overrides)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class CrashingKvs(View):
    """The key-value service, failing the chosen call."""

    def __init__(self, inner, fail):
        super().__init__(inner)
        self._fail = fail

    def delete(self, table, versions, **kw):
        self._fail("delete", table, None)
        return self._inner.delete(table, versions, **kw)

    def delete_all_timestamps(self, table, ranges, **kw):
        self._fail("delete_all_timestamps", table, ranges)
        return self._inner.delete_all_timestamps(table, ranges, **kw)

    def add_gc_sentinels(self, table, cells, **kw):
        cells = list(cells)
        self._inner.add_gc_sentinels(table, cells, **kw)
        self._fail("after_add_gc_sentinels", table, None)

    # The worst case of the CONSERVATIVE write: two separate calls (sentinels, then tombstones) through the
    # crashing methods above - a crash can fall between them. (Cassandra's own version applies each cell's
    # pair atomically, the embedded store's is one transaction: subsets of these states.)
    add_gc_sentinels_and_delete_all_timestamps = sentinels_then_tombstones

    def delete_rows(self, table, rows, **kw):
        rows = list(rows)
        self._fail("delete_rows", table, rows)
        return self._inner.delete_rows(table, rows, **kw)


class CrashingProgress(ShardProgress):
    def update_progress(self, shard, strategy, value):
        raise Crash(f"after cleanup, before persisting progress {value}")


def _never(*_):
    pass


def _crashing_sweeper(store, point: str) -> TargetedSweeper:
    queue = store.queue
    kvs_fail, cleaner_fail, progress = _never, _never, queue.progress

    if point == "after_abort_before_deleting_aborted_writes":

        def kvs_fail(op, table, arg):
            if op == "delete":
                raise Crash(point)

    elif point == "after_sentinels_before_ranged_delete":

        def kvs_fail(op, table, arg):
            if op == "after_add_gc_sentinels":
                raise Crash(point)

    elif point == "after_exclusive_before_inclusive_delete":

        def kvs_fail(op, table, arg):
            # THOROUGH's second call: the inclusive range [-1, ts] of cells whose newest write is a delete.
            if op == "delete_all_timestamps" and any(lo == -1 and hi >= 0 and _is_inclusive(store, table, c, hi) for c, (lo, hi) in arg.items()):
                raise Crash(point)

    elif point == "after_tombstones_before_cleanup":

        def cleaner_fail(op, table, rows):
            raise Crash(point)

    elif point == "mid_cleanup_after_dedicated_rows":

        def cleaner_fail(op, table, rows):
            if table == SWEEPABLE_CELLS and any(not decode_cells_row(r).metadata.dedicated_row for r in rows):
                raise Crash(point)

    elif point == "mid_cleanup_after_cells_rows":

        def cleaner_fail(op, table, rows):
            if table == SWEEPABLE_TIMESTAMPS:
                raise Crash(point)

    elif point == "after_cleanup_before_progress":
        progress = CrashingProgress(store.kvs)
    else:  # pragma: no cover
        raise AssertionError(point)

    cleaner = SweepQueueCleaner(CrashingKvs(store.kvs, cleaner_fail), index=queue.reader.index)
    view = View(store, kvs=CrashingKvs(store.kvs, kvs_fail), queue=View(queue, cleaner=cleaner, progress=progress))
    return TargetedSweeper(view)


def _is_inclusive(store, table, cell, hi) -> bool:
    """Whether [-1, hi] deletes the version at hi itself (the inclusive THOROUGH range): true when a
    version at ``hi`` exists and is a delete."""
    found = store.kvs.get(table, {cell: hi + 1}).get(cell)
    return found is not None and found.timestamp == hi and found.contents == b""


def _history(h):
    """Overwrites, deletes, dead writers and large (dedicated-row) transactions, committed and dead, in
    three fine partitions, the last one in the next coarse partition; all in shard 0."""
    tc, tt = h.table(CONS), h.table(THOR)
    cc, ct = h.cells_in_shard(tc, 0, 70), h.cells_in_shard(tt, 0, 70)
    for rnd in range(3):
        h.write_many(
            {
                tc: {cc[i]: (b"" if rnd == 2 and i == 1 else b"r%d" % rnd) for i in range(5)},
                tt: {ct[i]: (b"" if rnd > 0 and i % 2 else b"r%d" % rnd) for i in range(5)},
            }
        )
        h.dead_writer({tc: {cc[0]: b"dead", cc[7]: b"dead"}, tt: {ct[1]: b"dead", ct[7]: b""}})
        if rnd == 0:
            h.write_many({tc: {c: b"big" for c in cc[10:70]}, tt: {c: b"big" for c in ct[10:70]}})
            h.dead_writer({tc: {c: b"D" for c in cc[10:65]}, tt: {c: b"D" for c in ct[10:65]}})
        h.jump_to(h.next_boundary(FINE if rnd == 0 else COARSE) + rnd)
    h.jump_to(h.next_boundary(FINE) + 3)
    h.settle()
    return [tc, tt]


ALL_POINTS = [
    "after_abort_before_deleting_aborted_writes",
    "after_sentinels_before_ranged_delete",
    "after_exclusive_before_inclusive_delete",
    "after_tombstones_before_cleanup",
    "mid_cleanup_after_dedicated_rows",
    "mid_cleanup_after_cells_rows",
    "after_cleanup_before_progress",
]


def crash_and_rerun(h, point: str) -> list:
    """Sweep shard 0 of both strategies, crashing every iteration at ``point`` and re-running it with
    the real sweeper, checking the oracle and progress at every step. Returns the re-runs' results."""
    store = h.store
    tables = _history(h)
    crashing = _crashing_sweeper(store, point)
    sweeper = store.sweeper
    ts = h.sweep_timestamps()
    before = h.observe(tables)
    crashes = 0
    reruns = []
    for strategy in STRATEGIES:
        sweep_ts = ts[strategy.value]
        lock = sweeper.lock_name(0, strategy)
        for _ in range(30):
            p0 = store.queue.progress.get_progress(0, strategy)
            try:
                r = crashing.run_iteration(0, strategy, sweep_ts=sweep_ts)
            except Crash:
                crashes += 1
                r = None
            assert store.locks.describe(lock).expired, "the shard lock must be released whatever happens"
            p1 = store.queue.progress.get_progress(0, strategy)
            assert p1 >= p0
            if r is None:
                assert p1 == p0, "a crashed iteration must not have persisted progress"
            h.check(before, ts)  # nothing lost, even in the crashed state
            if r is not None and r.status == "caught_up":
                break
            again = sweeper.run_iteration(0, strategy, sweep_ts=sweep_ts)
            reruns.append(again)
            # A crash leaves an expected state, not corruption (e.g. a reference whose dedicated rows the
            # crashed cleanup already deleted): no alarm, no quarantine.
            assert again.counts.corrupt_entries == 0, f"re-run after a crash at {point}: {again}"
            assert store.queue.progress.get_progress(0, strategy) >= p1
            h.check(before, ts)
            if again.status == "caught_up":
                break
        else:
            pytest.fail(f"{strategy.value}: not caught up")
        assert store.queue.progress.get_progress(0, strategy) == sweep_ts - 1
    assert crashes > 0, f"the crash point {point} was never reached"
    h.assert_no_obsolete(ts, tables)
    h.sweep_all()
    h.assert_no_leaks()
    assert not store.history.quarantined(), "nothing may be quarantined after a crash"
    return reruns


@pytest.mark.parametrize("point", ALL_POINTS)
def test_crash_and_rerun(harness, point):
    crash_and_rerun(harness, point)
