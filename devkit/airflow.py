"""A real Airflow as its own processes, for the tests and the benchmarks: API server (one worker), scheduler
with the LocalExecutor, DAG processor, and the triggerer when asked, on SQLite in a temporary AIRFLOW_HOME, on
a free port of a loopback address. :func:`running_airflow` yields an :class:`AirflowProcesses` (REST API with
an admin token, run waits, component logs) and stops every process group it started on the way out.

Nothing is mocked: these are the processes a deployment runs, configured through the environment. A failure
raises :class:`AirflowProcessError` with the components' log tails.
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
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


class AirflowProcessError(RuntimeError):
    """An Airflow process failed, exited or did not get ready in time (with its logs' tails)."""


START_TIMEOUT = 300.0
COMPONENTS = ("api-server", "scheduler", "dag-processor")
HEALTH_KEYS = {"scheduler": "scheduler", "dag-processor": "dag_processor", "triggerer": "triggerer"}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def admin_token(base_url: str, password: str) -> str:
    """A REST API token for Airflow's admin user (POST /auth/token) at ``base_url``."""
    import httpx

    r = httpx.post(f"{base_url}/auth/token", json={"username": "admin", "password": password}, timeout=60)
    assert r.status_code in (200, 201), r.text
    return r.json()["access_token"]


def api_request(base_url: str, token: str, method: str, path: str, **kwargs):
    """One request to Airflow's REST API at ``base_url`` with a token of :func:`admin_token`."""
    import httpx

    headers = {"Authorization": f"Bearer {token}", **kwargs.pop("headers", {})}
    return httpx.request(method, f"{base_url}{path}", headers=headers, timeout=60, **kwargs)


class AirflowRest:
    """Airflow's REST API as its admin user, for an Airflow the caller runs: a class that mixes it in has
    ``base_url``, ``admin_password`` and ``_token`` (None until the first call)."""

    base_url: str
    _token: str | None

    @property
    def admin_password(self) -> str:
        """The admin user's password: where it is, the class that mixes this in says."""
        raise NotImplementedError

    def token(self) -> str:
        """A REST API token for the admin user (POST /auth/token)."""
        if self._token is None:
            self._token = admin_token(self.base_url, self.admin_password)
        return self._token

    def api(self, method: str, path: str, **kwargs):
        return api_request(self.base_url, self.token(), method, path, **kwargs)

    def trigger(self, dag_id: str, conf: dict | None = None) -> str:
        """Start a run of ``dag_id`` now; its run id."""
        r = self.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf or {}})
        assert r.status_code in (200, 201), r.text
        return r.json()["dag_run_id"]

    def run_state(self, dag_id: str, run_id: str) -> str:
        r = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
        assert r.status_code == 200, r.text
        return r.json()["state"]

    def task_instances(self, dag_id: str, run_id: str) -> dict[tuple[str, int], dict]:
        r = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
        assert r.status_code == 200, r.text
        return {(t["task_id"], t["map_index"]): t for t in r.json()["task_instances"]}

    def task_states(self, dag_id: str, run_id: str) -> dict[tuple[str, int], str]:
        return {key: ti["state"] for key, ti in self.task_instances(dag_id, run_id).items()}

    def xcom(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1):
        r = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value",
                     params={"map_index": map_index, "deserialize": True})
        assert r.status_code == 200, r.text
        value = r.json()["value"]
        return json.loads(value) if isinstance(value, str) else value

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1) -> str:
        """The text of one attempt's log (what the UI shows)."""
        r = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
                     params={"map_index": map_index}, headers={"Accept": "application/json"})
        assert r.status_code == 200, r.text
        content = r.json().get("content")
        if isinstance(content, list):
            return "\n".join(json.dumps(line) if not isinstance(line, str) else line for line in content)
        return str(content)


@dataclass
class AirflowProcesses(AirflowRest):
    """A running Airflow (see :func:`running_airflow`)."""

    base_url: str
    home: Path
    logs: Path
    env: dict
    processes: dict = field(default_factory=dict)
    _token: str | None = None

    @property
    def admin_password(self) -> str:
        return json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]

    def health(self) -> dict:
        import httpx

        return httpx.get(f"{self.base_url}/api/v2/monitor/health", timeout=10).json()

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
            raise AirflowProcessError(f"Airflow component(s) exited: {dead}\n{self.log_tails()}")

    def wait_run(self, dag_id: str, run_id: str, timeout: float) -> str:
        """The run's end state (success or failed); fails the test when it did not end within ``timeout``."""
        deadline = time.monotonic() + timeout
        state = "unknown"
        while time.monotonic() < deadline:
            self.check_alive()
            state = self.run_state(dag_id, run_id)
            if state in ("success", "failed"):
                return state
            time.sleep(2.0)
        raise AirflowProcessError(f"{dag_id} {run_id} still {state} after {timeout:.0f}s: "
                                  f"{self.task_states(dag_id, run_id)}\n{self.log_tails()}")

    def stop(self) -> None:
        """Stop every process group (the LocalExecutor's workers and task processes too): SIGTERM, then
        SIGKILL after 30 s."""
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
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)


