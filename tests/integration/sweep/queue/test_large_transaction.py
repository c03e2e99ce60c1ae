"""One transaction with more than 100,000 writes in one partition: two dedicated rows, end to end.

The only test with ~100k writes (per backend). It prints how long enqueue, read and clean took, but asserts
no time: speed is for the benchmarks (bench/), and a timed assertion would only make CI flaky.
"""
from __future__ import annotations

import time

from airflow_atlas.kvs.tables import SweepStrategy
from airflow_atlas.sweep.queue.queue_tables import (
    SWEEPABLE_CELLS,
    decode_cells_column,
    decode_dedicated_reference,
    dedicated_row,
    non_dedicated_row,
)

from .helpers import make_writes

N = 100_050


def test_more_than_100_000_writes_use_two_dedicated_rows(kvs, queue):
    ts = 7_000_123
    writes = make_writes(ts, N, "t_thor", tombstones=True)
    started = time.monotonic()
    queue.enqueue(writes + make_writes(ts, 3, "t_cons"))
    enqueued = time.monotonic()

    reference = kvs.get_row_columns(SWEEPABLE_CELLS, non_dedicated_row(140, 0, False))
    assert len(reference) == 1
    assert decode_cells_column(reference[0][0]) == (123, -2)
    assert decode_dedicated_reference(reference[0][1].contents) == N
    second = kvs.get_row_columns(SWEEPABLE_CELLS, dedicated_row(ts, 0, False, 1))
    assert [decode_cells_column(c) for c, _ in second] == [(123, i) for i in range(50)]
    assert len(kvs.get_row_columns(SWEEPABLE_CELLS, dedicated_row(ts, 0, False, 0), limit=200_000)) == 100_000

    batch = queue.read_batch(0, SweepStrategy.THOROUGH, -1, 10**9, batch_limit=1000)
    read = time.monotonic()
    assert batch.entries == writes, "a transaction is never split, whatever the batch limit"
    assert batch.dedicated_rows_read == 2 and batch.read_to_end and not batch.corrupt
    assert queue.read_batch(0, SweepStrategy.CONSERVATIVE, -1, 10**9).entries_read == 3

    result = queue.clean(0, SweepStrategy.THOROUGH, -1, 9_999_999)
    assert (result.dedicated_rows_deleted, result.cells_rows_deleted, result.timestamps_rows_deleted) == (2, 1, 1)
    assert not queue.cleaner.queue_rows_below(0, SweepStrategy.THOROUGH, 9_999_999)
    assert queue.read_batch(0, SweepStrategy.THOROUGH, -1, 10**9).fine_partition is None
    done = time.monotonic()
    print(f"{kvs.backend}: enqueue {enqueued - started:.2f}s, read {read - enqueued:.2f}s, clean {done - read:.2f}s")
