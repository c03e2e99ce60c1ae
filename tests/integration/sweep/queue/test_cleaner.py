"""Cleaning: dedicated rows, then cells rows, then timestamps rows; idempotent; reconcile finds leftovers."""
from __future__ import annotations

from dataclasses import asdict

import pytest

from airflow_atlas.kvs.api import Cell
from airflow_atlas.kvs.tables import SweepStrategy
from airflow_atlas.sweep.queue.cleaner import SweepQueueCleaner
from airflow_atlas.sweep.queue.queue_tables import (
    SWEEPABLE_CELLS,
    SWEEPABLE_TIMESTAMPS,
    dedicated_row,
    non_dedicated_row,
    timestamps_row,
)
from airflow_atlas.sweep.queue.sweep_queue import SweepQueue

from .conftest import STRATEGIES
from .helpers import RecordingKvs, drain, make_writes

C, T = SweepStrategy.CONSERVATIVE, SweepStrategy.THOROUGH


def _exists(kvs, table, row):
    return bool(kvs.get_row_columns(table, row, limit=1))


def _fill(queue):
    """Transactions in fine partitions 0, 1 (coarse 0), 200 (coarse 1) and 400 (coarse 2); two dedicated."""
    queue.enqueue(make_writes(100, 60))  # fine 0, dedicated
    queue.enqueue(make_writes(101, 3))
    queue.enqueue(make_writes(50_005, 2))  # fine 1
    queue.enqueue(make_writes(10_000_050, 120_000 // 1000))  # fine 200, dedicated (120 writes)
    queue.enqueue(make_writes(20_000_000, 1))  # fine 400, coarse 2
    queue.enqueue(make_writes(100, 4, "t_thor"))  # the other strategy, fine 0


def test_clean_deletes_dedicated_then_cells_then_timestamps_rows(kvs, queue):
    _fill(queue)
    recording = RecordingKvs(kvs)
    cleaner = SweepQueueCleaner(recording)
    result = cleaner.clean(0, C, -1, 49_999)  # fine 0 is done; coarse 0 is not
    assert (result.dedicated_rows_deleted, result.cells_rows_deleted, result.timestamps_rows_deleted) == (1, 1, 0)
    assert result.fine_partitions == [0] and result.rows_deleted == 2 == result.total
    deletes = [c for c in recording.calls if c[0] == "delete_rows"]
    assert deletes == [("delete_rows", SWEEPABLE_CELLS), ("delete_rows", SWEEPABLE_CELLS)]
    assert not _exists(kvs, SWEEPABLE_CELLS, dedicated_row(100, 0, True, 0))
    assert not _exists(kvs, SWEEPABLE_CELLS, non_dedicated_row(0, 0, True))
    assert _exists(kvs, SWEEPABLE_CELLS, non_dedicated_row(1, 0, True))
    assert _exists(kvs, SWEEPABLE_TIMESTAMPS, timestamps_row(0, 0, True))
    assert _exists(kvs, SWEEPABLE_CELLS, non_dedicated_row(0, 0, False)), "THOROUGH queue untouched"

    recording.calls.clear()
    result = cleaner.clean(0, C, 49_999, 10_000_050)  # fine 1 and 200 done? 200 not (10_000_050 < end of 200)
    assert result.fine_partitions == [1]
    assert result.coarse_partitions == [0] and result.timestamps_rows_deleted == 1
    deletes = [c for c in recording.calls if c[0] == "delete_rows"]
    assert deletes == [("delete_rows", SWEEPABLE_CELLS), ("delete_rows", SWEEPABLE_TIMESTAMPS)]
    assert not _exists(kvs, SWEEPABLE_TIMESTAMPS, timestamps_row(0, 0, True))
    assert _exists(kvs, SWEEPABLE_TIMESTAMPS, timestamps_row(0, 1, True))

    recording.calls.clear()
    result = cleaner.clean(0, C, 10_000_050, 20_000_000 - 1)  # fine 200 and coarse 1 done
    assert result.fine_partitions == [200] and result.dedicated_rows_deleted == 1
    assert result.coarse_partitions == [1]
    deletes = [c for c in recording.calls if c[0] == "delete_rows"]
    assert deletes == [("delete_rows", SWEEPABLE_CELLS)] * 2 + [("delete_rows", SWEEPABLE_TIMESTAMPS)]
    assert not cleaner.queue_rows_below(0, C, 20_000_000 - 1)
    remaining, _ = drain(queue, 0, C, max_exclusive=10**11)
    assert [e.start_ts for e in remaining] == [20_000_000]
    assert len(drain(queue, 0, T, max_exclusive=10**11)[0]) == 4


def test_clean_is_idempotent_and_a_noop_without_progress(kvs, queue):
    _fill(queue)
    first = queue.clean(0, C, -1, 19_999_999)
    assert first.fine_partitions == [0, 1, 200] and first.coarse_partitions == [0, 1]
    recording = RecordingKvs(kvs)
    again = SweepQueueCleaner(recording).clean(0, C, -1, 19_999_999)
    assert again.rows_deleted == 0
    assert not [c for c in recording.calls if c[0] == "delete_rows"], "no new tombstones on a re-run"
    assert queue.clean(0, C, 5, 5).rows_deleted == 0
    assert queue.clean(0, C, 7, 3).rows_deleted == 0
    assert asdict(first)["cells_rows_deleted"] == 3


def test_dedicated_rows_of_every_transaction_are_cleaned(kvs, queue):
    # The cleaner does not care whether a transaction committed or aborted: it follows every reference.
    # (The reference implementation leaked the dedicated rows of aborted transactions.)
    for ts in (10, 11, 12):
        queue.enqueue(make_writes(ts, 51, prefix=b"t%d" % ts))
    result = queue.clean(0, C, -1, 49_999)
    assert result.dedicated_rows_deleted == 3
    assert not queue.cleaner.queue_rows_below(0, C, 49_999)
    for ts in (10, 11, 12):
        assert not _exists(kvs, SWEEPABLE_CELLS, dedicated_row(ts, 0, True, 0))


@pytest.mark.parametrize("failing_call", [1, 2, 3])
def test_a_crash_at_any_step_is_repaired_by_a_rerun_or_reconcile(kvs, queue, failing_call):
    _fill(queue)
    broken = SweepQueueCleaner(RecordingKvs(kvs, fail_on=("delete_rows", failing_call)))
    with pytest.raises(RuntimeError, match="injected"):
        broken.clean(0, C, -1, 19_999_999)
    # what survived is still findable: re-running the same clean finishes the job ...
    leftovers = queue.cleaner.queue_rows_below(0, C, 19_999_999)
    assert leftovers
    if failing_call > 1:
        assert not leftovers.dedicated_rows, "dedicated rows go first"
    result = queue.reconcile(0, C, 19_999_999)  # ... and so does reconcile
    assert result.rows_deleted > 0
    assert not queue.cleaner.queue_rows_below(0, C, 19_999_999)
    remaining, _ = drain(queue, 0, C, max_exclusive=10**11)
    assert [e.start_ts for e in remaining] == [20_000_000]


def test_reconcile_finds_leftovers_below_progress(kvs, queue):
    _fill(queue)
    queue.enqueue(make_writes(30_000_000, 2))
    # a sweeper persisted progress without cleaning (or died before cleaning)
    progress = 20_049_999  # last timestamp of fine partition 400
    queue.update_progress(0, C, progress)
    before = queue.cleaner.queue_rows_below(0, C, progress)
    assert before.cells_rows == [0, 1, 200, 400]
    assert before.dedicated_rows == [(100, 0), (10_000_050, 0)]
    assert before.timestamps_rows == [0, 1]
    result = queue.reconcile(0, C, progress)
    assert (result.cells_rows_deleted, result.dedicated_rows_deleted, result.timestamps_rows_deleted) == (4, 2, 2)
    assert not queue.cleaner.queue_rows_below(0, C, progress)
    assert queue.reconcile(0, C, progress).rows_deleted == 0
    # coarse 2 is only partly behind progress: its timestamps row stays, entries above progress stay
    assert _exists(kvs, SWEEPABLE_TIMESTAMPS, timestamps_row(0, 2, True))
    entries, _ = drain(queue, 0, C, max_exclusive=10**11, min_exclusive=progress)
    assert [e.start_ts for e in entries] == [30_000_000] * 2
    assert len(drain(queue, 0, T, max_exclusive=10**11)[0]) == 4


def test_reconcile_with_a_far_progress_scans_instead_of_walking(kvs, queue):
    queue.enqueue(make_writes(5, 2))
    queue.enqueue(make_writes(400_000_000_000, 60))  # coarse 40_000
    recording = RecordingKvs(kvs)
    cleaner = SweepQueueCleaner(recording)
    result = cleaner.reconcile(0, C, 400_000_049_999)  # the last timestamp of fine partition 8_000_000
    assert result.fine_partitions == [0, 8_000_000] and result.dedicated_rows_deleted == 1
    assert result.coarse_partitions == [0]  # coarse 40_000 is not wholly behind progress
    assert cleaner.index.last_used_scan
    assert sum(1 for c in recording.calls if c[0] == "get_rows_columns") < 10
    assert not cleaner.queue_rows_below(0, C, 400_000_049_999)


def test_cleaning_one_shard_leaves_other_shards_alone(kvs):
    queue = SweepQueue(kvs, strategy_of=lambda t: STRATEGIES[t])
    queue.update_number_of_shards(8)
    writes = [w for ts in range(10, 20) for w in make_writes(ts, 10, prefix=b"s%d_" % ts)]
    for ts in range(10, 20):
        queue.enqueue([w for w in writes if w.start_ts == ts])
    shards = {s for s in range(8) if queue.read_batch(s, C, -1, 1000).entries}
    assert len(shards) > 2
    victim = min(shards)
    victim_entries = len(drain(queue, victim, C, max_exclusive=1000)[0])
    queue.clean(victim, C, -1, 10_000_000 - 1)
    for s in shards:
        assert bool(queue.read_batch(s, C, -1, 1000).entries) == (s != victim)
    total = sum(len(drain(queue, s, C, max_exclusive=1000)[0]) for s in range(8))
    assert total == len(writes) - victim_entries


def test_timestamps_rows_with_only_undecodable_columns_are_reported_and_cleaned(kvs, queue):
    kvs.put(SWEEPABLE_TIMESTAMPS, {Cell(timestamps_row(0, 0, True), b"\xff\xff"): b""}, 5)
    queue.enqueue(make_writes(10_000_001, 1))
    batch = queue.read_batch(0, C, -1, 20_000_000)
    assert batch.fine_partition == 200 and len(batch.entries) == 1
    assert [c.col_hex for c in batch.corrupt] == ["ffff"]
    result = queue.clean(0, C, -1, 9_999_999)
    assert result.coarse_partitions == [0] and result.timestamps_rows_deleted == 1
    assert not _exists(kvs, SWEEPABLE_TIMESTAMPS, timestamps_row(0, 0, True))
