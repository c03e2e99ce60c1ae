"""bench/orchestration/run.py's pure parts: the overhead per pair, the metadata growth, the medians over
repetitions, the workload size and the goals (no store, no Airflow: the benchmark itself is run by
``python -m bench.run --only orchestration``, never by the test suite)."""
from __future__ import annotations

import pytest

from bench.orchestration import run as O


def test_overhead_per_pair_is_the_slot_time_outside_the_engine():
    assert O.overhead_per_pair(100.0, 40.0, 16, slots=2) == pytest.approx((200 - 40) / 16)
    assert O.overhead_per_pair(10.0, 0.0, 0) is None


def test_table_growth_lists_the_tables_that_grew():
    assert O.table_growth({"task_instance": 10, "xcom": 5, "log": 3}, {"task_instance": 74, "xcom": 5, "log": 4,
                                                                      "new": 2}) == {
        "log": 1, "new": 2, "task_instance": 64}


def test_summarize_takes_medians_and_scales_growth_to_a_day():
    runs = [{"state": "success", "wall_seconds": w, "engine_seconds": 1.0, "overhead_per_pair_seconds": o,
             "task_instances": 68, "pairs": 512, "db_bytes_per_run": 1000, "log_bytes_per_run": None,
             "metadata_rows": 350}
            for w, o in ((30.0, 0.1), (50.0, None), (40.0, 0.3))]
    s = O.summarize(runs)
    assert s["wall_seconds"] == 40.0 and s["overhead_per_pair_seconds"] == pytest.approx(0.2)
    assert s["db_bytes_per_day"] == 1000 * 288 and s["log_bytes_per_day"] is None
    assert s["metadata_rows_per_day"] == 350 * 288
    assert s["states"] == ["success"]


def test_every_pair_backlog_is_sized_by_the_pairs():
    assert O.every_pair_transactions(256) * O.WRITES_PER_TRANSACTION >= 256 * 2 * O.ENTRIES_PER_PAIR


def test_goals_compare_the_largest_shard_count_with_the_smallest():
    mode = {"shards": (8, 256)}
    results = {"256/every_pair/default": {"wall_seconds": 240.0, "overhead_per_pair_seconds": 0.5},
               "8/every_pair/default": {"wall_seconds": 20.0, "overhead_per_pair_seconds": 2.0}}
    within, ratio = O.goals(results, mode)
    assert within["met"] is True and within["value"] == 240.0
    assert ratio["met"] is True and ratio["value"] == 0.25
    slow = O.goals({**results, "256/every_pair/default": {"wall_seconds": 400.0, "overhead_per_pair_seconds": 5.0}}, mode)
    assert [g["met"] for g in slow] == [False, False]
