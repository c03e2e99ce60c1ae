"""``atlas-sweep status`` (the real command, on an embedded store) shows per table the tombstones since its
last compaction - what ``atlas_compaction`` plans from - restarting at 0 after a compaction, and says what
its drain forecast does not know before any sweep (issue 32 items 3 and 12). The counts on the real
Cassandra node: tests/integration/sweep/test_compaction_counts.py; the dashboard: tests/airflow/."""
from __future__ import annotations

from airflow_atlas.compaction import VacuumCompactor, compact_due_tables, tombstones_since_compaction
from airflow_atlas.config import StoreConfig
from airflow_atlas.store import AtlasStore


def test_status_shows_tombstones_since_compaction_and_what_the_forecast_does_not_know(sqlite_cli):
    sqlite_cli.ok("init", "--shards", "1")
    sqlite_cli.ok("workload", "-n", "40", "--seed", "5")

    fresh = sqlite_cli.json("status")
    waiting = [r for r in fresh["shards"] if r["backlog_entries"]]
    assert waiting, "the workload queued nothing"
    for r in waiting:
        assert r["forecast"]["time_to_drain_seconds"] is None
        assert r["forecast"]["unknown"] == "no sweep run yet: no sweep rate measured, so no time to drain"
    text = sqlite_cli.ok("status").stdout
    assert "unknown for shard 0 CONSERVATIVE, shard 0 THOROUGH: no sweep run yet: no sweep rate measured" in text
    assert all(c["tombstones_since_compaction"] == 0 and c["last_compaction_at"] is None for c in fresh["compaction"])
    assert fresh["settings"]["compaction_threshold_tombstones"] is None  # the Variable is not read without --conn-id
    assert "threshold unknown here" in text

    sqlite_cli.ok("sweep")
    swept = sqlite_cli.json("status")
    with AtlasStore.open(sqlite_cli.url, StoreConfig(unreadable_window_seconds=0)) as store:
        counts = tombstones_since_compaction(store, sorted(store.user_tables()))
        shown = {c["table"]: c["tombstones_since_compaction"] for c in swept["compaction"]}
        assert shown == {t: c.count for t, c in counts.items()} and sum(shown.values()) > 0
        assert all(c["due"] is None and c["threshold_tombstones"] is None for c in swept["compaction"])
        compact_due_tables(store, VacuumCompactor(store.kvs), threshold=1)  # what atlas_compaction does
    compacted = sqlite_cli.json("status")
    for c in compacted["compaction"]:
        assert c["tombstones_since_compaction"] == 0, c
        assert (c["last_compaction_method"] == "vacuum") == (shown[c["table"]] > 0), c
    assert sum(r["tombstones_written"] for r in compacted["shards"]) > 0  # recent history: already compacted ones
    text = sqlite_cli.ok("status").stdout
    section = text.split("Compaction: tombstones since each table's last compaction", 1)[1]
    assert any(line.split()[2:4] == ["0", "unknown"] and "vacuum" in line for line in section.splitlines())
