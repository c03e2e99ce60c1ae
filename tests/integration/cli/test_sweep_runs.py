"""Sweep runs through the engine's one entry point, recorded and visible (issue 16 items 9, 10, 11, 12;
issue 14 item 1), on the embedded store. The Cassandra side is in ``test_cli_cassandra.py``."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import TransactionAbortedError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.store import AtlasStore
from airflow_atlas.sweep.results import default_holder, holder_process_gone
from airflow_atlas.sweep.targeted import TargetedSweeper
from airflow_atlas.transactions import encoding as enc
from airflow_atlas.workload import WorkloadSpec, dead_writer, run_workload
from tests.conftest import REPO_ROOT

from .conftest import cli_command
from .helpers import queued_entries

GARBAGE = b"\xff\xfe\xfd"


def _open(cli) -> AtlasStore:
    return AtlasStore.open(cli.url, StoreConfig(unreadable_window_seconds=0))


def corrupt_commit_entry(store, table: str) -> tuple[int, Cell]:
    """A dead writer of ``table`` whose ``_transactions2`` entry is garbage: what issue 16.9 describes."""
    cell = Cell(b"corrupt-row", b"c00")
    start = dead_writer(store, {table: {cell: b"value"}})
    service = store.transaction_service
    store.kvs.put_unless_exists(service.table, {enc.v2_cell(start): GARBAGE})
    return start, cell


# ----- 16.9 -------------------------------------------------------------------------------------------------
def test_failed_runs_are_recorded_and_shown_with_the_reason(sqlite_cli):
    sqlite_cli.ok("init", "--shards", "1")
    sqlite_cli.ok("workload", "-n", "30", "--seed", "3")

    # Before any run: no sweep rate is claimed, so nothing "outpaces" a sweep that never ran.
    fresh = sqlite_cli.json("status")
    for row in fresh["shards"]:
        assert row["last_run"] is None and row["failing"] is None
        assert row["forecast"]["sweep_rate_per_second"] is None
        assert row["forecast"]["ingest_outpaces_sweep"] is False
        if row["backlog_entries"]:
            assert row["forecast"]["state"] == "not_swept_yet"
    assert "ingest_outpaces_sweep" not in {w["kind"] for w in fresh["warnings"]}
    assert "OUTPACES" not in sqlite_cli.ok("status").stdout

    with _open(sqlite_cli) as store:
        start, cell = corrupt_commit_entry(store, "demo_thorough")

    for attempt in (1, 2):
        swept = sqlite_cli.run("sweep")
        assert swept.returncode == 1, swept.stdout + swept.stderr
        assert "shard 0 THOROUGH: FAILED" in swept.stdout
        assert f"start timestamp {start}" in swept.stderr and cell.row.hex() in swept.stderr
        assert "demo_thorough" in swept.stderr and "what to do" in swept.stderr.lower()
        assert len(swept.stderr.strip().splitlines()) == 1 and "Traceback" not in swept.stderr

        status = sqlite_cli.json("status")
        rows = {r["strategy"]: r for r in status["shards"]}
        failed = rows["THOROUGH"]
        assert failed["last_run"]["outcome"] == "failed" and failed["last_run"]["status"] == "failed"
        assert f"start timestamp {start}" in failed["last_run"]["error"] and cell.row.hex() in failed["last_run"]["error"]
        assert failed["failing"]["runs"] == attempt and failed["failing"]["error"] == failed["last_run"]["error"]
        assert "sweep_failing" in {w["kind"] for w in failed["warnings"]}
        assert status["totals"]["THOROUGH"]["failing_pairs"] == 1
        assert rows["CONSERVATIVE"]["last_run"]["outcome"] == "ok" and rows["CONSERVATIVE"]["failing"] is None

    text = sqlite_cli.ok("status").stdout
    assert "FAILED" in text and "Failing pairs" in text and f"start timestamp {start}" in text

    from airflow_atlas.airflow.web.render import render_page

    page = render_page(status, app_root="", airflow_root="", query={}, refresh_seconds=0)
    assert f"start timestamp {start}" in page and 'data-field="error"' in page


# ----- 16.10 ------------------------------------------------------------------------------------------------
_HOLD_AND_DIE = """
import os, signal, sys
from airflow_atlas.store import AtlasStore
from airflow_atlas.sweep.results import default_holder
from airflow_atlas.sweep.targeted import TargetedSweeper
store = AtlasStore.open(sys.argv[1])
lease = store.locks.acquire(TargetedSweeper.lock_name(0, "THOROUGH"), default_holder(), 600)
print(lease.holder, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def kill_a_sweeper_holding(url: str) -> str:
    """A real process takes the lease of shard 0 THOROUGH (600 s) and is killed (SIGKILL) holding it."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.run([sys.executable, "-c", _HOLD_AND_DIE, url], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    return proc.stdout.strip()


def test_skipped_pairs_name_the_holder_its_expiry_and_its_dead_process(sqlite_cli):
    sqlite_cli.ok("init", "--shards", "1")
    sqlite_cli.ok("workload", "-n", "20")
    holder = kill_a_sweeper_holding(sqlite_cli.url)
    assert holder_process_gone(holder) is True

    run = sqlite_cli.run("sweep")
    assert run.returncode == 4, run.stdout + run.stderr
    line = next(x for x in run.stdout.splitlines() if x.startswith("shard 0 THOROUGH"))
    assert f"skipped, locked by {holder}" in line and "lease expires in" in line and "its process is gone" in line
    assert "1 pair(s) SKIPPED" in run.stdout
    report = json.loads(sqlite_cli.run("sweep", "--json").stdout)
    assert report["skipped"] == 1
    skipped = next(r for r in report["results"] if r["status"] == "skipped_locked")
    assert skipped["lock_holder"] == holder and skipped["lock_holder_process_gone"] is True
    assert 500 < skipped["lock_expires_at"] - time.time() <= 600

    status = sqlite_cli.json("status")
    row = next(r for r in status["shards"] if r["strategy"] == "THOROUGH")
    assert row["lock_holder"] == holder and row["lock_holder_process_gone"] is True
    assert 500 < row["lock_expires_in_seconds"] <= 600
    assert row["last_run"]["outcome"] == "skipped" and row["last_run"]["lock_holder"] == holder
    assert "lock_holder_gone" in {w["kind"] for w in row["warnings"]}
    text = sqlite_cli.ok("status").stdout
    assert "LOCK EXPIRES IN" in text and f"{holder} (process gone)" in text


def test_holder_process_is_known_only_on_this_host():
    assert holder_process_gone(default_holder()) is False  # this very process
    assert holder_process_gone("some-other-host:1:abcd") is None
    assert holder_process_gone("airflow-task-7") is None
    assert holder_process_gone(None) is None


# ----- 16.11 / 14.1 -----------------------------------------------------------------------------------------
def test_a_second_sweeper_skips_a_pair_held_for_the_whole_run(sqlite_cli):
    sqlite_cli.ok("init", "--shards", "1")
    sqlite_cli.ok("workload", "-n", "60", "--table", "t:THOROUGH", "--dead-writer-ratio", "0", "--abort-ratio", "0")
    paused, proceed = threading.Event(), threading.Event()
    outcome = {}

    def pause_after_first(it):
        if not paused.is_set():
            paused.set()
            proceed.wait(60)

    with _open(sqlite_cli) as store:
        backlog = queued_entries(store, 0, "THOROUGH")

        def sweeper_a():
            outcome["a"] = store.sweeper.sweep_shard(0, "THOROUGH", holder="sweeper-A", batch_limit=5,
                                                     on_iteration=pause_after_first)

        thread = threading.Thread(target=sweeper_a)
        thread.start()
        try:
            assert paused.wait(60)
            # Between A's iterations the pair stays A's: the CLI sweeper skips it instead of taking turns.
            b = sqlite_cli.run("sweep", "--strategy", "THOROUGH", "--batch-limit", "5", "--json")
            assert b.returncode == 4, b.stderr
            (result,) = json.loads(b.stdout)["results"]
            assert result["status"] == "skipped_locked" and result["lock_holder"] == "sweeper-A"
            assert result["iterations"] == 0 and result["entries_read"] == 0
        finally:
            proceed.set()
            thread.join(60)
        a = outcome["a"]
        assert a.status == "caught_up" and a.iterations > 2 and a.counts.entries_read == backlog
        runs = store.history.runs(0, "THOROUGH")
        assert [r["status"] for r in runs[:2]] == ["caught_up", "skipped_locked"]  # newest first
        assert runs[0]["lock_holder"] == "sweeper-A" and runs[0]["iterations"] == a.iterations


def test_two_cli_sweepers_never_share_a_pair(sqlite_cli):
    sqlite_cli.ok("init", "--shards", "2")
    sqlite_cli.ok("workload", "-n", "150", "--seed", "9")
    argv = ["sweep", "--batch-limit", "2", "--json", "--store", sqlite_cli.url, "--set", "unreadable_window_seconds=0"]

    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    procs = [subprocess.Popen(cli_command() + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode in (0, 4), err
        reports.append(json.loads(out))
    for shard in (0, 1):
        for strategy in ("CONSERVATIVE", "THOROUGH"):
            mine = [r for rep in reports for r in rep["results"] if (r["shard"], r["strategy"]) == (shard, strategy)]
            assert len(mine) == 2
            assert sum(1 for r in mine if r["entries_read"] > 0) <= 1, mine  # one sweeper did the pair's work
            assert all(r["status"] in ("caught_up", "skipped_locked") for r in mine), mine
    after = sqlite_cli.json("status")
    assert all(r["backlog_entries"] == 0 or r["strategy"] == "CONSERVATIVE" for r in after["shards"])


def test_sweepable_entries_is_the_one_count(sqlite_cli):
    sqlite_cli.ok("init", "--shards", "2")
    sqlite_cli.ok("workload", "-n", "50", "--seed", "4")
    with _open(sqlite_cli) as store:
        status = sqlite_cli.json("status")
        for row in status["shards"]:
            n = store.sweeper.sweepable_entries(row["shard"], row["strategy"], row["sweep_ts"])
            assert n == row["sweepable_entries"] == queued_entries(store, row["shard"], row["strategy"], -1, row["sweep_ts"])
            if n > 1:
                assert store.sweeper.sweepable_entries(row["shard"], row["strategy"], row["sweep_ts"], cap=1) == 1
        assert not hasattr(TargetedSweeper, "shard_status")


# ----- 16.12 ------------------------------------------------------------------------------------------------
def test_workload_processes_sharing_tables_all_finish(sqlite_cli):
    sqlite_cli.ok("init")
    argv = ["workload", "-n", "80", "--rows", "2", "--columns", "1", "--table", "shared:THOROUGH",
            "--dead-writer-ratio", "0", "--abort-ratio", "0", "--json", "--store", sqlite_cli.url]

    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    procs = [subprocess.Popen(cli_command() + argv + ["--seed", str(seed)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for seed in (1, 2, 3)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        report = json.loads(out)
        assert report["committed"] + report["conflicts"] == 80


class _AbortEveryThird:
    """The store a workload sees, with every third commit rolled back by "another process" (the real
    TransactionAbortedError a commit raises when someone else rolled the transaction back)."""

    def __init__(self, store):
        self._store = store
        self.transactions = self
        self._n = 0

    def __getattr__(self, name):
        return getattr(self._store, name)

    def begin(self):
        txn = self._store.transactions.begin()
        self._n += 1
        if self._n % 3 == 0:

            def commit():
                txn.abort()
                raise TransactionAbortedError(f"transaction {txn.start_timestamp} was rolled back by another process")

            txn.commit = commit
        return txn


def test_workload_counts_roll_backs_by_others_like_conflicts(sqlite_cli):
    sqlite_cli.ok("init")
    with _open(sqlite_cli) as store:
        spec = WorkloadSpec(transactions=30, dead_writer_ratio=0.0, abort_ratio=0.0, seed=1)
        report = run_workload(_AbortEveryThird(store), spec)
        assert report.conflicts == 10 and report.committed == 20
