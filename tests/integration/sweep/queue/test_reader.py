"""The reader returns exactly what was enqueued, batch by batch, in the spec's order and bounds."""
from __future__ import annotations

from itertools import pairwise

from airflow_atlas.kvs.api import Cell
from airflow_atlas.kvs.tables import SweepStrategy
from airflow_atlas.sweep.queue.partitions import fine
from airflow_atlas.sweep.queue.queue_tables import (
    SWEEPABLE_CELLS,
    SWEEPABLE_TIMESTAMPS,
    cells_column,
    dedicated_row,
    encode_dedicated_reference,
    non_dedicated_row,
    timestamps_cell,
)
from airflow_atlas.sweep.queue.reader import (
    INCOMPLETE_DEDICATED_ROWS,
    MISSING_DEDICATED_ROW,
    UNDECODABLE,
    SweepQueueReader,
)
from airflow_atlas.sweep.queue.write_reference import encode_write_reference

from .helpers import drain, make_writes

C, T = SweepStrategy.CONSERVATIVE, SweepStrategy.THOROUGH

# start timestamps at and around fine (50_000) and coarse (10_000_000) boundaries, sizes incl. dedicated
TRANSACTIONS = [
    (0, 1),
    (1, 3),
    (49_999, 2),
    (50_000, 60),
    (50_001, 50),
    (99_999, 1),
    (9_999_999, 4),
    (10_000_000, 51),
    (10_000_001, 2),
    (10_050_000, 1),
    (35_000_123, 7),
]


def _enqueue_all(queue, transactions=TRANSACTIONS, table="t_cons"):
    expected = []
    for ts, n in transactions:
        writes = make_writes(ts, n, table, prefix=b"r%d_" % ts)
        queue.enqueue(writes)
        expected.extend(writes)
    return expected


def test_reads_exactly_the_enqueued_entries_across_fine_and_coarse_boundaries(kvs, queue):
    expected = _enqueue_all(queue)
    _enqueue_all(queue, table="t_thor")  # the other strategy's queue must not leak in
    entries, batches = drain(queue, 0, C, max_exclusive=40_000_000)
    assert entries == expected
    for batch in batches:
        if batch.entries:
            assert {fine(e.start_ts) for e in batch.entries} == {batch.fine_partition}
            assert batch.entries_read == len(batch.entries)
            assert batch.last_start_ts == batch.entries[-1].start_ts
            assert not batch.corrupt
    assert [b.fine_partition for b in batches] == [0, 1, 199, 200, 201, 700, None]
    assert sum(b.dedicated_rows_read for b in batches) == 2
    entries_t, _ = drain(queue, 0, T, max_exclusive=40_000_000)
    assert [e.table for e in entries_t] == ["t_thor"] * len(expected)


def test_min_and_max_are_exclusive(kvs, queue):
    expected = _enqueue_all(queue)
    batch = queue.read_batch(0, C, 49_999, 50_001)
    assert batch.fine_partition == 1
    assert [e.start_ts for e in batch.entries] == [50_000] * 60
    assert batch.read_to_end  # stopped at max_exclusive
    assert batch.progress_if_all_swept == 50_000
    batch = queue.read_batch(0, C, 50_000, 99_999)
    assert [e.start_ts for e in batch.entries] == [50_001] * 50
    assert batch.read_to_end and batch.progress_if_all_swept == 99_998
    batch = queue.read_batch(0, C, 1, 49_999)
    assert batch.entries == [] and batch.fine_partition is None and batch.progress_if_all_swept == 49_998
    # within [min, max] bounds everywhere
    for lo, hi in [(-1, 2), (0, 1), (5, 10_000_001), (9_999_999, 10_050_001), (10_050_000, 40_000_000)]:
        entries, _ = drain(queue, 0, C, max_exclusive=hi, min_exclusive=lo)
        assert entries == [e for e in expected if lo < e.start_ts < hi]


def test_empty_range_and_nothing_found(kvs, queue):
    batch = queue.read_batch(0, C, 10, 11)
    assert batch.fine_partition is None and batch.entries == [] and batch.read_to_end
    assert batch.progress_if_all_swept == 10
    batch = queue.read_batch(0, C, -1, 123_456_789)
    assert batch.fine_partition is None and batch.progress_if_all_swept == 123_456_788
    _enqueue_all(queue)
    assert queue.read_batch(1, C, -1, 40_000_000).fine_partition is None  # other shard: nothing


