"""``airflow_atlas.serialisation``: the one JSON form of the results - the mechanism's rules, then each
engine result type's round trip and, where another process reads it, its exact keys."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated

import pytest

from airflow_atlas.compaction import CompactionResult, TableCompaction
from airflow_atlas.serialisation import OMIT_NONE, flatten, from_json, to_json
from airflow_atlas.spark.document import ItemResult, JobDocument
from airflow_atlas.sweep.counts import ScanCounts, SweepCounts
from airflow_atlas.sweep.legacy import LegacySweepResult
from airflow_atlas.sweep.results import ShardSweepResult, SweepResult
from airflow_atlas.sweep.scrub import ScrubResult
from airflow_atlas.verify import CheckResult, Finding, VerifyReport
from airflow_atlas.workload import WorkloadReport


@dataclass(frozen=True)
class Inner:
    a: int = 0
    b: int = 0


@dataclass
class Outer:
    name: str
    rate: float = 0.0
    note: str | None = None
    inner: Inner = field(default_factory=Inner)
    hidden: Annotated[int | None, OMIT_NONE] = None
    tags: dict = field(default_factory=dict)


@dataclass
class Flat:
    name: str
    inner: Inner = field(default_factory=Inner)
    after: int = 0

    _dump, _load = flatten("inner", Inner)


def test_fields_in_order_none_kept_values_as_they_are():
    data = to_json(Outer("x", rate=250, inner=Inner(1, 2), tags={"t": (1, 2)}))
    assert list(data) == ["name", "rate", "note", "inner", "tags"]  # hidden: None, left out
    assert data["rate"] == 250 and isinstance(data["rate"], int)  # an int in a float field stays an int
    assert data["note"] is None and data["inner"] == {"a": 1, "b": 2} and data["tags"] == {"t": (1, 2)}
    assert to_json(Outer("x", hidden=3))["hidden"] == 3


def test_from_json_builds_nested_dataclasses_and_ignores_other_keys():
    value = Outer("x", rate=1.5, inner=Inner(1, 2), hidden=4)
    assert from_json(Outer, to_json(value)) == value
    assert from_json(Outer, {"name": "y", "inner": {"a": 3}, "unknown": 1}) == Outer("y", inner=Inner(3, 0))


def test_a_flattened_field_is_written_in_place_and_gathered_back():
    value = Flat("x", Inner(1, 2), after=3)
    assert list(to_json(value).items()) == [("name", "x"), ("a", 1), ("b", 2), ("after", 3)]
    assert from_json(Flat, to_json(value)) == value
    assert from_json(Flat, {"name": "x", "b": 5}) == Flat("x", Inner(0, 5))  # a missing counter: its default


def test_only_dataclass_instances_are_serialised():
    for value in ({"a": 1}, Outer):
        with pytest.raises(TypeError, match="dataclass instance"):
            to_json(value)


# ----- the engine's results -------------------------------------------------------------------------------------
def _iteration() -> SweepResult:
    return SweepResult(3, "THOROUGH", "swept", sweep_ts=9, old_progress=1, new_progress=5, tables={"t": 2},
                       counts=SweepCounts(entries_read=4, cells_tombstoned=2, corrupt_entries=1),
                       blocked_by={"start_ts": 1, "commit_ts": 2}, pace_entries_per_second=250)


def _run() -> ShardSweepResult:
    run = ShardSweepResult(3, "THOROUGH", "caught_up", max_entries_per_second=250, lag=0, backlog=0,
                           lag_seconds=0.0, queue_rows_reconciled=2)
    run.add(_iteration())
    run.add(_iteration())
    return run


RUN_KEYS = [
    "shard", "strategy", "status", "sweep_ts", "old_progress", "new_progress", "entries_read", "cells_tombstoned",
    "sentinels_written", "aborted_writes_deleted", "transactions_aborted", "queue_rows_cleaned",
    "entries_skipped_dropped_tables", "corrupt_entries", "blocked_by", "lock_holder", "duration_seconds", "tables",
    "pace_entries_per_second", "iterations", "error", "max_entries_per_second", "seconds_paced", "latency_target",
    "pace_reason", "pace_backoffs", "lock_expires_at", "lock_holder_process_gone", "lag", "backlog", "lag_seconds",
    "queue_rows_reconciled",
]
"""A run's JSON keys in their order: what the sweep history rows, XCom and the Spark document hold."""


