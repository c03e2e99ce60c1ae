"""The compaction policy of the engine (airflow_atlas.compaction): counting, what is due, the guard's
refusals, the result. The backend is a test double passed as the ``Compactor`` argument."""
from __future__ import annotations

import pytest

from airflow_atlas.compaction import (
    CompactionResult,
    GuardVerdict,
    TableCompaction,
    add_tombstones,
    check_method,
    compact_due_tables,
    due_tables,
)
from airflow_atlas.errors import InvalidInputError

KNOWN = {"a": "THOROUGH", "b": "THOROUGH", "c": "CONSERVATIVE"}


class RecordingCompactor:
    method = "compact"

    def __init__(self, refuse=()):
        self.refuse = set(refuse)
        self.compacted: list[list[str]] = []

    def guard(self, table):
        if table in self.refuse:
            return GuardVerdict(False, f"{table}: no complete repair in the window")
        return GuardVerdict(True, "repaired")

    def compact(self, tables):
        self.compacted.append(list(tables))
        return {t: TableCompaction(space_before_bytes=100, space_after_bytes=10, reclaimed_bytes=90,
                                   duration_seconds=0.1, runner="test", sstables_before=3, sstables_after=1)
                for t in tables}


def test_add_tombstones_counts_existing_tables_and_reports_the_others():
    counts, ignored = add_tombstones({"a": 5}, {"a": 10, "b": 1, "gone": 7}, KNOWN)
    assert counts == {"a": 15, "b": 1}
    assert ignored == {"gone": 7}


def test_due_tables_threshold_force_and_the_tables_asked_for():
    pending = {"a": 100, "b": 99, "dropped": 500}
    assert due_tables(pending, KNOWN, threshold=100) == ["a"]
    assert due_tables(pending, KNOWN, threshold=0) == ["a", "b"]  # threshold at least 1; dropped tables never
    assert due_tables({"a": 0}, KNOWN, threshold=0) == []
    assert due_tables(pending, KNOWN, threshold=100, force=True) == ["a", "b"]
    assert due_tables(pending, KNOWN, threshold=100, tables=["c"], force=True) == ["c"]
    with pytest.raises(InvalidInputError, match="unknown table.*nope"):
        due_tables(pending, KNOWN, threshold=1, tables=["a", "nope"])


def test_the_guard_keeps_the_count_of_a_refused_table_and_says_why():
    compactor = RecordingCompactor(refuse={"b"})
    result = compact_due_tables(compactor, {"a": 200, "b": 300, "c": 5}, KNOWN, threshold=100, store_conn_id="x")
    assert compactor.compacted == [["a"]]
    assert isinstance(result, CompactionResult)
    assert set(result.compacted) == {"a"}
    assert result.skipped == {"b": "b: no complete repair in the window"}
    assert result.pending == {"a": 0, "b": 300, "c": 5}
    assert result.to_json() == {
        "store_conn_id": "x", "threshold": 100, "method": "compact",
        "compacted": {"a": {"space_before_bytes": 100, "space_after_bytes": 10, "reclaimed_bytes": 90,
                            "duration_seconds": 0.1, "runner": "test", "sstables_before": 3, "sstables_after": 1}},
        "skipped": {"b": "b: no complete repair in the window"}, "pending": {"a": 0, "b": 300, "c": 5},
    }


def test_nothing_due_compacts_nothing():
    compactor = RecordingCompactor()
    result = compact_due_tables(compactor, {"a": 1}, KNOWN, threshold=100)
    assert compactor.compacted == [] and result.compacted == {} and result.pending == {"a": 1}


def test_a_forced_table_without_a_count_is_reported_at_zero():
    result = compact_due_tables(RecordingCompactor(), {}, KNOWN, threshold=100, tables=["c"], force=True)
    assert result.pending == {"c": 0} and set(result.compacted) == {"c"}


def test_method():
    assert check_method("garbagecollect") == "garbagecollect"
    with pytest.raises(InvalidInputError, match="compact or garbagecollect"):
        check_method("shrink")
