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
        for old, new in zip(before["shards"], after["shards"], strict=True):
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


def _tables(session, keyspace: str) -> list[str]:
    rows = session.execute("SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,))
    return sorted(r.table_name for r in rows)


def _keyspace_exists(session, keyspace: str) -> bool:
    rows = session.execute("SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = %s", (keyspace,))
    return bool(list(rows))


def test_commands_create_nothing_in_cassandra(cassandra_node, cassandra_session, fresh_keyspace, tmp_path):
    """16.4 on the node: an empty keyspace gets no atlas_metadata, a missing keyspace is not created; 16.8:
    credentials with an unescaped slash reach the node as credentials and are never echoed."""
    base = f"{CASSANDRA_HOST}:{CASSANDRA_PORT}"
    empty = Cli(f"cassandra://{base}/{fresh_keyspace}", tmp_path)
    for command in ("status", "sweep", "verify", "shards", "workload"):
        result = empty.run(command)
        assert result.returncode == 2, (command, result.stderr)
        assert "holds no Atlas store" in result.stderr and "run 'atlas-sweep init' first" in result.stderr
    assert _tables(cassandra_session, fresh_keyspace) == []

    missing = f"atlas_missing_{fresh_keyspace[-8:]}"
    secret = "S3cretPW"
    absent = Cli(f"cassandra://sweeper:pa/{secret}@{base}/{missing}", tmp_path)
    for command in ("status", "shards"):
        result = absent.run(command)
        assert result.returncode == 2, (command, result.stderr)
        assert f"keyspace {missing!r} does not exist" in result.stderr
        assert secret not in result.stderr + result.stdout and "pa/" not in result.stderr
        assert "sweeper:***@" in result.stderr
    assert not _keyspace_exists(cassandra_session, missing)


def test_init_validation_failed_runs_and_dead_holders_on_cassandra(cassandra_node, fresh_keyspace, tmp_path):
    """16.5, 16.9 and 16.10 on the node, in one keyspace (creating the store's tables dominates the runtime)."""
    url = f"cassandra://{CASSANDRA_HOST}:{CASSANDRA_PORT}/{fresh_keyspace}"
    cli = Cli(url, tmp_path, ("unreadable_window_seconds=0",))
    cli.ok("init", "--shards", "4", "--table", "demo_conservative:CONSERVATIVE")
    refused = cli.run("init", "--shards", "16", "--table", "newtab:THOROUGH", "--table", "demo_conservative:THOROUGH")
    assert refused.returncode == 2 and "nothing was changed" in refused.stderr, refused.stderr
    assert cli.json("shards")["number_of_shards"] == 4
    assert cli.json("status", "--shard", "0")["tables"] == {"demo_conservative": "CONSERVATIVE"}

    from .test_sweep_runs import corrupt_commit_entry, kill_a_sweeper_holding

    cli.ok("workload", "-n", "20", "--seed", "2")
    store = AtlasStore.open(url, StoreConfig(unreadable_window_seconds=0))
    try:
        start, cell = corrupt_commit_entry(store, "demo_thorough")
    finally:
        store.close()
    swept = cli.run("sweep")
    assert swept.returncode == 1, swept.stdout + swept.stderr
    assert f"start timestamp {start}" in swept.stderr and cell.row.hex() in swept.stderr
    status = cli.json("status")
    failing = [r for r in status["shards"] if r["failing"]]
    assert len(failing) == 1 and failing[0]["strategy"] == "THOROUGH"
    assert f"start timestamp {start}" in failing[0]["last_run"]["error"]
    assert all(r["last_run"]["outcome"] == "ok" for r in status["shards"] if not r["failing"])

    holder = kill_a_sweeper_holding(url)
    run = cli.run("sweep", "--shard", "0", "--strategy", "THOROUGH")
    assert run.returncode == 4, run.stdout + run.stderr
    assert f"skipped, locked by {holder}" in run.stdout and "its process is gone" in run.stdout
    row = cli.json("status", "--shard", "0", "--strategy", "THOROUGH")["shards"][0]
    assert row["lock_holder"] == holder and row["lock_holder_process_gone"] is True and row["lock_expires_in_seconds"] > 500


def test_status_shows_gc_grace_against_the_repair_interval(cassandra_node, cassandra_session, fresh_keyspace, tmp_path):
    """AGREED #1 / issue 13: each swept table's live gc_grace_seconds against repair_interval_seconds, with a
    warning when below (here: lowered out of band, as an operator's ALTER TABLE would)."""
    from airflow_atlas.kvs.cassandra import physical_table_name

    url = f"cassandra://{CASSANDRA_HOST}:{CASSANDRA_PORT}/{fresh_keyspace}"
    cli = Cli(url, tmp_path)
    cli.ok("init", "--table", "orders:THOROUGH", "--table", "audit:NOTHING")
    first = cli.json("status")
    assert [(g["table"], g["gc_grace_seconds"], g["below_repair_interval"]) for g in first["gc_grace"]] == [
        ("orders", 864000, False)
    ]  # a NOTHING table is not swept: not listed
    assert first["gc_grace"][0]["repair_interval_seconds"] == 864000 and first["table_warnings"] == []

    cassandra_session.execute(f'ALTER TABLE "{fresh_keyspace}"."{physical_table_name("orders")}" WITH gc_grace_seconds = 3600')
    second = cli.json("status")
    (row,) = second["gc_grace"]
    assert row["gc_grace_seconds"] == 3600 and row["below_repair_interval"] is True
    (warning,) = second["table_warnings"]
    assert warning["table"] == "orders" and warning["kind"] == "gc_grace_below_repair_interval"
    assert "gc_grace_seconds=3600" in warning["message"] and "repair_interval_seconds=864000" in warning["message"]
    text = cli.ok("status").stdout
    assert "BELOW THE REPAIR INTERVAL" in text and "table orders: " in text

    # A repair interval that really is shorter (the engine setting, or the URL's) clears the warning.
    relaxed = Cli(url, tmp_path, ("repair_interval_seconds=3600",)).json("status")
    assert relaxed["gc_grace"][0]["repair_interval_seconds"] == 3600 and relaxed["table_warnings"] == []
    by_url = Cli(url + "?repair_interval_seconds=1800", tmp_path).json("status")
    assert by_url["gc_grace"][0]["repair_interval_seconds"] == 1800 and by_url["table_warnings"] == []