def test_batch_limit_never_splits_a_start_timestamp(kvs, queue):
    for ts in range(1000, 1010):
        queue.enqueue(make_writes(ts, 30, prefix=b"x%d_" % ts))
    queue.enqueue(make_writes(1010, 70, prefix=b"big"))  # dedicated
    queue.enqueue(make_writes(1011, 5, prefix=b"after"))
    batch = queue.read_batch(0, C, -1, 100_000, batch_limit=50)
    assert [e.start_ts for e in batch.entries] == [1000] * 30 + [1001] * 30
    assert not batch.read_to_end and batch.last_start_ts == 1001
    assert batch.progress_if_all_swept == 1001
    batch = queue.read_batch(0, C, 1001, 100_000, batch_limit=1)
    assert [e.start_ts for e in batch.entries] == [1002] * 30
    batch = queue.read_batch(0, C, 1009, 100_000, batch_limit=10)
    assert [e.start_ts for e in batch.entries] == [1010] * 70  # a dedicated transaction is never split
    assert not batch.read_to_end
    batch = queue.read_batch(0, C, 1010, 100_000, batch_limit=10)
    assert [e.start_ts for e in batch.entries] == [1011] * 5 and batch.read_to_end
    for limit in (1, 7, 29, 30, 31, 100, 10_000):
        entries, batches = drain(queue, 0, C, max_exclusive=100_000, batch_limit=limit)
        assert len(entries) == 10 * 30 + 70 + 5
        starts = [{e.start_ts for e in b.entries} for b in batches]
        for a, b in pairwise(starts):
            assert not (a & b), "a start timestamp appears in two batches"


def test_pages_through_wide_rows(kvs, queue):
    expected = []
    for ts in range(200, 400):
        writes = make_writes(ts, 7, prefix=b"p%d_" % ts)
        queue.enqueue(writes)
        expected.extend(writes)
    reader = SweepQueueReader(kvs, page_size=51)
    batch = reader.read_batch(0, C, -1, 100_000, batch_limit=1000)
    # 1000 entries end inside transaction 342; it is finished: 143 transactions of 7
    assert batch.entries == expected[:1001]
    assert batch.last_start_ts == 342 and not batch.read_to_end
    assert batch.cells_read == 1002  # one look-ahead cell shows the next start timestamp
    entries, _ = drain(reader, 0, C, max_exclusive=100_000, batch_limit=1000)
    assert entries == expected


def test_skips_listed_fine_partitions_with_empty_rows(kvs, queue):
    # a writer died after the timestamps put (partitions 3 and 4), a cleaner died after deleting the row (5)
    kvs.put(SWEEPABLE_TIMESTAMPS, {timestamps_cell(0, 3, True): b""}, 150_000)
    kvs.put(SWEEPABLE_TIMESTAMPS, {timestamps_cell(0, 4, True): b""}, 200_000)
    queue.enqueue(make_writes(250_001, 2))
    kvs.delete_rows(SWEEPABLE_CELLS, [non_dedicated_row(5, 0, True)])
    writes = make_writes(300_005, 3)
    queue.enqueue(writes)
    batch = queue.read_batch(0, C, -1, 1_000_000)
    assert batch.fine_partition == 6
    assert batch.skipped_fine_partitions == [3, 4, 5]
    assert batch.entries == writes
    assert queue.reader.next_fine_partition(0, C, -1, 1_000_000) == 6
    # only empty partitions in range: nothing found, progress may pass them
    batch = queue.read_batch(0, C, -1, 300_000)
    assert batch.fine_partition is None and batch.skipped_fine_partitions == [3, 4, 5]
    assert batch.progress_if_all_swept == 299_999


