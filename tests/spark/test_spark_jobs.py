"""The sweep Spark jobs in the test process's SparkSession (local[2]) against the in-task engine.

Each test builds two stores from the same seeded workload, sweeps one through the Spark job (one Spark
task per pair / range, engine zip added to the SparkContext) and the other in-process, and compares end
states: remaining versions per cell, relative progress per shard and strategy, sweep-queue rows.
"""
from __future__ import annotations

import pytest

from airflow_atlas.serialisation import to_json
from airflow_atlas.spark import run_full_sweep, run_targeted_sweep
from airflow_atlas.spark.args import task_count
from airflow_atlas.sweep.targeted import TargetedSweeper

from .conftest import LEGACY_TABLES, SETTINGS, SHARDS, STRATEGIES, cell_versions, end_state, version_count

pytestmark = pytest.mark.spark

ALL_PAIRS = [(shard, strategy) for shard in range(SHARDS) for strategy in STRATEGIES]
# Per-pair counters that do not depend on the order in which pairs run. (transactions_aborted does: a dead
# writer with writes in two shards is aborted by whichever shard gets to it first; its total is compared.)
ORDER_FREE_COUNTERS = (
    "status",
    "iterations",
    "entries_read",
    "cells_tombstoned",
    "sentinels_written",
    "aborted_writes_deleted",
    "queue_rows_cleaned",
)


def _in_task(handle, **kwargs) -> dict:
    out = {}
    for shard, strategy in ALL_PAIRS:
        out[(shard, strategy)] = to_json(handle.store.sweeper.sweep_shard(shard, strategy, **kwargs))
    return out


def _by_pair(doc: dict) -> dict:
    return {(r["shard"], r["strategy"]): r for r in doc["results"]}


def _compare_results(spark_doc: dict, in_task: dict) -> None:
    spark_results = _by_pair(spark_doc)
    assert set(spark_results) == set(in_task)
    for pair, expected in in_task.items():
        got = spark_results[pair]
        assert {k: got[k] for k in ORDER_FREE_COUNTERS} == {k: expected[k] for k in ORDER_FREE_COUNTERS}, pair
    assert sum(r["transactions_aborted"] for r in spark_results.values()) == sum(
        r["transactions_aborted"] for r in in_task.values()
    )


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("cassandra", marks=pytest.mark.cassandra)])
def test_targeted_job_matches_in_task_engine(spark, engine_zip, twin_stores, backend):
    spark_store, task_store = twin_stores(backend)
    before = cell_versions(spark_store.store)
    assert before == cell_versions(task_store.store), "the two workloads must be identical"

    # 1. A partial sweep: the iteration limit stops every shard mid-way, at the same relative place.
    doc = to_json(run_targeted_sweep(
        spark,
        store_url=spark_store.url,
        pairs=ALL_PAIRS,
        batch_limit=15,
        max_iterations=2,
        settings=SETTINGS,
        engine_zip=engine_zip,
    ))
    in_task = _in_task(task_store, batch_limit=15, max_iterations=2)
    assert doc["ok"] and doc["job"] == "targeted_sweep" and not doc["failed"]
    assert len(doc["results"]) == len(ALL_PAIRS)
    assert {r["status"] for r in doc["results"]} <= {"iteration_limit", "caught_up"}
    assert "iteration_limit" in {r["status"] for r in doc["results"]}, "the workload must not fit in 2 iterations"
    _compare_results(doc, in_task)
    partial_spark, partial_task = end_state(spark_store), end_state(task_store)
    assert partial_spark == partial_task

    # 2. Run to completion: the job resumes from persisted progress, exactly like the engine.
    doc = to_json(run_targeted_sweep(
        spark, store_url=spark_store.url, pairs=ALL_PAIRS, batch_limit=15, settings=SETTINGS, engine_zip=engine_zip
    ))
    in_task = _in_task(task_store, batch_limit=15)
    assert {r["status"] for r in doc["results"]} == {"caught_up"}
    _compare_results(doc, in_task)
    final_spark, final_task = end_state(spark_store), end_state(task_store)
    assert final_spark == final_task
    assert all(caught_up for _, caught_up in final_spark["progress"].values())
    assert version_count(final_spark) < version_count(partial_spark) < version_count({"versions": before})

    # The pairs in groups, two Spark tasks per core of local[2], each in a Python worker that never imported
    # Airflow.
    assert doc["summary"]["tasks"] == len(ALL_PAIRS)
    assert doc["summary"]["spark_tasks"] == task_count(len(ALL_PAIRS), 2) == 4
    assert {r["partition"] for r in doc["results"]} == set(range(4))
    for result in doc["results"]:
        assert result["executor"]["airflow_imported"] is False
    assert doc["summary"]["airflow_on_executors"] is False
    assert doc["store"] == spark_store.url  # no credentials in these URLs: nothing to redact


