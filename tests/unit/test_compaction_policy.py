"""The compaction policy of the engine (airflow_atlas.compaction): what is due, the guard's refusals, the
result. The counts come from a real embedded store (its sweep history); the backend is a test double passed
as the ``Compactor`` argument. Counting from real sweeps, on both stores: tests/integration/sweep/
test_compaction_counts.py."""
from __future__ import annotations

import pytest

from airflow_atlas.compaction import (
    CompactionResult,
    GuardVerdict,
    TableCompaction,
    check_method,
    compact_due_tables,
    due_tables,
)
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.serialisation import to_json

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


@pytest.fixture
def store(tmp_path):
    from airflow_atlas.store import AtlasStore

    store = AtlasStore.open(f"sqlite:///{tmp_path / 'atlas.db'}")
    store.initialize()
    for table in KNOWN:
        store.create_table(table, "THOROUGH")
    yield store
    store.close()


def _counted(store, counts):
    """Record ``{table: n}`` as one sweep step would."""
    store.history.record_tombstones(counts, store.timestamps.fresh_timestamp(), {"source": "test"})


def test_due_tables_threshold_force_and_the_tables_asked_for():
    pending = {"a": 100, "b": 99, "dropped": 500}
    assert due_tables(pending, KNOWN, threshold=100) == ["a"]
    assert due_tables(pending, KNOWN, threshold=0) == ["a", "b"]  # threshold at least 1; dropped tables never
    assert due_tables({"a": 0}, KNOWN, threshold=0) == []
    assert due_tables(pending, KNOWN, threshold=100, force=True) == ["a", "b"]
    assert due_tables(pending, KNOWN, threshold=100, tables=["c"], force=True) == ["c"]
    with pytest.raises(InvalidInputError, match="unknown table.*nope"):
        due_tables(pending, KNOWN, threshold=1, tables=["a", "nope"])


def test_the_guard_keeps_the_count_of_a_refused_table_and_says_why(store):
    compactor = RecordingCompactor(refuse={"b"})
    _counted(store, {"a": 200, "b": 300, "c": 5})
    result = compact_due_tables(store, compactor, threshold=100, store_conn_id="x")
    assert compactor.compacted == [["a"]]
    assert isinstance(result, CompactionResult)
    assert set(result.compacted) == {"a"}
    assert result.skipped == {"b": "b: no complete repair in the window"}
    assert result.pending == {"a": 0, "b": 300, "c": 5}
    assert to_json(result) == {
        "store_conn_id": "x", "threshold": 100, "method": "compact",
        "compacted": {"a": {"space_before_bytes": 100, "space_after_bytes": 10, "reclaimed_bytes": 90,
                            "duration_seconds": 0.1, "runner": "test", "sstables_before": 3, "sstables_after": 1}},
        "skipped": {"b": "b: no complete repair in the window"}, "pending": {"a": 0, "b": 300, "c": 5},
    }
    again = compact_due_tables(store, RecordingCompactor(), threshold=100)  # the refused table, next run
    assert set(again.compacted) == {"b"} and again.pending == {"b": 0, "c": 5}


def test_nothing_due_compacts_nothing(store):
    compactor = RecordingCompactor()
    _counted(store, {"a": 1})
    result = compact_due_tables(store, compactor, threshold=100)
    assert compactor.compacted == [] and result.compacted == {} and result.pending == {"a": 1}


def test_a_forced_table_without_a_count_is_reported_at_zero(store):
    result = compact_due_tables(store, RecordingCompactor(), threshold=100, tables=["c"], force=True)
    assert result.pending == {"c": 0} and set(result.compacted) == {"c"}


def test_force_without_tables_compacts_every_table_with_a_tombstone(store):
    _counted(store, {"a": 1})
    compactor = RecordingCompactor()
    result = compact_due_tables(store, compactor, threshold=100, force=True)
    assert compactor.compacted == [["a"]] and result.pending == {"a": 0}


def test_unknown_tables_are_bad_input(store):
    with pytest.raises(InvalidInputError, match="unknown table"):
        compact_due_tables(store, RecordingCompactor(), threshold=1, tables=["nope"])


def test_a_capped_count_is_due(store, monkeypatch):
    from airflow_atlas.sweep import history

    for _ in range(3):
        _counted(store, {"a": 1})
    capped = store.history.tombstones_since_compaction("a", cap=2)
    assert capped.capped and capped.count == 2 and capped.records == 2
    assert not store.history.tombstones_since_compaction("a").capped
    monkeypatch.setattr(history, "TOMBSTONE_READ_CAP", 2)
    compactor = RecordingCompactor()
    result = compact_due_tables(store, compactor, threshold=1000)
    assert compactor.compacted == [["a"]], result


def test_method():
    assert check_method("garbagecollect") == "garbagecollect"
    with pytest.raises(InvalidInputError, match="compact or garbagecollect"):
        check_method("shrink")