def test_reports_corrupt_cells_and_keeps_going(kvs, queue):
    good_before = make_writes(500, 2)
    queue.enqueue(good_before)
    row = non_dedicated_row(0, 0, True)
    # an undecodable value at ts 600, a column that is not a valid column, a reference without rows
    kvs.put(SWEEPABLE_CELLS, {Cell(row, cells_column(600, 0)): b"\x09garbage"}, 600)
    kvs.put(SWEEPABLE_CELLS, {Cell(row, cells_column(650, 0) + b"\x00junk"): b"x"}, 650)
    kvs.put(SWEEPABLE_CELLS, {Cell(row, cells_column(700, -2)): encode_dedicated_reference(150_000)}, 700)
    kvs.put(
        SWEEPABLE_CELLS,
        {Cell(dedicated_row(700, 0, True, 0), cells_column(700, 0)): encode_write_reference("t_cons", Cell(b"d", b"c"), False)},
        700,
    )
    # a reference whose dedicated row holds fewer entries than recorded
    kvs.put(SWEEPABLE_CELLS, {Cell(row, cells_column(750, -1)): encode_dedicated_reference(3)}, 750)
    kvs.put(
        SWEEPABLE_CELLS,
        {Cell(dedicated_row(750, 0, True, 0), cells_column(750, 0)): encode_write_reference("t_cons", Cell(b"e", b"c"), True)},
        750,
    )
    good_after = make_writes(800, 2)
    queue.enqueue(good_after)
    batch = queue.read_batch(0, C, -1, 100_000)
    assert [(e.start_ts, e.cell.row) for e in batch.entries] == (
        [(500, b"r0"), (500, b"r1"), (700, b"d"), (750, b"e"), (800, b"r0"), (800, b"r1")]
    )
    assert sorted((c.kind, c.start_ts or -1) for c in batch.corrupt) == [(UNDECODABLE, -1), (UNDECODABLE, 600)]
    # missing / short dedicated rows are benign crash states: reported apart, not as corruption
    assert sorted((c.kind, c.start_ts) for c in batch.incomplete_references) == [
        (INCOMPLETE_DEDICATED_ROWS, 750),
        (MISSING_DEDICATED_ROW, 700),
    ]
    missing = next(c for c in batch.incomplete_references if c.kind == MISSING_DEDICATED_ROW)
    assert missing.row_hex == dedicated_row(700, 0, True, 1).hex() and missing.col_hex is None
    assert all(c.table == SWEEPABLE_CELLS and c.reason for c in batch.corrupt + batch.incomplete_references)
    assert batch.read_to_end and batch.progress_if_all_swept == 49_999
    assert batch.corrupt[0]._asdict()["reason"]


def test_references_whose_dedicated_rows_were_cleaned_are_not_corruption(kvs, queue):
    # a cleaner died after deleting the dedicated rows and before the cells row
    queue.enqueue(make_writes(100, 60))
    kvs.delete_rows(SWEEPABLE_CELLS, [dedicated_row(100, 0, True, 0)])
    later = make_writes(60_000, 2)
    queue.enqueue(later)
    batch = queue.read_batch(0, C, -1, 1_000_000)
    assert batch.corrupt == [] and [c.kind for c in batch.incomplete_references] == [MISSING_DEDICATED_ROW]
    assert batch.skipped_fine_partitions == [0] and batch.fine_partition == 1 and batch.entries == later


def test_partition_with_only_corrupt_cells_is_returned_not_skipped(kvs, queue):
    row = non_dedicated_row(2, 0, True)
    kvs.put(SWEEPABLE_TIMESTAMPS, {timestamps_cell(0, 2, True): b""}, 100_001)
    kvs.put(SWEEPABLE_CELLS, {Cell(row, cells_column(1, 0)): b"bad"}, 100_001)
    queue.enqueue(make_writes(150_000, 1))
    batch = queue.read_batch(0, C, -1, 1_000_000)
    assert batch.fine_partition == 2 and batch.entries == [] and len(batch.corrupt) == 1
    assert batch.read_to_end and batch.progress_if_all_swept == 149_999


def test_far_jumps_use_a_scan_of_the_timestamps_table(kvs, queue):
    far = 500_000_000_123  # coarse partition 50_000: walking from 0 would take 50,000 row reads
    writes = make_writes(far, 3)
    queue.enqueue(writes)
    queue.enqueue(make_writes(far, 4, "t_thor"))
    batch = queue.read_batch(0, C, -1, far + 10)
    assert batch.entries == writes
    assert queue.reader.index.last_used_scan
    # a near read walks
    batch = queue.read_batch(0, C, far - 5, far + 10)
    assert batch.entries == writes and not queue.reader.index.last_used_scan
    assert queue.reader.count_entries(0, C, -1) == 3
    assert queue.reader.count_entries(0, T, -1, max_exclusive=far) == 0


def test_count_entries_counts_references_and_caps(kvs, queue):
    queue.enqueue(make_writes(10, 5))
    queue.enqueue(make_writes(11, 120))
    queue.enqueue(make_writes(60_000, 1))
    assert queue.reader.count_entries(0, C, -1) == 126
    assert queue.reader.count_entries(0, C, -1, max_exclusive=11) == 5
    assert queue.reader.count_entries(0, C, 10, max_exclusive=60_000) == 120
    assert queue.reader.count_entries(0, C, -1, cap=50) == 50
    assert queue.reader.next_fine_partition(0, C, 11, 1_000_000) == 1
    assert queue.reader.next_fine_partition(0, C, 60_000, 1_000_000) is None
