"""A real Prometheus (Debian's package: ``prometheus_binary``, which scripts/ensure_prometheus.sh installs when
missing) scrapes ``atlas-sweep metrics`` every second, and what its HTTP API answers is what ``atlas-sweep
status --json`` says of the same store: backlog, progress, failing runs, lock holders, per shard and strategy. Both servers listen on
127.0.0.1 only, in temporary directories, and stop by themselves (``timeout``) even if the test dies.

On the embedded store and on the local Cassandra node's store (a keyspace of its own)."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.store import AtlasStore
from airflow_atlas.sweep.targeted import TargetedSweeper
from tests.conftest import REPO_ROOT

from .conftest import Cli, cli_command
from .test_sweep_runs import corrupt_commit_entry

LIFETIME_SECONDS = 300
"""Each server started here ends by itself after this long (coreutils ``timeout``), whatever the test does."""
HOLDER = "metrics-test-holder:1"
EXPORTER_TIMEOUT_SECONDS = 0.5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@pytest.fixture
def exporter_of(tmp_path):
    """Starts ``atlas-sweep metrics --listen 127.0.0.1:0`` on a Cli's store; returns its port."""
    started: list[subprocess.Popen] = []

    def start(cli: Cli) -> int:
        env = os.environ.copy()
        env.pop("ATLAS_STORE_URL", None)
        env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        # A scrape answers within Prometheus's 1 s scrape timeout: a slower read says atlas_status_up 0
        # and serves a later scrape (the bound the exporter promises).
        argv = ["timeout", str(LIFETIME_SECONDS)] + cli_command() + [
            "metrics", "--listen", "127.0.0.1:0", "--timeout", str(EXPORTER_TIMEOUT_SECONDS), "--store", str(cli.url)]
        for setting in cli.settings:
            argv += ["--set", setting]
        log = open(tmp_path / "exporter.log", "w")  # noqa: SIM115 - closed with the process below
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=tmp_path)
        started.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "serving the metrics of ... at http://127.0.0.1:PORT/metrics"
        assert "http://127.0.0.1:" in line, f"exporter did not start: {line!r} {(tmp_path / 'exporter.log').read_text()}"
        return int(line.rsplit(":", 1)[1].split("/", 1)[0])

    yield start
    for proc in started:
        _stop(proc)
        assert proc.returncode in (0, -15, 124), proc.returncode  # stopped by SIGTERM: a clean exit


@pytest.fixture
def prometheus(tmp_path, prometheus_binary):
    """Starts a private Prometheus scraping 127.0.0.1:PORT every second (optionally another path, with a
    bearer token); returns a query function and Prometheus's log file."""
    procs: list[subprocess.Popen] = []

    def start(target_port: int, metrics_path: str = "/metrics", token: str | None = None):
        home = tmp_path / "prometheus"
        home.mkdir()
        auth = ""
        if token is not None:
            (home / "token").write_text(token)
            auth = f"    authorization:\n      credentials_file: {home / 'token'}\n"
        (home / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: atlas\n    metrics_path: {metrics_path}\n{auth}    static_configs:\n"
            f"      - targets: ['127.0.0.1:{target_port}']\n"
        )
        port = _free_port()
        log = open(home / "prometheus.log", "w")  # noqa: SIM115 - closed with the process below
        procs.append(subprocess.Popen(
            ["timeout", str(LIFETIME_SECONDS), prometheus_binary, f"--config.file={home / 'prometheus.yml'}",
             f"--storage.tsdb.path={home / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
             "--storage.tsdb.retention.time=1h", "--log.level=warn"],
            stdout=log, stderr=subprocess.STDOUT, cwd=home,
        ))

        def query(expr: str) -> list[dict]:
            url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
            with urllib.request.urlopen(url, timeout=5) as response:
                body = json.load(response)
            assert body["status"] == "success", body
            return body["data"]["result"]

        return query, home / "prometheus.log"

    yield start
    for proc in procs:
        _stop(proc)


