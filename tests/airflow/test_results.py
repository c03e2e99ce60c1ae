"""``airflow/results.py``: each operator result's XCom JSON (its keys in order, what the dashboard, templates
and downstream tasks read) and its round trip through :mod:`airflow_atlas.serialisation`."""
from __future__ import annotations

import json

import pytest

from airflow_atlas.airflow.reports import TableTombstones, swept_tables, tombstones_by_table
from airflow_atlas.airflow.results import FullSweepPart, FullSweepResult, ScrubReport, SweepSummary, SweepTimestamps
from airflow_atlas.airflow.xcom import to_xcom
from airflow_atlas.serialisation import from_json, to_json
from airflow_atlas.sweep.counts import ScanCounts, SweepCounts
from airflow_atlas.sweep.results import ShardSweepResult
from airflow_atlas.sweep.scrub import ScrubResult

SCRUB = ScrubResult(immutable_ts=7, entries_seen=3, entries_scrubbed=2, cells_tombstoned=2, tables={"t": 2})


@pytest.mark.parametrize("result", [
    FullSweepPart("t", 5, parts=2),
    FullSweepPart("t", 5, scan_ranges=[{"kind": "token", "start": -1, "end": 5}]),
    FullSweepResult("t", "THOROUGH", 5, 2, False, counts=ScanCounts(versions_deleted=3), duration_seconds=0.5,
                    swept_tables=swept_tables(versions={"t": 3})),
    FullSweepResult("t", "THOROUGH", None, 0, True, spark={"app_id": "a", "master": "m"}),
    ScrubReport(SCRUB, False, swept_tables(cells={"t": 2})),
    SweepSummary(pairs=2, by_status={"caught_up": 2}, iterations=3, counts=SweepCounts(entries_read=9)),
    TableTombstones("t", cells_tombstoned=2, versions_deleted=1),
], ids=lambda r: type(r).__name__)
def test_each_result_round_trips_through_its_xcom_json(result):
    assert from_json(type(result), json.loads(json.dumps(to_xcom(result)))) == result


def test_a_full_sweep_part_holds_only_the_keys_in_use():
    assert to_xcom(FullSweepPart("t", 5, parts=2)) == {"table": "t", "sweep_ts": 5, "parts": 2}


def test_a_full_sweep_result_is_flat_and_has_spark_only_in_spark_mode():
    data = to_xcom(FullSweepResult("t", "THOROUGH", 5, 2, False, counts=ScanCounts(cells_examined=4)))
    assert list(data) == ["table", "strategy", "sweep_ts", "ranges", "dry_run", "cells_examined",
                          "versions_examined", "versions_deleted", "sentinels_written", "transactions_aborted",
                          "duration_seconds", "swept_tables"]
    assert to_xcom(FullSweepResult("t", "T", 1, 1, True, spark={"app_id": "a"}))["spark"] == {"app_id": "a"}


def test_a_scrub_report_is_the_engine_result_then_dry_run_and_swept_tables():
    data = to_xcom(ScrubReport(SCRUB, True))
    assert list(data) == [*to_json(SCRUB), "dry_run", "swept_tables"] and data["dry_run"] is True


def test_a_summary_adds_the_pairs_runs_and_holds_the_totals_flat_at_the_end():
    summary = SweepSummary(pairs=3, failed_pairs=["THOROUGH/2"])
    run = ShardSweepResult(0, "THOROUGH", "caught_up", iterations=2, tables={"t": 4}, queue_rows_reconciled=1,
                           counts=SweepCounts(entries_read=5, cells_tombstoned=4), duration_seconds=0.5)
    summary.add(to_json(run))
    summary.add({"status": "skipped_locked", "shard": 1, "strategy": "THOROUGH"})
    data = to_xcom(summary)
    assert list(data) == ["pairs", "by_status", "tables", "reclaimed_queue_rows", "failed_pairs", "engine_seconds",
                          "iterations", *SweepCounts.names()]
    assert data["by_status"] == {"caught_up": 1, "skipped_locked": 1} and data["tables"] == {"t": 4}
    assert data["iterations"] == 2 and data["entries_read"] == 5 and data["cells_tombstoned"] == 4
    assert data["reclaimed_queue_rows"] == 1 and data["engine_seconds"] == 0.5


def test_sweep_timestamps_are_the_mapping_itself():
    assert to_xcom(SweepTimestamps({"CONSERVATIVE": 3, "THOROUGH": 4})) == {"CONSERVATIVE": 3, "THOROUGH": 4}


def test_the_asset_reports_are_read_from_the_swept_tables_of_any_nest_of_results():
    reports = [[{"swept_tables": swept_tables(cells={"a": 1}, versions={"a": 2, "b": 1})}], None]
    assert tombstones_by_table(reports) == {
        "a": {"tombstones": 3, "cells_tombstoned": 1, "versions_deleted": 2},
        "b": {"tombstones": 1, "cells_tombstoned": 0, "versions_deleted": 1},
    }