def airflow_env(home: Path, dags: Path, host: str, port: int, extra: Mapping[str, str]) -> dict:
    """The Airflow processes' environment: this one without its AIRFLOW* variables, plus ``extra``."""
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
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://{host}:{port}/execution/",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
        AIRFLOW__API__BASE_URL=f"http://{host}:{port}/",
        AIRFLOW__API__PORT=str(port),
        AIRFLOW__API__SECRET_KEY=secrets.token_hex(16),
        AIRFLOW__API_AUTH__JWT_SECRET=secrets.token_hex(32),
        AIRFLOW__LOGGING__LOGGING_LEVEL="INFO",
    )
    env.update(extra)
    return env


@contextmanager
def running_airflow(root: Path, dag_files: Mapping[str, Path | str], env: Mapping[str, str], *,
                    host: str = "127.0.0.1", components: Iterable[str] = COMPONENTS,
                    ready_dags: Iterable[str] = (), api_first: bool = False) -> Iterator[AirflowProcesses]:
    """An Airflow in ``root`` (home/, dags/, logs/): the DAGs folder holds ``dag_files`` (name -> a file to
    link, or the text of a DAG file), ``env`` is added to the environment (connections, the settings,
    metrics; it overrides the defaults of :func:`airflow_env`). Ready when every component's health is
    ``healthy`` and each of ``ready_dags`` is parsed and unpaused. ``api_first``: the other components start
    once the API server answers (a DAG scheduled at once would otherwise start tasks whose execution-API
    calls fail: a failed first run). Stopped on the way out, also on failure."""
    started = time.monotonic()
    home, dags, logs = root / "home", root / "dags", root / "logs"
    for d in (home, dags, logs, home / "plugins"):
        d.mkdir(parents=True, exist_ok=True)
    for name, source in dag_files.items():
        if isinstance(source, Path):
            (dags / name).symlink_to(source)
        else:
            (dags / name).write_text(source)
    if not any(ep.name == "airflow_atlas" for ep in entry_points(group="airflow.plugins")):
        # The package is not installed (scripts/bootstrap.sh installs it): load the plugin from the plugins folder.
        (home / "plugins" / "atlas_plugin.py").write_text("from airflow_atlas.airflow.plugin import AtlasPlugin  # noqa: F401\n")
    port = free_port(host)
    airflow = AirflowProcesses(base_url=f"http://{host}:{port}", home=home, logs=logs,
                               env=airflow_env(home, dags, host, port, env))
    migrate = subprocess.run(["airflow", "db", "migrate"], env=airflow.env, capture_output=True, text=True, timeout=300)
    if migrate.returncode != 0:
        raise AirflowProcessError(f"airflow db migrate failed:\n{migrate.stdout[-3000:]}\n{migrate.stderr[-3000:]}")
    commands = {
        "api-server": ["airflow", "api-server", "--host", host, "--port", str(port), "--workers", "1"],
        # No log servers (they listen on every interface, on fixed ports): the API server reads the task and
        # trigger logs from the files, on the same machine.
        "scheduler": ["airflow", "scheduler", "--skip-serve-logs"],
        "dag-processor": ["airflow", "dag-processor"],
        "triggerer": ["airflow", "triggerer", "--skip-serve-logs"],
    }
    names = list(components)
    try:
        for name in sorted(names, key=lambda n: n != "api-server"):
            with open(logs / f"{name}.log", "wb") as log:
                airflow.processes[name] = subprocess.Popen(commands[name], env=airflow.env, stdout=log,
                                                           stderr=subprocess.STDOUT, start_new_session=True)
            if name == "api-server" and api_first:
                _wait_api(airflow)
        _wait_ready(airflow, [HEALTH_KEYS[n] for n in names if n in HEALTH_KEYS], list(ready_dags))
        print(f"[airflow] ready on {airflow.base_url} after {time.monotonic() - started:.0f}s", file=sys.stderr)
        yield airflow
    finally:
        airflow.stop()


def _wait_api(airflow: AirflowProcesses) -> None:
    import httpx

    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        airflow.check_alive()
        try:
            if httpx.get(f"{airflow.base_url}/api/v2/monitor/health", timeout=10).status_code == 200:
                return
        except (httpx.HTTPError, OSError):
            pass
        time.sleep(1.0)
    raise AirflowProcessError(f"the API server did not answer within {START_TIMEOUT:.0f}s\n{airflow.log_tails()}")


def _wait_ready(airflow: AirflowProcesses, healthy: list[str], dag_ids: list[str]) -> None:
    import httpx

    deadline = time.monotonic() + START_TIMEOUT
    last = "no answer yet"
    while time.monotonic() < deadline:
        airflow.check_alive()
        try:
            health = airflow.health()
            if all(health[key]["status"] == "healthy" for key in healthy):
                pending = [d for d in dag_ids if not _unpaused(airflow, d)]
                if not pending:
                    return
                last = f"DAGs not parsed or paused: {pending}"
            else:
                last = f"health: {health}"
        except (httpx.HTTPError, OSError, KeyError, ValueError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(1.0)
    raise AirflowProcessError(f"Airflow not ready after {START_TIMEOUT:.0f}s ({last})\n{airflow.log_tails()}")


def _unpaused(airflow: AirflowProcesses, dag_id: str) -> bool:
    r = airflow.api("GET", f"/api/v2/dags/{dag_id}")
    return r.status_code == 200 and not r.json()["is_paused"]
