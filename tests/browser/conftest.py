"""A real Airflow for the browser tests, once per module: API server (one worker), scheduler (LocalExecutor,
parallelism 2) and DAG processor, on SQLite in a temporary AIRFLOW_HOME, on a free port; and headless
Chromium (Debian's /usr/bin/chromium driven by Playwright, never a downloaded browser).

The DAGs folder holds only ``atlas_manual_sweep`` (a link to dags/), so nothing else gets scheduled and the
DAG processor parses one file. The store is the embedded one (``AIRFLOW_CONN_ATLAS_DEFAULT``, a SQLite file
the test process opens too); the settings (the ``atlas_settings`` Variable as ``AIRFLOW_VAR_ATLAS_SETTINGS``,
the DAG-shaping ones as ``ATLAS_DAG_SETTINGS``) have short windows and one task group for all pairs, to keep the run small on a loaded 2-core machine.

Nothing is skipped: a missing Chromium fails with the command that installs it
(scripts/ensure_chromium.sh, run by scripts/test.sh). Component logs are copied to
test-artifacts/browser/airflow-logs/ at teardown.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from airflow_atlas.airflow.settings import split_dag_settings
from tests.conftest import REPO_ROOT

CHROMIUM = os.environ.get("ATLAS_CHROMIUM", "/usr/bin/chromium")
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
START_TIMEOUT = 300.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class AirflowServer:
    base_url: str
    home: Path
    store_path: Path
    logs: Path
    processes: dict = field(default_factory=dict)
    statsd: socket.socket | None = None
    _token: str | None = None
    _statsd_lines: list = field(default_factory=list)

    def statsd_lines(self) -> list[str]:
        """Every StatsD line received so far (Airflow's metrics are sent to a UDP socket of the test,
        only ``atlas.sweep`` ones: ``[metrics] metrics_allow_list``)."""
        while True:
            try:
                data, _ = self.statsd.recvfrom(65536)
            except (TimeoutError, BlockingIOError):
                return self._statsd_lines
            self._statsd_lines.extend(data.decode(errors="replace").splitlines())

    @property
    def admin_password(self) -> str:
        return json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]

    def token(self) -> str:
        """A REST API token for the admin user (POST /auth/token)."""
        if self._token is None:
            import httpx

            r = httpx.post(f"{self.base_url}/auth/token", json={"username": "admin", "password": self.admin_password}, timeout=60)
            assert r.status_code in (200, 201), r.text
            self._token = r.json()["access_token"]
        return self._token

    def api(self, method: str, path: str, **kwargs):
        import httpx

        headers = {"Authorization": f"Bearer {self.token()}", **kwargs.pop("headers", {})}
        return httpx.request(method, f"{self.base_url}{path}", headers=headers, timeout=60, **kwargs)

    def log_tails(self, lines: int = 40) -> str:
        out = []
        for name in self.processes:
            path = self.logs / f"{name}.log"
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"----- {name} (last {lines} lines) -----\n" + "\n".join(text))
        return "\n".join(out)

    def check_alive(self) -> None:
        dead = {n: p.returncode for n, p in self.processes.items() if p.poll() is not None}
        if dead:
            pytest.fail(f"Airflow component(s) exited: {dead}\n{self.log_tails()}")


def _env(home: Path, dags: Path, port: int, store_path: Path, statsd_port: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    venv_bin = str(Path(sys.executable).parent)
    env.update(
        PATH=venv_bin + os.pathsep + env.get("PATH", ""),
        PYTHONPATH=str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__PLUGINS_FOLDER=str(home / "plugins"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        AIRFLOW__CORE__PARALLELISM="2",
        AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="False",
        AIRFLOW__CORE__AUTH_MANAGER="airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{port}/execution/",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
        AIRFLOW__API__BASE_URL=f"http://127.0.0.1:{port}/",
        AIRFLOW__API__PORT=str(port),
        AIRFLOW__API__SECRET_KEY=secrets.token_hex(16),
        AIRFLOW__API_AUTH__JWT_SECRET=secrets.token_hex(32),
        AIRFLOW__LOGGING__LOGGING_LEVEL="INFO",
        AIRFLOW__METRICS__STATSD_ON="True",
        AIRFLOW__METRICS__STATSD_HOST="127.0.0.1",
        AIRFLOW__METRICS__STATSD_PORT=str(statsd_port),
        AIRFLOW__METRICS__STATSD_PREFIX="airflow",
        AIRFLOW__METRICS__METRICS_ALLOW_LIST="atlas.sweep",
        AIRFLOW_CONN_ATLAS_DEFAULT=json.dumps({"conn_type": "atlas_embedded", "host": str(store_path)}),
        AIRFLOW_VAR_ATLAS_SETTINGS=json.dumps(split_dag_settings(SETTINGS)[1]),
        ATLAS_DAG_SETTINGS=json.dumps(split_dag_settings(SETTINGS)[0]),
    )
    return env


@pytest.fixture(scope="module")
def chromium_path() -> str:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests drive Debian's Chromium. Install it with "
            "scripts/ensure_chromium.sh (as root; scripts/test.sh runs it) or `apt-get install -y chromium`."
        )
    return CHROMIUM


@pytest.fixture(scope="module")
def airflow_server(tmp_path_factory, chromium_path):
    """A running Airflow (see the module doc); torn down at the end of the module."""
    started = time.monotonic()
    root = tmp_path_factory.mktemp("airflow-browser")
    home, dags, logs = root / "home", root / "dags", root / "logs"
    for d in (home, dags, logs, home / "plugins"):
        d.mkdir(parents=True, exist_ok=True)
    (dags / "atlas_manual_sweep.py").symlink_to(REPO_ROOT / "dags" / "atlas_manual_sweep.py")
    if not any(ep.name == "airflow_atlas" for ep in entry_points(group="airflow.plugins")):
        # The package is not installed (scripts/bootstrap.sh installs it): load the plugin from the plugins folder.
        (home / "plugins" / "atlas_plugin.py").write_text("from airflow_atlas.airflow.plugin import AtlasPlugin  # noqa: F401\n")
    port = _free_port()
    store_path = root / "atlas.db"
    statsd = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    statsd.bind(("127.0.0.1", 0))
    statsd.setblocking(False)
    env = _env(home, dags, port, store_path, statsd.getsockname()[1])
    server = AirflowServer(base_url=f"http://127.0.0.1:{port}", home=home, store_path=store_path, logs=logs, statsd=statsd)

    migrate = subprocess.run(["airflow", "db", "migrate"], env=env, capture_output=True, text=True, timeout=300)
    if migrate.returncode != 0:
        pytest.fail(f"airflow db migrate failed:\n{migrate.stdout[-3000:]}\n{migrate.stderr[-3000:]}")
    commands = {
        "api-server": ["airflow", "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        "scheduler": ["airflow", "scheduler"],
        "dag-processor": ["airflow", "dag-processor"],
    }
    try:
        for name, cmd in commands.items():
            log = open(logs / f"{name}.log", "wb")
            server.processes[name] = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            log.close()
        _wait_ready(server)
        print(f"[browser] Airflow ready on {server.base_url} after {time.monotonic() - started:.0f}s", file=sys.stderr)
        yield server
    finally:
        _stop(server)
        statsd.close()
        dest = ARTIFACTS / "airflow-logs"
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(logs, dest, dirs_exist_ok=True)


def _wait_ready(server: AirflowServer) -> None:
    """Healthy scheduler and DAG processor, and atlas_manual_sweep parsed and active."""
    import httpx

    deadline = time.monotonic() + START_TIMEOUT
    last = "no answer yet"
    while time.monotonic() < deadline:
        server.check_alive()
        try:
            health = httpx.get(f"{server.base_url}/api/v2/monitor/health", timeout=10).json()
            if health["scheduler"]["status"] == "healthy" and health["dag_processor"]["status"] == "healthy":
                r = server.api("GET", "/api/v2/dags/atlas_manual_sweep")
                if r.status_code == 200 and not r.json()["is_paused"]:
                    return
                last = f"dag: {r.status_code} {r.text[:200]}"
            else:
                last = f"health: {health}"
        except (httpx.HTTPError, OSError, KeyError, ValueError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(1.0)
    pytest.fail(f"Airflow not ready after {START_TIMEOUT:.0f}s ({last})\n{server.log_tails()}")


def _stop(server: AirflowServer) -> None:
    for proc in server.processes.values():
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 30
    for proc in server.processes.values():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for proc in server.processes.values():
        try:  # the whole group: the LocalExecutor's workers and task processes too
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


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
