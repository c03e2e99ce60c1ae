"""The real ``atlas-sweep`` against an embedded (SQLite) store, as a script would drive it."""
from __future__ import annotations

import json

from airflow_atlas.config import StoreConfig
from airflow_atlas.store import AtlasStore

from .helpers import queued_entries

STRATEGIES = ("CONSERVATIVE", "THOROUGH")


def _open(cli) -> AtlasStore:
    return AtlasStore.open(cli.url, StoreConfig(unreadable_window_seconds=0))


def test_init_workload_status_sweep_verify(sqlite_cli):
    init = sqlite_cli.ok("init", "--shards", "2")
    assert "2 shard(s)" in init.stdout

    report = sqlite_cli.json("workload", "-n", "150", "--seed", "5", "--writes-per-transaction", "1-6")
    assert report["committed"] > 100 and report["writes"] > 150 and report["open"] == []

    before = sqlite_cli.json("status")
    assert before["schema_version"] == 1 and before["number_of_shards"] == 2
    assert [(r["shard"], r["strategy"]) for r in before["shards"]] == [(s, t) for s in (0, 1) for t in STRATEGIES]
    with _open(sqlite_cli) as store:
        for row in before["shards"]:
            shard, strategy = row["shard"], row["strategy"]
            assert row["progress"] == store.queue.progress.get_progress(shard, strategy) == -1
            assert row["backlog_entries"] == queued_entries(store, shard, strategy) > 0
            assert row["sweepable_entries"] == queued_entries(store, shard, strategy, -1, row["sweep_ts"])
            assert row["backlog_entries"] == row["sweepable_entries"] + row["pinned_entries"]
            assert row["last_run"] is None and row["lock_holder"] is None
    assert before["why_not_advancing"]["THOROUGH"]["limited_by"] == "none"

    swept = sqlite_cli.json("sweep")
    assert swept["failures"] == []
    assert {r["status"] for r in swept["results"]} == {"caught_up"}
    assert swept["totals"]["entries_read"] == sum(r["backlog_entries"] for r in before["shards"])

    after = sqlite_cli.json("status")
    for old, new in zip(before["shards"], after["shards"], strict=True):
        assert new["progress"] > old["progress"]
        assert new["backlog_entries"] == 0 and new["sweepable_entries"] == 0
        assert new["last_run"]["status"] == "caught_up" and new["last_run"]["outcome"] == "ok"
        assert new["forecast"]["state"] == "drained" and new["forecast"]["time_to_drain_seconds"] == 0
        assert new["lag_series"] and new["lag_series"][-1]["progress"] == new["progress"]
    assert sum(r["tombstones_written"] for r in after["shards"]) == swept["totals"]["cells_tombstoned"] > 0
    assert after["warnings"] == []

    verify = sqlite_cli.ok("verify")
    assert "obsolete_versions: 0 problem(s)" in verify.stdout

    text = sqlite_cli.ok("status").stdout
    assert "Why the sweep timestamp is not advancing" in text and "Backlog drain forecast" in text
    assert "SWEEP_TS" in text and "BACKLOG" in text


def test_verify_fails_when_progress_skipped_work(sqlite_cli):
    sqlite_cli.ok("init")
    sqlite_cli.ok("workload", "-n", "40", "--table", "t:THOROUGH", "--dead-writer-ratio", "0", "--abort-ratio", "0")
    with _open(sqlite_cli) as store:
        # Persist progress past whole fine partitions (50,000 timestamps each) without sweeping or
        # cleaning them: exactly what verify exists to catch.
        store.queue.progress.update_progress(0, "THOROUGH", 1_000_000)
    result = sqlite_cli.run("verify")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "verification failed" in result.stderr and "queue rows below progress" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    report = json.loads(sqlite_cli.run("verify", "--json").stdout)
    assert report["ok"] is False and not report["checks"]["queue_rows_below_progress"]["ok"]
    assert report["checks"]["obsolete_versions"]["count"] > 0


def test_shards_raise_and_refuse_lowering(sqlite_cli):
    sqlite_cli.ok("init", "--shards", "2")
    assert sqlite_cli.json("shards")["number_of_shards"] == 2
    raised = sqlite_cli.ok("shards", "--raise-to", "4")
    assert "from 2 to 4" in raised.stdout
    lowered = sqlite_cli.run("shards", "--raise-to", "3")
    assert lowered.returncode == 2
    assert "cannot lower the shard count from 4 to 3" in lowered.stderr and "Traceback" not in lowered.stderr
    shown = sqlite_cli.json("shards")
    assert shown["number_of_shards"] == 4 and [p["shard"] for p in shown["progress"]] == [0, 1, 2, 3]
    # init never lowers either
    assert "stays 4" in sqlite_cli.ok("init", "--shards", "1").stdout


def test_sweep_dry_run_changes_nothing_and_progress_bar(sqlite_cli):
    sqlite_cli.ok("init")
    sqlite_cli.ok("workload", "-n", "30", "--progress")
    dry = sqlite_cli.json("sweep", "--dry-run")
    assert {r["status"] for r in dry["results"]} == {"dry_run"} and dry["totals"]["entries_read"] > 0
    status = sqlite_cli.json("status")
    assert all(r["progress"] == -1 and r["last_run"] is None for r in status["shards"])
    limited = sqlite_cli.run("sweep", "--batch-limit", "5", "--max-iterations", "2", "--strategy", "thorough", "--progress")
    assert limited.returncode == 0, limited.stderr
    assert "iteration_limit" in limited.stdout and "[" in limited.stderr and limited.stderr.endswith("\n")
    assert "CONSERVATIVE" not in limited.stdout


def test_commands_refuse_a_store_that_was_never_initialized(sqlite_cli, tmp_path):
    for command in ("status", "sweep", "verify", "shards", "workload"):
        result = sqlite_cli.run(command)
        assert result.returncode == 2, command
        assert "run 'atlas-sweep init' first" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "atlas.db").exists()


def test_store_from_environment(sqlite_cli):
    sqlite_cli.ok("init")
    shown = sqlite_cli.run("shards", "--json", store=False, env={"ATLAS_STORE_URL": sqlite_cli.url})
    assert shown.returncode == 0 and json.loads(shown.stdout)["number_of_shards"] == 1


def test_init_creates_the_latency_table_and_a_workload_publishes_its_latency(sqlite_cli):
    """Issue 31 item 1: ``init`` creates ``_app_latency``; a client process (the ``workload`` command)
    publishes its transactions' latency (the last period when it closes the store); the setting turns it off."""
    import time

    from airflow_atlas.transactions.latency_table import TABLE, read_application_latency

    sqlite_cli.ok("init")
    with _open(sqlite_cli) as store:
        assert TABLE in store.kvs.list_tables()
    since = time.time()
    report = sqlite_cli.json("workload", "-n", "40", "--seed", "3")
    with _open(sqlite_cli) as store:
        got = read_application_latency(store.kvs, since, time.time())
    assert report["committed"] > 0
    assert got["commit"].count >= report["committed"]

    off = sqlite_cli.run("workload", "-n", "20", "--seed", "4", "--set", "app_latency_publish=false", "--json")
    assert off.returncode == 0, off.stderr
    with _open(sqlite_cli) as store:
        again = read_application_latency(store.kvs, since, time.time())
    assert again["commit"].count == got["commit"].count
