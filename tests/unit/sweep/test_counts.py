"""``sweep/counts.py``: counts add up field by field, from a zero, and are read from a result's JSON."""
from __future__ import annotations

import dataclasses

import pytest

from airflow_atlas.sweep.counts import ScanCounts, SweepCounts


def test_counts_add_field_by_field_and_the_zero_changes_nothing():
    a = SweepCounts(entries_read=3, cells_tombstoned=2, corrupt_entries=1)
    b = SweepCounts(entries_read=4, queue_rows_cleaned=5)
    assert a + b == SweepCounts(entries_read=7, cells_tombstoned=2, queue_rows_cleaned=5, corrupt_entries=1)
    assert a + SweepCounts() == a == SweepCounts() + a
    assert sum([a, b, a], SweepCounts()) == a + a + b
    assert ScanCounts(versions_deleted=2) + ScanCounts(versions_deleted=3, cells_examined=1) == ScanCounts(
        cells_examined=1, versions_deleted=5)


def test_counts_of_two_kinds_do_not_add_and_counts_are_values():
    with pytest.raises(TypeError):
        SweepCounts(entries_read=1) + ScanCounts(cells_examined=1)  # type: ignore[operator]
    with pytest.raises(dataclasses.FrozenInstanceError):
        SweepCounts().entries_read = 1  # type: ignore[misc]


def test_counts_are_read_from_a_results_json_by_their_names():
    assert SweepCounts.names() == (
        "entries_read", "cells_tombstoned", "sentinels_written", "aborted_writes_deleted", "transactions_aborted",
        "queue_rows_cleaned", "entries_skipped_dropped_tables", "corrupt_entries")
    assert ScanCounts.names() == (
        "cells_examined", "versions_examined", "versions_deleted", "sentinels_written", "transactions_aborted")
    row = {"status": "caught_up", "entries_read": 5, "cells_tombstoned": None, "iterations": 2}
    assert SweepCounts.of(row) == SweepCounts(entries_read=5)  # None and missing: 0; other keys ignored
    assert ScanCounts.of(None) == ScanCounts()
