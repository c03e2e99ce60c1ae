"""Shard progress and the shard count: check-and-set, only ever increasing."""
from __future__ import annotations

import threading

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.tables import SweepStrategy
from airflow_atlas.sweep.queue.progress import ShardProgress
from airflow_atlas.sweep.queue.queue_tables import (
    NUMBER_OF_SHARDS_CELL,
    SWEEP_PROGRESS,
    decode_progress_value,
    progress_cell,
)

C, T = SweepStrategy.CONSERVATIVE, SweepStrategy.THOROUGH


def test_progress_starts_at_minus_one_and_only_increases(kvs):
    progress = ShardProgress(kvs)
    assert progress.get_progress(0, C) == -1
    assert progress.update_progress(0, C, 100) == 100
    assert progress.update_progress(0, C, 50) == 100, "a lower value has no effect"
    assert progress.update_progress(0, C, 100) == 100
    assert progress.update_progress(0, C, 10**12) == 10**12
    assert progress.get_progress(0, C) == 10**12
    assert progress.get_progress(0, T) == -1
    assert progress.get_progress(1, C) == -1
    assert progress.update_progress(255, "thorough", 7) == 7
    assert progress.get_progress(255, T) == 7
    raw = kvs.get_lwt(SWEEP_PROGRESS, [progress_cell(0, True)])[progress_cell(0, True)]
    assert decode_progress_value(raw) == 10**12


def test_progress_argument_validation(kvs):
    progress = ShardProgress(kvs)
    for call in (
        lambda: progress.get_progress(256, C),
        lambda: progress.get_progress(-1, C),
        lambda: progress.get_progress(0, SweepStrategy.NOTHING),
        lambda: progress.update_progress(0, C, -2),
        lambda: progress.update_progress(0, C, 1.5),
    ):
        with pytest.raises(InvalidInputError):
            call()


def test_concurrent_updates_keep_the_maximum(kvs):
    progress = ShardProgress(kvs)
    errors = []

    def worker(offset):
        try:
            for i in range(8):
                progress.update_progress(3, C, 1000 + 10 * i + offset)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert progress.get_progress(3, C) == 1000 + 70 + 3


def test_number_of_shards_defaults_to_one_and_is_never_lowered(kvs):
    progress = ShardProgress(kvs)
    assert progress.get_number_of_shards() == 1
    assert progress.update_number_of_shards(1) == 1
    assert kvs.get_lwt(SWEEP_PROGRESS, [NUMBER_OF_SHARDS_CELL]) == {}, "no write when nothing changes"
    assert progress.update_number_of_shards(8) == 8
    assert progress.update_number_of_shards(4) == 8
    assert progress.get_number_of_shards() == 8
    assert progress.update_number_of_shards(256) == 256
    for bad in (0, 257, -1, 2.0, True):
        with pytest.raises(InvalidInputError):
            progress.update_number_of_shards(bad)
    assert progress.get_number_of_shards() == 256
    # the shard count lives in the distinguished row (shard -1, conservative), apart from shard progress
    assert progress.get_progress(0, C) == -1
