"""A real Airflow for the browser tests, once per module: API server (one worker), scheduler (LocalExecutor,
parallelism 2) and DAG processor, on SQLite in a temporary AIRFLOW_HOME, on a free port
(tests/processes.py ``running_airflow``); and headless
Chromium (Debian's /usr/bin/chromium, ``$ATLAS_CHROMIUM``, driven by Playwright, never a downloaded browser).

The DAGs folder holds only ``atlas_manual_sweep`` (a link to dags/), so nothing else gets scheduled and the
DAG processor parses one file. The store is the embedded one (``AIRFLOW_CONN_ATLAS_DEFAULT``, a SQLite file
the test process opens too); the settings (the ``atlas_settings`` Variable as ``AIRFLOW_VAR_ATLAS_SETTINGS``,
the DAG-shaping ones as ``ATLAS_DAG_SETTINGS``) have short windows and one task group for all pairs, to keep the run small on a loaded 2-core machine.

Nothing is skipped: ``chromium_path`` installs Chromium when it is missing (scripts/ensure_chromium.sh, as
root), and a Chromium it cannot install fails the tests naming the script and its log. Component logs are copied to
test-artifacts/browser/airflow-logs/ at teardown.
"""
from __future__ import annotations

import json
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from airflow_atlas.airflow.settings import split_dag_settings
from devkit.airflow import AirflowProcesses, running_airflow
from tests.conftest import REPO_ROOT
from tests.services import CHROMIUM

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "browser"
SHARDS = 4
STORE_CONFIG = {"unreadable_window_seconds": 1.0, "punch_interval_seconds": 0.1, "transaction_lease_seconds": 600.0}
SETTINGS = {
    "in_task_group_size": 4,  # one mapped group for up to 4 pairs: fewer task processes
    "retries": 1,
    "retry_delay_seconds": 1,
    "max_retry_delay_seconds": 2,
    "targeted_sweep_schedule": None,
    "scrub_schedule": None,
    "store_config": STORE_CONFIG,
}


@dataclass
class AirflowServer:
    """The running Airflow (:class:`~devkit.airflow.AirflowProcesses`), the embedded store's file and the
    StatsD socket of the test."""

    airflow: AirflowProcesses
    store_path: Path
    statsd: socket.socket
    _statsd_lines: list = field(default_factory=list)

    def __getattr__(self, name: str):  # base_url, home, api, check_alive, log_tails, ...
        return getattr(self.airflow, name)

    def statsd_lines(self) -> list[str]:
        """Every StatsD line received so far (Airflow's metrics are sent to a UDP socket of the test,
        only ``atlas.sweep`` ones: ``[metrics] metrics_allow_list``)."""
        while True:
            try:
                data, _ = self.statsd.recvfrom(65536)
            except (TimeoutError, BlockingIOError):
                return self._statsd_lines
            self._statsd_lines.extend(data.decode(errors="replace").splitlines())


def _env(store_path: Path, statsd_port: int) -> dict:
    return dict(
        AIRFLOW__METRICS__STATSD_ON="True",
        AIRFLOW__METRICS__STATSD_HOST="127.0.0.1",
        AIRFLOW__METRICS__STATSD_PORT=str(statsd_port),
        AIRFLOW__METRICS__STATSD_PREFIX="airflow",
        AIRFLOW__METRICS__METRICS_ALLOW_LIST="atlas.sweep",
        AIRFLOW_CONN_ATLAS_DEFAULT=json.dumps({"conn_type": "atlas_embedded", "host": str(store_path)}),
        AIRFLOW_VAR_ATLAS_SETTINGS=json.dumps(split_dag_settings(SETTINGS)[1]),
        ATLAS_DAG_SETTINGS=json.dumps(split_dag_settings(SETTINGS)[0]),
    )


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Debian's Chromium (installed by scripts/ensure_chromium.sh when missing)."""
    return CHROMIUM.ensure()


@pytest.fixture(scope="module")
def airflow_server(tmp_path_factory, chromium_path):
    """A running Airflow (see the module doc); torn down at the end of the module."""
    root = tmp_path_factory.mktemp("airflow-browser")
    store_path = root / "atlas.db"
    statsd = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    statsd.bind(("127.0.0.1", 0))
    statsd.setblocking(False)
    dag_files = {"atlas_manual_sweep.py": REPO_ROOT / "dags" / "atlas_manual_sweep.py"}
    try:
        with running_airflow(root, dag_files, _env(store_path, statsd.getsockname()[1]),
                             ready_dags=["atlas_manual_sweep"]) as airflow:
            yield AirflowServer(airflow=airflow, store_path=store_path, statsd=statsd)
    finally:
        statsd.close()
        dest = ARTIFACTS / "airflow-logs"
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(root / "logs", dest, dirs_exist_ok=True)


@pytest.fixture(scope="module")
def browser(chromium_path, tmp_path_factory):
    """A headless Chromium context (fresh profile) with a 60 s default timeout: the machine is loaded."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=chromium_path,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1400, "height": 1000},
        )
        context.set_default_timeout(60_000)
        try:
            yield context
        finally:
            context.close()