def test_locked_shard_is_skipped_and_bad_pair_fails_alone(spark, engine_zip, make_store):
    handle = make_store("sqlite", seed=5, transactions=40)
    locks = handle.store.locks
    lease = locks.acquire(TargetedSweeper.lock_name(1, "THOROUGH"), "someone-else", 120)
    assert lease is not None
    try:
        doc = to_json(run_targeted_sweep(
            spark,
            store_url=handle.url,
            pairs="0:THOROUGH,1:THOROUGH,9:CONSERVATIVE",  # the store has 4 shards: 9 is bad input
            settings=SETTINGS,
            engine_zip=engine_zip,
        ))
    finally:
        locks.release(lease)
    results = _by_pair(doc)
    assert results[(0, "THOROUGH")]["status"] == "caught_up"
    assert results[(1, "THOROUGH")]["status"] == "skipped_locked"
    assert results[(1, "THOROUGH")]["lock_holder"] == "someone-else"
    bad = results[(9, "CONSERVATIVE")]
    assert bad["status"] == "failed" and bad["error_type"] == "InvalidInputError" and bad["attempt"] == 0
    assert "out of range" in bad["error"]
    assert doc["ok"] is False
    assert doc["failed"] == [{"shard": 9, "strategy": "CONSERVATIVE", "error": bad["error"]}]
    assert doc["summary"]["by_status"] == {"caught_up": 1, "skipped_locked": 1, "failed": 1}
    # The skipped shard was not touched: its progress is still the initial one.
    assert handle.store.queue.progress.get_progress(1, "THOROUGH") == -1


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("cassandra", marks=pytest.mark.cassandra)])
def test_full_sweep_job_removes_what_in_task_legacy_sweep_removes(spark, engine_zip, twin_stores, backend):
    # LEGACY_TABLES were written before they had a sweep strategy: nothing of them is in the queue.
    spark_store, task_store = twin_stores(backend)
    before = cell_versions(spark_store.store, LEGACY_TABLES)
    assert before == cell_versions(task_store.store, LEGACY_TABLES)
    for table, strategy in LEGACY_TABLES.items():
        doc = to_json(run_full_sweep(
            spark,
            store_url=spark_store.url,
            table=table,
            parts=3,
            batch_size=10,
            settings=SETTINGS,
            engine_zip=engine_zip,
        ))
        expected = to_json(task_store.store.legacy_sweeper.sweep_table(table, batch_size=10))
        assert doc["ok"] and doc["strategy"] == strategy
        assert len(doc["ranges"]) == len(doc["results"]) >= 2, "the table must really be split"
        assert doc["ranges"][0][0] == ("token" if backend == "cassandra" else "key")
        assert all(r["finished"] for r in doc["results"])
        assert all(r["executor"]["airflow_imported"] is False for r in doc["results"])
        for name in ("cells_examined", "versions_examined", "versions_deleted", "sentinels_written"):
            assert doc["summary"][name] == expected[name], name
        assert expected["versions_deleted"] > 0
    after_spark = cell_versions(spark_store.reopen(), LEGACY_TABLES)
    after_task = cell_versions(task_store.reopen(), LEGACY_TABLES)
    assert after_spark == after_task
    assert after_spark != before


def test_dry_runs_change_nothing(spark, engine_zip, make_store):
    handle = make_store("sqlite", seed=9, transactions=40)
    before = end_state(handle)
    doc = to_json(run_targeted_sweep(
        spark, store_url=handle.url, pairs=ALL_PAIRS, dry_run=True, settings=SETTINGS, engine_zip=engine_zip
    ))
    assert doc["ok"] and doc["dry_run"] is True
    assert {r["status"] for r in doc["results"]} == {"dry_run"}
    assert doc["summary"]["cells_tombstoned"] > 0  # what it would do
    table = "orders_t"
    full = to_json(run_full_sweep(
        spark, store_url=handle.url, table=table, parts=2, dry_run=True, settings=SETTINGS, engine_zip=engine_zip
    ))
    assert full["ok"] and full["summary"]["versions_deleted"] > 0
    assert end_state(handle) == before
