"""The status document's compaction part (airflow_atlas/status/compaction.py), pure: per table the tombstones
since its last compaction as the store holds them, that compaction, the threshold and whether the table is
due by the compaction policy's own rule; the threshold among effective settings. The store's side (sweep,
count, compact, count again) is tests/integration/sweep/test_compaction_counts.py."""
from __future__ import annotations

import dataclasses

from airflow_atlas.settings_resolver import SettingValue
from airflow_atlas.status.compaction import THRESHOLD_SETTING, compaction_state, threshold_of
from airflow_atlas.sweep.history import TableTombstones

NOW = 1_700_000_000.0


def test_a_never_compacted_table_counts_every_tombstone_and_is_due_at_the_threshold():
    counts = TableTombstones(table="t", count=250, since_ts=0, records=3)
    row = compaction_state(counts, "THOROUGH", 250, NOW)
    assert (row.tombstones_since_compaction, row.capped, row.due) == (250, False, True)
    assert row.last_compaction_at is None and row.last_compaction_age_seconds is None
    assert row.last_compaction_through_ts == 0 and row.last_compaction_method is None
    assert compaction_state(counts, "THOROUGH", 251, NOW).due is False
    assert compaction_state(counts, "THOROUGH", 0, NOW).due is True  # threshold 0 acts as 1, as the policy does
    assert compaction_state(TableTombstones("t", 0, 0, 0), "THOROUGH", 0, NOW).due is False


def test_the_last_compaction_is_shown_and_a_capped_count_is_due():
    last = {"through_ts": 777, "at": NOW - 90.0, "method": "compact", "holder": "h"}
    row = compaction_state(TableTombstones("t", 12, 777, 2, capped=False, last_compaction=last), "CONSERVATIVE", 100, NOW)
    assert (row.tombstones_since_compaction, row.last_compaction_through_ts) == (12, 777)
    assert row.last_compaction_at == NOW - 90.0 and row.last_compaction_age_seconds == 90.0
    assert row.last_compaction_method == "compact" and row.due is False
    capped = compaction_state(TableTombstones("t", 10_000, 777, 10_000, capped=True, last_compaction=last), "THOROUGH",
                              10**9, NOW)
    assert capped.capped is True and capped.due is True


def test_without_a_threshold_nothing_is_claimed_due():
    row = compaction_state(TableTombstones("t", 10**6, 0, 5), "THOROUGH", None, NOW)
    assert row.threshold_tombstones is None and row.due is None


def test_the_threshold_comes_from_the_effective_settings():
    values = [SettingValue("shard_count", "engine", 4, "default"), SettingValue(THRESHOLD_SETTING, "Airflow", 5000, "x")]
    assert threshold_of(values) == 5000
    assert threshold_of([dataclasses.asdict(v) for v in values]) == 5000  # the document's JSON form too
    assert threshold_of(values[:1]) is None and threshold_of([]) is None


def test_the_setting_name_is_the_airflow_settings_one():
    from airflow_atlas.airflow.settings import AtlasSettings

    assert THRESHOLD_SETTING in {f.name for f in dataclasses.fields(AtlasSettings)}
