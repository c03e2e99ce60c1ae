"""The deployment the ``deploy`` tier tests: scripts/deploy.sh's processes (Postgres, Redis, and Airflow's
api-server, scheduler, dag-processor, triggerer and two Celery workers from a clean virtualenv holding the
built wheel and docker/requirements-docker.lock), configured by docker/airflow-common.env as compose is.
Started ONCE for the package (test_deployment.py, then test_faults.py), stopped at its end (also on failure: ``scripts/deploy.sh stop`` kills each
component's whole session). Component logs are copied to test-artifacts/deploy/ at teardown.

The store is a keyspace of its own on the local Cassandra node (connection ``atlas_default``) and the
embedded store (connection ``atlas_embedded``). The run-time settings are the ``atlas_settings`` Variable
scripts/deploy.sh seeded (docker/atlas_variables.json with the script's DEPLOY_SETTINGS: in-task sweeps, 2
shards, this machine's nodetool), edited before the scheduler starts the documented way that keeps the
Variable's description (``airflow variables export``, the value edited in the file, ``airflow variables
import --action-on-existing-key overwrite``; ``airflow variables set`` would drop it): :data:`RUN_SETTINGS`
says what the test changes and why."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from devkit.airflow import AirflowRest
from tests.conftest import REPO_ROOT, drop_keyspaces_soon
from tests.services import REDIS, STATSD_EXPORTER

DEPLOY = REPO_ROOT / "scripts" / "deploy.sh"
CACHE = Path(os.environ.get("ATLAS_DEPLOY_CACHE", "/tmp/airflow-atlas-deploy"))
STATE = CACHE / "state"


def _script_env(keyspace: str = "") -> dict:
    """scripts/deploy.sh's environment: this one without Airflow's and the project's variables (nor the tests'
    JVM flags for Spark, tests/conftest.py), except the deployment's own address ($ATLAS_DEPLOY_HOST: a
    second deployment beside another one on this machine)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW", "ATLAS_", "PYTHONPATH")) and k not in ("SPARK_SUBMIT_OPTS", "SPARK_CONF_DIR")}
    env.update(ATLAS_DEPLOY_CACHE=str(CACHE), ATLAS_DEPLOY_KEYSPACE=keyspace)
    if "ATLAS_DEPLOY_HOST" in os.environ:
        env["ATLAS_DEPLOY_HOST"] = os.environ["ATLAS_DEPLOY_HOST"]
    return env


# The address everything listens on: scripts/deploy.sh's (its default lives there, in "Addresses").
HOST = subprocess.run([str(DEPLOY), "host"], env=_script_env(), capture_output=True, text=True, timeout=60,
                      check=True).stdout.strip()
BASE_URL = f"http://{HOST}:8080"
# The StatsD receiver's Prometheus endpoint (statsd-exporter, a component of the deployment).
STATSD_URL = subprocess.run([str(DEPLOY), "statsd-url"], env=_script_env(), capture_output=True, text=True, timeout=60,
                            check=True).stdout.strip()
ARTIFACTS = REPO_ROOT / "test-artifacts" / "deploy"
SEED = STATE / "atlas_variables.json"  # what scripts/deploy.sh init seeded the Variable from
SHARDS = 2  # the seed's shard_count (scripts/deploy.sh DEPLOY_SETTINGS; test_deployment.py checks it)
STORE_CONFIG = {"unreadable_window_seconds": 1.0, "punch_interval_seconds": 0.1}
RUN_SETTINGS = {
    # compaction as soon as the test's table has its tombstones (the default plans from more)
    "compaction_threshold_tombstones": 100,
    # written rows sweepable within a second (compose: the default hour, explained in the seed)
    "store_config": STORE_CONFIG,
}
START_TIMEOUT = 300.0
RUN_TIMEOUT = 300.0


def settings_value(**changes) -> dict:
    """The seeded value with :data:`RUN_SETTINGS` and ``changes``."""
    value = json.loads(SEED.read_text())["atlas_settings"]["value"]
    value.update(RUN_SETTINGS)
    value.update(changes)
    return value


