"""sweep/batch_deletes.py: what one batch deletes, and how a paced run spreads it (chunks as long as the pace
says when each is cut, the pacer's share before each chunk after the first). The store here only records the calls:
the deletes themselves are tested against the real stores in tests/integration/sweep."""
from __future__ import annotations

import pytest

from airflow_atlas.errors import TableNotFoundError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.kvs.tables import SweepStrategy
from airflow_atlas.sweep.batch_deletes import ABORTED, plan_deletes, run_deletes
from airflow_atlas.sweep.deleter import SweepDeleter
from airflow_atlas.sweep.pacing.intensity import chunk_step
from airflow_atlas.sweep.results import SweepResult

THOR = SweepStrategy.THOROUGH


class RecordingKvs:
    """Records each delete call (table, kind, how many); ``dropped``: tables whose deletes raise."""

    def __init__(self, dropped=()) -> None:
        self.calls: list[tuple[str, str, int]] = []
        self.dropped = set(dropped)

    def table_exists(self, table: str) -> bool:
        return True

    def _call(self, table: str, kind: str, n: int) -> None:
        if table in self.dropped:
            raise TableNotFoundError(table)
        self.calls.append((table, kind, n))

    def delete(self, table, versions, *, operation=None) -> None:
        self._call(table, "versions", len(versions))

    def delete_all_timestamps(self, table, ranges, *, operation=None) -> None:
        self._call(table, "ranges", len(ranges))


class Marks:
    def cutoff(self, table: str) -> int:
        return 0


class Store:
    def __init__(self, kvs) -> None:
        self.kvs = kvs
        self.table_marks = Marks()


def cell(i: int) -> Cell:
    return Cell(b"r%d" % i, b"c")


def batch(table: str, aborted: int, committed: int):
    """Entries (table, cell, start ts, is_tombstone) and their commit timestamps: ``aborted`` aborted writes
    and ``committed`` committed ones, each on its own cell."""
    entries, commits = [], {}
    for i in range(aborted):
        entries.append((table, cell(i), 10 + i, False))
        commits[10 + i] = ABORTED
    for i in range(committed):
        entries.append((table, cell(1000 + i), 5000 + i, False))
        commits[5000 + i] = 6000 + i
    return entries, commits


class Pacing:
    """Records what the pacer is paid; each chunk after the first is ``steps`` (one per chunk) or an eighth of
    the batch, at least 64 (chunk_step unthrottled)."""

    def __init__(self, steps=None) -> None:
        self.paid: list[float] = []
        self._steps = None if steps is None else iter(steps)

    def step(self, batch_entries: int) -> int:
        return next(self._steps) if self._steps is not None else chunk_step(batch_entries, 0, 10_000)

    def spread(self, entries: float) -> None:
        self.paid.append(entries)


def run(kvs, entries, commits, spread=True, steps=None):
    result = SweepResult(shard=0, strategy=THOR.value, status="swept")
    plans = plan_deletes(Store(kvs), THOR, entries, commits, result)
    pacing = Pacing(steps)
    run_deletes(kvs, SweepDeleter(kvs), plans, result, entries=len(entries), pacing=pacing if spread else None)
    return result, pacing.paid


def test_a_paced_batch_goes_in_chunks_with_the_pacer_paid_before_each_chunk_after_the_first():
    kvs = RecordingKvs()
    entries, commits = batch("t", 70, 130)
    result, paid = run(kvs, entries, commits)
    assert kvs.calls == [("t", "versions", 64), ("t", "versions", 6),
                         ("t", "ranges", 64), ("t", "ranges", 64), ("t", "ranges", 2)]
    assert paid == pytest.approx([64.0, 6.0, 64.0, 64.0])  # the last chunk's share is paid after the iteration
    assert result.counts.aborted_writes_deleted == 70 and result.counts.cells_tombstoned == 130 and result.tables == {"t": 130}


def test_an_unpaced_batch_is_one_call_per_group():
    kvs = RecordingKvs()
    entries, commits = batch("t", 70, 130)
    result, paid = run(kvs, entries, commits, spread=False)
    assert kvs.calls == [("t", "versions", 70), ("t", "ranges", 130)]
    assert paid == [] and result.counts.cells_tombstoned == 130


def test_a_table_dropped_while_its_chunks_go_skips_the_rest_of_that_table_only():
    kvs = RecordingKvs(dropped={"a"})
    entries_a, commits_a = batch("a", 0, 100)
    entries_b, commits_b = batch("b", 0, 10)
    commits_b = {ts + 100_000: c for ts, c in commits_b.items()}
    entries_b = [(t, c, ts + 100_000, tomb) for t, c, ts, tomb in entries_b]
    result, paid = run(kvs, entries_a + entries_b, {**commits_a, **commits_b})
    assert kvs.calls == [("b", "ranges", 10)]
    assert result.counts.entries_skipped_dropped_tables == 100 and result.tables == {"b": 10}
    assert sum(paid) == pytest.approx(110 * 100 / 110)  # the skipped chunks are paced too: the rate holds


def test_a_large_paced_batch_goes_in_a_chunk_of_64_then_eighths():
    kvs = RecordingKvs()
    entries, commits = batch("t", 0, 1000)
    result, paid = run(kvs, entries, commits)
    assert [n for _, _, n in kvs.calls] == [64] + [125] * 7 + [61]
    assert len(paid) == 8 and sum(paid) == pytest.approx(1000 - 61)
    assert result.counts.cells_tombstoned == 1000


def test_a_pace_that_drops_mid_batch_sends_the_rest_in_the_new_pace_s_chunks():
    """The step is asked after each wait: an application that starts while a batch read unthrottled is sent
    slows the rest of it to chunks of 64 at once."""
    kvs = RecordingKvs()
    entries, commits = batch("t", 0, 1000)
    result, paid = run(kvs, entries, commits, steps=[125, 125] + [64] * 20)
    assert [n for _, _, n in kvs.calls] == [64, 125, 125] + [64] * 10 + [46]
    assert sum(paid) == pytest.approx(1000 - 46) and result.counts.cells_tombstoned == 1000