def wait_for(query, expr: str, log: Path, timeout: float = 90) -> list[dict]:
    """The query's result once Prometheus has scraped a sample of it (1 s interval)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            result = query(expr)
            if result:
                return result
            last = result
        except OSError as exc:  # not listening yet
            last = exc
        time.sleep(0.5)
    raise AssertionError(f"Prometheus had no {expr} after {timeout} s ({last}); its log:\n{log.read_text()[-3000:]}")


def _by_pair(result: list[dict]) -> dict:
    return {(int(r["metric"]["shard"]), r["metric"]["strategy"]): float(r["value"][1]) for r in result}


def _prepare(cli: Cli) -> None:
    """Swept, a failing pair (shard of a corrupt commit entry, THOROUGH), a backlog, a lease held."""
    cli.ok("init", "--shards", "2")
    cli.ok("workload", "-n", "40", "--seed", "5")
    with AtlasStore.open(str(cli.url), StoreConfig(unreadable_window_seconds=0)) as store:
        corrupt_commit_entry(store, "demo_thorough")
    swept = cli.run("sweep")
    assert swept.returncode == 1 and "THOROUGH: FAILED" in swept.stdout, swept.stdout + swept.stderr
    cli.ok("workload", "-n", "30", "--seed", "6")  # a backlog the sweep has not seen
    with AtlasStore.open(str(cli.url), StoreConfig(unreadable_window_seconds=0)) as store:
        assert store.locks.acquire(TargetedSweeper.lock_name(1, "CONSERVATIVE"), HOLDER, 600) is not None


def _check_prometheus_against_status(cli: Cli, exporter_of, prometheus) -> None:
    query, log = prometheus(exporter_of(cli))
    assert wait_for(query, "atlas_status_up == 1", log)
    status = cli.json("status")
    rows = {(r["shard"], r["strategy"]): r for r in status["shards"]}

    # Every scrape answered in time (a slow read is atlas_status_up 0, never a failed scrape).
    assert wait_for(query, 'count_over_time(up{job="atlas"}[1m]) >= 3', log)
    assert [float(r["value"][1]) for r in query('min_over_time(up{job="atlas"}[1m])')] == [1.0]

    def last(name: str) -> list[dict]:
        """The newest sample of each series (a scrape whose read was slow has none of the atlas_sweep_*)."""
        return query(f"last_over_time({name}[1m])")

    assert float(last("atlas_store_shards")[0]["value"][1]) == status["number_of_shards"] == 2
    progress = _by_pair(wait_for(query, "last_over_time(atlas_sweep_progress_ts[1m])", log))
    backlog = _by_pair(last("atlas_sweep_backlog_entries"))
    failing = _by_pair(last("atlas_sweep_failing_runs"))
    held = _by_pair(last("atlas_sweep_lock_held"))
    assert set(progress) == set(backlog) == set(failing) == set(held) == set(rows)
    for pair, r in rows.items():
        assert progress[pair] == r["progress"], pair
        assert backlog[pair] == r["backlog_entries"], pair
        assert failing[pair] == (r["failing"]["runs"] if r["failing"] else 0), pair
        assert held[pair] == (1 if r["lock_holder"] else 0), pair
    assert sum(backlog.values()) > 0
    assert [p for p, r in rows.items() if r["failing"]] == [p for p, v in failing.items() if v > 0] != []
    assert [p for p, r in rows.items() if r["lock_holder"]] == [(1, "CONSERVATIVE")]

    holders = last("atlas_sweep_lock_holder_info")
    assert [(r["metric"]["shard"], r["metric"]["strategy"], r["metric"]["holder"]) for r in holders] == [
        ("1", "CONSERVATIVE", HOLDER)
    ]
    failing_pairs = {r["metric"]["strategy"]: float(r["value"][1]) for r in last("atlas_sweep_failing_pairs")}
    assert failing_pairs == {k: v["failing_pairs"] for k, v in status["totals"].items()}
    # The sweep timestamp moves forward with time: a later scrape shows at least what status saw.
    for strategy, ts in status["sweep_timestamps"].items():
        assert wait_for(query, f'atlas_sweep_ts{{strategy="{strategy}"}} >= {ts}', log, timeout=30)
    last_run = _by_pair(last("atlas_sweep_last_run_timestamp_seconds"))
    for pair, r in rows.items():
        assert abs(last_run[pair] - r["last_run"]["at"]) < 0.01, pair


def test_prometheus_scrapes_the_exporter_of_an_embedded_store(tmp_path, exporter_of, prometheus):
    assert shutil.which("timeout")
    cli = Cli(f"sqlite:///{tmp_path / 'atlas.db'}", tmp_path, ("unreadable_window_seconds=0",))
    _prepare(cli)
    _check_prometheus_against_status(cli, exporter_of, prometheus)


@pytest.mark.cassandra
def test_prometheus_scrapes_the_exporter_of_a_cassandra_store(tmp_path, exporter_of, prometheus, fresh_keyspace):
    from tests.conftest import CASSANDRA_HOST, CASSANDRA_PORT

    url = f"cassandra://{CASSANDRA_HOST}:{CASSANDRA_PORT}/{fresh_keyspace}"
    cli = Cli(url, tmp_path, ("unreadable_window_seconds=0",))
    _prepare(cli)
    _check_prometheus_against_status(cli, exporter_of, prometheus)


def test_the_metrics_command_refuses_an_uninitialized_store_and_a_taken_port(sqlite_cli, tmp_path):
    refused = sqlite_cli.run("metrics", "--once")
    assert refused.returncode == 2 and "run 'atlas-sweep init' first" in refused.stderr
    assert not (tmp_path / "atlas.db").exists()
    sqlite_cli.ok("init")
    once = sqlite_cli.ok("metrics", "--once").stdout
    assert "atlas_status_up 1.0" in once and 'atlas_sweep_backlog_entries{shard="0",strategy="THOROUGH"} 0.0' in once
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = sqlite_cli.run("metrics", "--listen", f"127.0.0.1:{port}", timeout=60)
    assert busy.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in busy.stderr, busy.stderr
    assert len(busy.stderr.strip().splitlines()) == 1