@dataclass
class Deployment(AirflowRest):
    env: dict
    keyspace: str
    base_url: str = BASE_URL
    _token: str | None = None
    timings: dict = field(default_factory=dict)
    seeded: dict = field(default_factory=dict)  # the atlas_settings Variable as `init` left it (key -> export)
    sessions: set = field(default_factory=set)  # of components the fault tests killed: checked empty at the end

    @property
    def venv(self) -> Path:
        return Path(self.env["PATH"].split(os.pathsep)[0]).parent

    def script(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(DEPLOY), *args], env=_script_env(self.keyspace), capture_output=True, text=True,
                              timeout=timeout)

    def airflow(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
        """The venv's ``airflow`` CLI with the deployment's environment (what ``eval "$(scripts/deploy.sh env)"``
        gives a shell)."""
        result = subprocess.run([str(self.venv / "bin" / "airflow"), *args], env=self.env, capture_output=True,
                                text=True, timeout=timeout, cwd=STATE)
        if check:
            assert result.returncode == 0, f"airflow {' '.join(args)}: {result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        return result

    @property
    def admin_password(self) -> str:
        return json.loads((STATE / "auth" / "passwords.json").read_text())["admin"]

    def wait_run(self, dag_id: str, run_id: str, timeout: float = RUN_TIMEOUT) -> dict:
        """The run once it ended (success or failed), with its task states on failure."""
        import httpx

        deadline = time.monotonic() + timeout
        run: dict = {}
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                r = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
            except httpx.TransportError:  # the api-server restarting (test_faults.py)
                time.sleep(2)
                continue
            assert r.status_code == 200, r.text
            run = r.json()
            if run["state"] in ("success", "failed"):
                return run
            time.sleep(2)
        raise AssertionError(f"{dag_id} {run_id} still {run.get('state')} after {timeout:.0f}s: "
                             f"{self.task_states(dag_id, run_id)}\n{log_tails()}")

    def session(self, name: str) -> str:
        """The session (id) of the component's current launch, remembered: after ``scripts/deploy.sh stop``
        no process may be left in it (a killed worker's orphans included)."""
        session = self.script("session", name, timeout=60).stdout.strip()
        assert session, f"{name} has no session"
        self.sessions.add(session)
        return session

    def check_alive(self) -> None:
        status = self.script("status", timeout=60)
        assert status.returncode == 0, f"a component is down:\n{status.stdout}\n{log_tails()}"


def _deployment_env(keyspace: str) -> dict:
    """The Airflow processes' environment, as ``eval "$(scripts/deploy.sh env)"`` makes it."""
    out = subprocess.run(["bash", "-c", f'eval "$({DEPLOY} env)" && env -0'], env=_script_env(keyspace),
                         capture_output=True, timeout=120, check=True).stdout
    return dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)


def statsd_samples(name: str) -> dict[tuple[str, str], float]:
    """What the deployment's statsd-exporter serves of the per-pair metric ``name`` (after the mapping,
    docker/statsd-exporter/mapping.yml): ``{(strategy, shard): value}``, summed over other labels. (The
    untagged totals, default-named by the exporter, have no pair labels: the client's parser gives a counter
    among them the same sample name, e.g. ``airflow_atlas_sweep_shard_runs_total``.)"""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(httpx.get(STATSD_URL, timeout=10).text):
        for sample in family.samples:
            if sample.name == name and "strategy" in sample.labels and "shard" in sample.labels:
                key = (sample.labels["strategy"], sample.labels["shard"])
                out[key] = out.get(key, 0.0) + sample.value
    return out


def log_tails(lines: int = 30) -> str:
    out = []
    for path in sorted((STATE / "logs").glob("*.log")):
        text = path.read_text(errors="replace").splitlines()[-lines:]
        out.append(f"----- {path.name} (last {lines} lines) -----\n" + "\n".join(text))
    return "\n".join(out)


@pytest.fixture(scope="session")
def redis_server_binary() -> str:
    """Debian's redis-server (installed by scripts/ensure_redis.sh when missing; its service is not used)."""
    return REDIS.ensure()


@pytest.fixture(scope="session")
def statsd_exporter_binary() -> str:
    """Prometheus's statsd_exporter (scripts/ensure_statsd_exporter.sh: Debian's package, else built with Go)."""
    return STATSD_EXPORTER.ensure()


