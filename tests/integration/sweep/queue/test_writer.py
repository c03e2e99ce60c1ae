"""Layout the writer leaves in the store: timestamps cell, inline cells, references and dedicated rows."""
from __future__ import annotations

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.kvs.tables import SweepStrategy, TableMetadata
from airflow_atlas.sweep.queue import writer as writer_module
from airflow_atlas.sweep.queue.queue_tables import (
    SWEEPABLE_CELLS,
    SWEEPABLE_TIMESTAMPS,
    decode_cells_column,
    decode_dedicated_reference,
    dedicated_row,
    non_dedicated_row,
    timestamps_row,
)
from airflow_atlas.sweep.queue.shards import shard_for
from airflow_atlas.sweep.queue.sweep_queue import SweepQueue
from airflow_atlas.sweep.queue.write_info import WriteInfo
from airflow_atlas.sweep.queue.write_reference import decode_write_reference

from .helpers import RecordingKvs, make_writes


def _row(kvs, row):
    return kvs.get_row_columns(SWEEPABLE_CELLS, row)


def test_up_to_50_writes_go_inline(kvs, queue):
    ts = 1_234_567  # fine 24, modulus 34_567, coarse 0
    writes = make_writes(ts, 50)
    queue.enqueue(writes)
    ts_cols = kvs.get_row_columns(SWEEPABLE_TIMESTAMPS, timestamps_row(0, 0, True))
    assert [c for c, _ in ts_cols] == [b"\x18"]  # VAR_LONG(24)
    # one version per fine partition, at its first timestamp (not one version per transaction)
    assert ts_cols[0][1].contents == b"" and ts_cols[0][1].timestamp == (ts // 50_000) * 50_000
    cols = _row(kvs, non_dedicated_row(24, 0, True))
    decoded = [decode_cells_column(c) for c, _ in cols]
    assert decoded == [(34_567, i) for i in range(50)]
    assert all(v.timestamp == ts for _, v in cols), "queue cells carry Atlas timestamp = start ts"
    refs = [decode_write_reference(v.contents).at(ts) for _, v in cols]
    assert refs == writes
    assert _row(kvs, dedicated_row(ts, 0, True, 0)) == []
    # nothing for the other strategy
    assert _row(kvs, non_dedicated_row(24, 0, False)) == []


def test_more_than_50_writes_use_one_reference_and_a_dedicated_row(kvs, queue):
    ts = 50_000 + 7
    writes = make_writes(ts, 51)
    queue.enqueue(writes)
    cols = _row(kvs, non_dedicated_row(1, 0, True))
    assert len(cols) == 1
    assert decode_cells_column(cols[0][0]) == (7, -1)
    assert decode_dedicated_reference(cols[0][1].contents) == 51
    dedicated = _row(kvs, dedicated_row(ts, 0, True, 0))
    assert [decode_cells_column(c) for c, _ in dedicated] == [(7, i) for i in range(51)]
    assert [decode_write_reference(v.contents).at(ts) for _, v in dedicated] == writes
    assert _row(kvs, dedicated_row(ts, 0, True, 1)) == []


def test_partitions_by_strategy_and_shard_and_drops_nothing(kvs, queue):
    queue.update_number_of_shards(4)
    ts = 777
    writes = (
        make_writes(ts, 20, "t_cons")
        + make_writes(ts, 20, "t_thor", prefix=b"x")
        + make_writes(ts, 5, "t_none", prefix=b"n")
    )
    queue.enqueue(writes)
    expected: dict[tuple[int, bool], list[WriteInfo]] = {}
    for w in writes:
        if w.table != "t_none":
            expected.setdefault((shard_for(w.table, w.cell, 4), w.table == "t_cons"), []).append(w)
    assert len({s for s, _ in expected}) > 1, "test data should span several shards"
    for shard in range(4):
        for conservative in (True, False):
            cols = _row(kvs, non_dedicated_row(0, shard, conservative))
            got = [decode_write_reference(v.contents).at(ts) for _, v in cols]
            assert got == expected.get((shard, conservative), [])
            listed = kvs.get_row_columns(SWEEPABLE_TIMESTAMPS, timestamps_row(shard, 0, conservative))
            assert bool(listed) == ((shard, conservative) in expected)


def test_strategy_from_table_metadata_is_cached(kvs):
    for name, strategy in (("m_cons", "CONSERVATIVE"), ("m_thor", "THOROUGH"), ("m_none", "NOTHING")):
        kvs.create_table(name, TableMetadata(strategy=SweepStrategy.parse(strategy)))
    queue = SweepQueue(kvs)
    queue.enqueue(make_writes(100, 3, "m_cons") + make_writes(100, 4, "m_thor") + make_writes(100, 5, "m_none"))
    assert len(_row(kvs, non_dedicated_row(0, 0, True))) == 3
    assert len(_row(kvs, non_dedicated_row(0, 0, False))) == 4
    kvs.set_sweep_strategy("m_none", SweepStrategy.THOROUGH)
    queue.enqueue(make_writes(200, 5, "m_none"))  # cached: still NOTHING
    assert len(_row(kvs, non_dedicated_row(0, 0, False))) == 4
    queue.writer.invalidate_caches()
    queue.enqueue(make_writes(300, 5, "m_none"))
    assert len(_row(kvs, non_dedicated_row(0, 0, False))) == 9


def test_shard_count_is_cached_briefly(kvs):
    now = [0.0]
    queue = SweepQueue(kvs, strategy_of=lambda t: SweepStrategy.CONSERVATIVE)
    queue.writer._clock = lambda: now[0]
    assert queue.writer.number_of_shards() == 1
    queue.progress.update_number_of_shards(16)  # behind the writer's back
    assert queue.writer.number_of_shards() == 1
    now[0] = 4.9
    assert queue.writer.number_of_shards() == 1
    now[0] = 5.0
    assert queue.writer.number_of_shards() == 16


def test_kvs_calls_timestamps_then_cells_then_dedicated(kvs):
    recording = RecordingKvs(kvs)
    queue = SweepQueue(recording, strategy_of=lambda t: SweepStrategy.THOROUGH)
    queue.enqueue(make_writes(5, 10, "a") + make_writes(5, 60, "b"))
    puts = [c for c in recording.calls if c[0] in ("put", "multi_put")]
    assert puts == [("put", SWEEPABLE_TIMESTAMPS), ("put", SWEEPABLE_CELLS), ("put", SWEEPABLE_CELLS)]
    recording.calls.clear()
    queue.enqueue(make_writes(6, 10, "a"))
    puts = [c for c in recording.calls if c[0] in ("put", "multi_put")]
    assert puts == [("put", SWEEPABLE_TIMESTAMPS), ("put", SWEEPABLE_CELLS)]


def test_rejects_mixed_start_timestamps_and_writes_nothing(kvs, queue):
    with pytest.raises(InvalidInputError, match="start timestamps"):
        queue.enqueue(make_writes(10, 3) + make_writes(11, 3))
    assert kvs.get_row_columns(SWEEPABLE_TIMESTAMPS, timestamps_row(0, 0, True)) == []


@pytest.mark.parametrize(
    "bad",
    [
        [WriteInfo("t_cons", Cell(b"r", b"c"), -5, False)],
        [WriteInfo("t_cons", Cell(b"", b"c"), 5, False)],
        [WriteInfo("Bad Name", Cell(b"r", b"c"), 5, False)],
        [WriteInfo("t_cons", Cell(b"r", b"c"), 5, "yes")],
        [("t_cons", Cell(b"r", b"c"), 5, False, "extra")],
    ],
)
def test_rejects_malformed_writes(kvs, queue, bad):
    with pytest.raises(InvalidInputError):
        queue.enqueue(bad)


def test_rejects_partitions_over_the_dedicated_row_limit(kvs, queue, monkeypatch):
    # 6.4M real writes would take minutes; the check is the same with a smaller limit.
    monkeypatch.setattr(writer_module, "MAX_WRITES_PER_PARTITION", 100)
    with pytest.raises(InvalidInputError, match=r"101 writes into shard 0 \(CONSERVATIVE\).*per transaction, shard and strategy"):
        queue.enqueue(make_writes(9, 101))
    assert kvs.get_row_columns(SWEEPABLE_TIMESTAMPS, timestamps_row(0, 0, True)) == []


def test_empty_and_nothing_only_enqueues_write_nothing(kvs):
    recording = RecordingKvs(kvs)
    queue = SweepQueue(recording, strategy_of=lambda t: SweepStrategy.NOTHING)
    queue.enqueue([])
    queue.enqueue(make_writes(3, 5, "t_none"))
    assert not [c for c in recording.calls if c[0] == "put"]


def test_reenqueue_is_idempotent(kvs, queue):
    writes = make_writes(4242, 60) 
    queue.enqueue(writes)
    queue.enqueue(writes)
    batch = queue.read_batch(0, SweepStrategy.CONSERVATIVE, -1, 10_000)
    assert batch.entries == writes
