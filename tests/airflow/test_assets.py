"""Per-table counts for asset events, and summing the events that trigger compaction."""
from __future__ import annotations

from types import SimpleNamespace

from airflow_atlas.airflow.assets import table_asset, tombstones_by_table, tombstones_from_events


def test_counts_from_sweep_full_sweep_and_scrub_reports():
    reports = [
        [{"shard": 0, "strategy": "THOROUGH", "result": {"status": "caught_up", "tables": {"a": 3, "b": 0}}}],
        [{"shard": 1, "strategy": "THOROUGH", "result": {"status": "caught_up", "tables": {"a": 2}}}],
        [{"shard": 2, "strategy": "THOROUGH", "result": {"status": "dry_run", "tables": {"a": 100}}}],
        {"table": "c", "versions_deleted": 5, "dry_run": False},
        {"table": "c", "versions_deleted": 7, "dry_run": True},
        {"tables": {"b": 4}, "entries_scrubbed": 4},
        None,
    ]
    counts = tombstones_by_table(reports)
    assert counts == {
        "a": {"tombstones": 5, "cells_tombstoned": 5, "versions_deleted": 0},
        "b": {"tombstones": 4, "cells_tombstoned": 4, "versions_deleted": 0},
        "c": {"tombstones": 5, "cells_tombstoned": 0, "versions_deleted": 5},
    }


def test_events_of_one_store_are_summed_per_table():
    ev = lambda **extra: SimpleNamespace(extra=extra)  # noqa: E731 - the shape of an AssetEvent
    events = {
        table_asset("s1", "a"): [ev(store_conn_id="s1", table="a", tombstones=3), ev(store_conn_id="s1", table="a", tombstones=4)],
        table_asset("s2", "a"): [ev(store_conn_id="s2", table="a", tombstones=100)],
        table_asset("s1", "b"): [ev(store_conn_id="s1", table="b", tombstones=1), ev()],
    }
    assert tombstones_from_events(events, "s1") == {"a": 7, "b": 1}
    assert tombstones_from_events(None, "s1") == {}


def test_table_asset_uri():
    asset = table_asset("atlas_default", "orders")
    assert asset.uri == "atlas://atlas_default/orders" and asset.group == "atlas"