@pytest.fixture(scope="package")
def deployment(cassandra_node, cassandra_session, redis_server_binary, statsd_exporter_binary):
    """The running deployment (see the module doc), its store prepared; stopped at the end of the module."""
    started = time.monotonic()
    keyspace = f"atlas_deploy_{uuid.uuid4().hex[:8]}"
    env = _script_env(keyspace)
    subprocess.run([str(DEPLOY), "stop"], env=env, capture_output=True, timeout=180)  # a leftover deployment
    shutil.rmtree(STATE, ignore_errors=True)
    deployment = Deployment(env=_deployment_env(keyspace), keyspace=keyspace)
    try:
        init = deployment.script("init", timeout=1800)  # the first run builds the venv (minutes); later: cached
        assert init.returncode == 0, f"scripts/deploy.sh init failed:\n{init.stderr[-4000:]}\n{log_tails()}"
        deployment.timings["init"] = time.monotonic() - started
        deployment.seeded = edit_variables(deployment, atlas_settings=settings_value())
        start = deployment.script("start", timeout=600)
        assert start.returncode == 0, f"scripts/deploy.sh start failed:\n{start.stderr[-4000:]}\n{log_tails()}"
        _wait_ready(deployment)
        deployment.timings["ready"] = time.monotonic() - started
        print(f"[deploy] ready after {deployment.timings['ready']:.0f}s (init {deployment.timings['init']:.0f}s)")
        yield deployment
    finally:
        stop = subprocess.run([str(DEPLOY), "stop"], env=env, capture_output=True, text=True, timeout=300)
        shutil.rmtree(ARTIFACTS, ignore_errors=True)
        if (STATE / "logs").exists():
            shutil.copytree(STATE / "logs", ARTIFACTS / "logs")
        drop_keyspaces_soon(cassandra_session, [keyspace])
        print(f"[deploy] module took {time.monotonic() - started:.0f}s")
        assert stop.returncode == 0, stop.stderr
        leftover = subprocess.run(["pgrep", "-af", str(STATE)], capture_output=True, text=True).stdout
        for session in deployment.sessions:
            leftover += subprocess.run(["ps", "-o", "pid,args", "--no-headers", "-s", session], capture_output=True,
                                       text=True).stdout
        assert not leftover.strip(), f"processes left after scripts/deploy.sh stop:\n{leftover}"


def edit_variables(deployment: Deployment, **values) -> dict:
    """The documented edit of Variables from a shell (docs/DEPLOYMENT.md "Deployment test"): ``airflow variables export``
    to a private file, the values replaced there, ``airflow variables import --action-on-existing-key
    overwrite`` - each Variable keeps its description (``airflow variables set`` drops it). Returns the
    export as it was before the edit."""
    path = STATE / "variables-edit.json"
    deployment.airflow("variables", "export", str(path))
    before = json.loads(path.read_text())
    edited = {key: {**before[key], "value": value} for key, value in values.items()}
    path.write_text(json.dumps(edited))
    deployment.airflow("variables", "import", "--action-on-existing-key", "overwrite", str(path))
    path.unlink()
    return before


def _wait_ready(deployment: Deployment) -> None:
    """Healthy scheduler, dag-processor and triggerer, two Celery workers answering, atlas_targeted_sweep parsed."""
    import httpx

    deadline = time.monotonic() + START_TIMEOUT
    last = "no answer yet"
    while time.monotonic() < deadline:
        try:
            health = httpx.get(f"{BASE_URL}/api/v2/monitor/health", timeout=10).json()
            unhealthy = [k for k in ("scheduler", "dag_processor", "triggerer") if health[k]["status"] != "healthy"]
            if not unhealthy:
                r = deployment.api("GET", "/api/v2/dags/atlas_targeted_sweep")
                if r.status_code == 200:
                    return
                last = f"dag: {r.status_code} {r.text[:200]}"
            else:
                last = f"unhealthy: {unhealthy}"
        except (httpx.HTTPError, OSError, KeyError, ValueError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        deployment.check_alive()
        time.sleep(2)
    raise AssertionError(f"the deployment was not ready after {START_TIMEOUT:.0f}s ({last})\n{log_tails()}")


@pytest.fixture(scope="package")
def cassandra_store(deployment):
    """The deployment's Cassandra store, opened in the test process through the same connection."""
    from airflow_atlas.airflow.hooks.atlas import AtlasHook
    from airflow_atlas.config import StoreConfig

    os.environ["AIRFLOW_CONN_ATLAS_DEPLOY_TEST"] = deployment.env["AIRFLOW_CONN_ATLAS_DEFAULT"]
    servers = tuple(deployment.env["ATLAS_TIMESTAMP_SERVERS"].split(","))  # the deployment's, not the suite's
    tls = {"timestamp_tls_ca": deployment.env["ATLAS_TIMESTAMP_TLS_CA"],  # its mutual TLS: its client certificate
           "timestamp_tls_cert": deployment.env["ATLAS_TIMESTAMP_TLS_CERT"],
           "timestamp_tls_key": deployment.env["ATLAS_TIMESTAMP_TLS_KEY"]}
    hook = AtlasHook("atlas_deploy_test",
                     config=StoreConfig(**STORE_CONFIG, initial_shards=SHARDS, timestamp_servers=servers, **tls))
    store = hook.get_store()
    store.initialize(shards=SHARDS)
    yield store
    hook.close()
