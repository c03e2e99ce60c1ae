"""The real ``atlas-sweep`` against the local Cassandra node: the whole operator loop in one keyspace
(creating the store's tables dominates the runtime, so it is done once)."""
from __future__ import annotations

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.store import AtlasStore
from tests.conftest import CASSANDRA_HOST, CASSANDRA_PORT

from .conftest import Cli
from .helpers import queued_entries

pytestmark = pytest.mark.cassandra


def test_operator_loop_on_cassandra(cassandra_node, fresh_keyspace, tmp_path):
    url = f"cassandra://{CASSANDRA_HOST}:{CASSANDRA_PORT}/{fresh_keyspace}"
    cli = Cli(url, tmp_path, ("unreadable_window_seconds=0",))
    assert "2 shard(s)" in cli.ok("init", "--shards", "2").stdout
    report = cli.json("workload", "-n", "20", "--seed", "11")
    assert report["committed"] > 10

    before = cli.json("status")
    assert before["store"].startswith(f"cassandra keyspace {fresh_keyspace}")
    store = AtlasStore.open(url, StoreConfig(unreadable_window_seconds=0))
    try:
        for row in before["shards"]:
            assert row["progress"] == store.queue.progress.get_progress(row["shard"], row["strategy"]) == -1
            assert row["backlog_entries"] == queued_entries(store, row["shard"], row["strategy"])
        assert sum(r["backlog_entries"] for r in before["shards"]) > 0

        swept = cli.json("sweep")
        assert swept["failures"] == [] and {r["status"] for r in swept["results"]} == {"caught_up"}
        after = cli.json("status")
        for old, new in zip(before["shards"], after["shards"]):
            assert new["progress"] > old["progress"]
            assert new["progress"] == store.queue.progress.get_progress(new["shard"], new["strategy"])
            assert new["backlog_entries"] == 0
            assert new["last_run"]["outcome"] == "ok"
        assert "obsolete_versions: 0 problem(s)" in cli.ok("verify").stdout

        assert "from 2 to 3" in cli.ok("shards", "--raise-to", "3").stdout
        refused = cli.run("shards", "--raise-to", "1")
        assert refused.returncode == 2 and "cannot lower the shard count from 3 to 1" in refused.stderr

        # An open transaction (left open by a workload process; its lease outlives this test) holds the
        # sweep timestamp back, and the writes committed after it are pinned.
        opened = cli.json("workload", "-n", "0", "--open-transactions", "1")
        start = opened["open"][0]
        cli.ok("workload", "-n", "10", "--seed", "12", "--table", "demo_thorough:THOROUGH")
        held = cli.json("status", "--strategy", "THOROUGH")
        why = held["why_not_advancing"]["THOROUGH"]
        assert why["limited_by"] == "open_transaction" and why["sweep_ts"] == start
        assert why["held_by"]["start_ts"] == start and why["held_by"]["holder"]
        pinned = sum(queued_entries(store, shard, "THOROUGH", start - 1) for shard in range(3))
        assert why["pinned_entries"] == pinned > 0
        assert str(start) in why["message"]
        assert sum(p["entries"] for p in why["pinned_by_shard"]) == pinned
    finally:
        store.close()
