"""A real Airflow for the benchmark ``sustained``: API server (one worker; the task processes talk to its
execution API), scheduler (LocalExecutor) and DAG processor on SQLite in a temporary AIRFLOW_HOME, on a
free loopback port - the way tests/browser/conftest.py starts one. The DAGs folder holds only
``atlas_targeted_sweep`` (a link to dags/), scheduled by ``ATLAS_DAG_SETTINGS``; the store is the
connection ``atlas_default`` and the engine settings the ``atlas_settings`` Variable (environment).

:class:`BenchAirflow` is a context manager: every process group it started is stopped on exit.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

from airflow_atlas.airflow.settings import split_dag_settings

from . import common as C

START_TIMEOUT = 300.0
DAG_ID = "atlas_targeted_sweep"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BenchAirflow:
    """Airflow running ``atlas_targeted_sweep`` against ``connection`` (an Airflow connection as JSON) with
    ``settings`` (the ``atlas_settings`` keys and the DAG-shaping ones, split as the DAGs read them)."""

    def __init__(self, root: Path, connection: dict, settings: dict, parallelism: int = 2):
        self.root = root
        self.home, self.dags, self.logs = root / "home", root / "dags", root / "logs"
        for d in (self.home, self.dags, self.logs, self.home / "plugins"):
            d.mkdir(parents=True, exist_ok=True)
        (self.dags / f"{DAG_ID}.py").symlink_to(C.REPO_ROOT / "dags" / f"{DAG_ID}.py")
        if not any(ep.name == "airflow_atlas" for ep in entry_points(group="airflow.plugins")):
            (self.home / "plugins" / "atlas_plugin.py").write_text(
                "from airflow_atlas.airflow.plugin import AtlasPlugin  # noqa: F401\n")
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        dag_settings, variable = split_dag_settings(settings)
        self.env = self._env(connection, variable, dag_settings, parallelism)
        self.processes: dict[str, subprocess.Popen] = {}
        self._token: str | None = None

    def _env(self, connection: dict, variable: dict, dag_settings: dict, parallelism: int) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        venv_bin = str(Path(sys.executable).parent)
        home, port = self.home, self.port
        env.update(
            PATH=venv_bin + os.pathsep + env.get("PATH", ""),
            PYTHONPATH=str(C.REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
            AIRFLOW_HOME=str(home),
            AIRFLOW__CORE__DAGS_FOLDER=str(self.dags),
            AIRFLOW__CORE__PLUGINS_FOLDER=str(home / "plugins"),
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__CORE__EXECUTOR="LocalExecutor",
            AIRFLOW__CORE__PARALLELISM=str(parallelism),
            AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="False",
            AIRFLOW__CORE__AUTH_MANAGER="airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
            AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{port}/execution/",
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
            AIRFLOW__API__BASE_URL=f"http://127.0.0.1:{port}/",
            AIRFLOW__API__PORT=str(port),
            AIRFLOW__API__SECRET_KEY=secrets.token_hex(16),
            AIRFLOW__API_AUTH__JWT_SECRET=secrets.token_hex(32),
            AIRFLOW__LOGGING__LOGGING_LEVEL="WARNING",
            AIRFLOW_CONN_ATLAS_DEFAULT=json.dumps(connection),
            AIRFLOW_VAR_ATLAS_SETTINGS=json.dumps(variable),
            ATLAS_DAG_SETTINGS=json.dumps(dag_settings),
        )
        return env

    # ----- lifecycle ------------------------------------------------------------------------------------------
    def __enter__(self) -> BenchAirflow:
        started = time.monotonic()
        migrate = subprocess.run(["airflow", "db", "migrate"], env=self.env, capture_output=True, text=True, timeout=600)
        if migrate.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{migrate.stdout[-3000:]}\n{migrate.stderr[-3000:]}")
        try:
            # The API server first: the scheduler's first tasks talk to its execution API, and a task started
            # before it answers fails (a failed first DAG run that measures nothing).
            self._start("api-server", ["airflow", "api-server", "--host", "127.0.0.1", "--port", str(self.port),
                                       "--workers", "1"])
            self._wait_api()
            self._start("scheduler", ["airflow", "scheduler"])
            self._start("dag-processor", ["airflow", "dag-processor"])
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        C.log(f"  Airflow ready on {self.base_url} after {time.monotonic() - started:.0f}s (logs {self.logs})")
        return self

    def _start(self, name: str, cmd: list[str]) -> None:
        with open(self.logs / f"{name}.log", "wb") as log:
            self.processes[name] = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                                    start_new_session=True)

    def _wait_api(self) -> None:
        import httpx

        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                if httpx.get(f"{self.base_url}/api/v2/monitor/health", timeout=10).status_code == 200:
                    return
            except (httpx.HTTPError, OSError):
                pass
            time.sleep(1.0)
        raise RuntimeError(f"the API server did not answer within {START_TIMEOUT:.0f}s\n{self.log_tails()}")

    def __exit__(self, *exc) -> None:
        self.stop()

    def check_alive(self) -> None:
        dead = {n: p.returncode for n, p in self.processes.items() if p.poll() is not None}
        if dead:
            raise RuntimeError(f"Airflow component(s) exited: {dead}\n{self.log_tails()}")

    def log_tails(self, lines: int = 30) -> str:
        out = []
        for name in self.processes:
            path = self.logs / f"{name}.log"
            if path.exists():
                out.append(f"----- {name} -----\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(out)

    def _wait_ready(self) -> None:
        import httpx

        deadline = time.monotonic() + START_TIMEOUT
        last = "no answer yet"
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                health = httpx.get(f"{self.base_url}/api/v2/monitor/health", timeout=10).json()
                if health["scheduler"]["status"] == "healthy" and health["dag_processor"]["status"] == "healthy":
                    r = self.api("GET", f"/api/v2/dags/{DAG_ID}")
                    if r.status_code == 200 and not r.json()["is_paused"]:
                        return
                    last = f"dag: {r.status_code} {r.text[:200]}"
                else:
                    last = f"health: {health}"
            except (httpx.HTTPError, OSError, KeyError, ValueError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(1.0)
        raise RuntimeError(f"Airflow not ready after {START_TIMEOUT:.0f}s ({last})\n{self.log_tails()}")

    def stop(self) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 30
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self.processes.values():
            try:  # the whole group: the LocalExecutor's workers and task processes too
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)

    # ----- REST API -----------------------------------------------------------------------------------------
    def api(self, method: str, path: str, **kwargs):
        import httpx

        if self._token is None:
            password = json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
            r = httpx.post(f"{self.base_url}/auth/token", json={"username": "admin", "password": password}, timeout=60)
            r.raise_for_status()
            self._token = r.json()["access_token"]
        headers = {"Authorization": f"Bearer {self._token}"}
        return httpx.request(method, f"{self.base_url}{path}", headers=headers, timeout=60, **kwargs)

    def dag_runs(self) -> list[dict]:
        """The DAG's runs (state, start and end) from the REST API, oldest first."""
        r = self.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns", params={"limit": 1000, "order_by": "run_after"})
        r.raise_for_status()
        return [
            {"run_id": d["dag_run_id"], "state": d["state"], "start": d.get("start_date"), "end": d.get("end_date")}
            for d in r.json()["dag_runs"]
        ]