def test_a_run_is_flat_json_with_its_summed_counts():
    data = to_json(_run())
    assert list(data) == RUN_KEYS
    assert data["entries_read"] == 8 and data["cells_tombstoned"] == 4 and data["iterations"] == 2
    assert data["tables"] == {"t": 4} and data["blocked_by"] == {"start_ts": 1, "commit_ts": 2}
    assert list(to_json(_iteration())) == RUN_KEYS[:RUN_KEYS.index("iterations")]


LEGACY = LegacySweepResult("t", "CONSERVATIVE", 5, scan_range=["token", -1, 5], last_row="ab", finished=True,
                           counts=ScanCounts(cells_examined=4, versions_examined=7, versions_deleted=3))


@pytest.mark.parametrize("result", [
    _iteration(),
    _run(),
    ShardSweepResult(0, "CONSERVATIVE", "failed", error="StoreUnavailableError: down"),
    LEGACY,
    ScrubResult(immutable_ts=7, entries_seen=3, entries_scrubbed=2, cells_tombstoned=2, tables={"t": 2}),
    VerifyReport(False, "sqlite:///s.db", 2, {"THOROUGH": 4}, {"max_examples": 5},
                 {"c": CheckResult(False, 2, {"i": 1})}, [Finding("c", "kind", "detail", "action")]),
    CompactionResult(10, "nodetool", compacted={
        "t": TableCompaction(1, 2, 3, 0.5, "nodetool", sstables_before=3, sstables_after=1, nodes={"n": {"a": 1}}),
        "u": TableCompaction(None, None, 0, 0.1, "vacuum", file_before_bytes=10, file_after_bytes=5),
    }, skipped={"v": "why"}, pending={"t": 0}, store_conn_id="c"),
], ids=lambda r: type(r).__name__)
def test_each_result_type_round_trips_through_json_text(result):
    text = json.dumps(to_json(result))
    assert from_json(type(result), json.loads(text)) == result


def test_legacy_counts_are_flat_and_a_compaction_report_has_its_backends_fields_only():
    assert list(to_json(LEGACY))[3:9] == ["scan_range", "cells_examined", "versions_examined", "versions_deleted",
                                          "sentinels_written", "transactions_aborted"]
    vacuum = to_json(TableCompaction(None, None, 0, 0.1, "vacuum", file_before_bytes=10, file_after_bytes=5))
    assert "sstables_before" not in vacuum and "nodes" not in vacuum and vacuum["file_after_bytes"] == 5
    assert list(to_json(CompactionResult(1, "m")))[0] == "store_conn_id"


def test_a_workload_report_lists_its_open_transactions_by_start_timestamp():
    class Open:
        start_timestamp = 17

    report = WorkloadReport(committed=3, writes=4, open=[Open()])
    assert to_json(report) == {"committed": 3, "dead_writers": 0, "aborted": 0, "conflicts": 0, "writes": 4,
                               "deletes": 0, "open": [17]}


def test_a_job_document_is_flat_and_reads_back():
    run = to_json(_run())
    doc = JobDocument(
        job="targeted_sweep", ok=False, store="sqlite:///x", app_id="app", params={"pairs": ["3:THOROUGH"]},
        summary={"tasks": 2}, failed=[{"shard": 4}],
        results=[
            ItemResult(item={"shard": 3, "strategy": "THOROUGH"}, status="caught_up", attempt=1,
                       engine={k: v for k, v in run.items() if k not in ("shard", "strategy")}, partition=0),
            ItemResult(item={"shard": 4, "strategy": "THOROUGH"}, status="failed", error_type="X", error="bad"),
        ],
    )
    data = json.loads(json.dumps(to_json(doc)))
    assert data["pairs"] == ["3:THOROUGH"] and "params" not in data and data["version"] == 1
    assert data["results"][0]["entries_read"] == 8 and data["results"][0]["shard"] == 3
    assert data["results"][1] == {"shard": 4, "strategy": "THOROUGH", "status": "failed", "attempt": 0,
                                  "partition": None, "task_seconds": None, "executor": None, "error_type": "X",
                                  "error": "bad", "retriable": None}
    back = from_json(JobDocument, data)
    assert back.params == doc.params and back.results[0].item == doc.results[0].item and back.results[1] == doc.results[1]
    assert to_json(back) == data  # what the glue reads is what the driver wrote
