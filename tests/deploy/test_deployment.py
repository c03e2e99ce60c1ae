"""The compose deployment's Airflow part as users run it (issue 21 item 1), started once for the module by
conftest.py (scripts/deploy.sh: Postgres, Redis, CeleryExecutor with two workers, from the built wheel in a
clean virtualenv, configured by docker/airflow-common.env as docker-compose.yml is). In order:

1. the plugin and the provider's connection types are registered (``airflow plugins``, ``airflow providers hooks``);
2. the six DAGs parsed, no import error;
3. the dashboard answers 401 without a login, 403 with a token the API server did not sign, 200 with the
   admin's token (the password the API server generated into its passwords file);
4. a run of atlas_targeted_sweep triggered through the REST API succeeds on the Cassandra store and tombstones
   the obsolete versions of a table while atlas_compaction is paused (its asset event is lost: Airflow keeps
   no asset-triggered run for a paused DAG); atlas_compaction is unpaused and a second run, triggered through
   the CLI (``airflow dags trigger``), succeeds, sweeping nothing of the table: it announces the table due
   for compaction, atlas_compaction follows on its own (asset-scheduled), counts the tombstones from the
   store's sweep history and reclaims the space (``nodetool tablestats`` on the node);
4a. the sweep's per-pair metrics reached the deployment's StatsD receiver (statsd-exporter, its /metrics);
5. a real Prometheus scrapes /atlas/metrics from the deployment's api-server with a bearer token;
6. the embedded store: the Variable's store_conn_id switched to ``atlas_embedded`` (a UI edit, taking effect
   at the next run), a CLI-triggered run sweeps it.

First, what a fresh deployment gives a new user (issue 32 items 6, 7, 8, 11): its first scheduled runs of
atlas_targeted_sweep and atlas_scrub succeed (``init`` initialised the store); the seeded Variable fits the
process deployment (in-task sweeps, no other service's address); the documented Variable edit kept its
description; the api-server's generated passwords file is private (0600).
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime

import pytest

from tests.conftest import CASSANDRA_SCRIPT

from .conftest import BASE_URL, HOST, SHARDS, STATE, STORE_CONFIG, log_tails, settings_value, statsd_samples

pytestmark = [pytest.mark.deploy, pytest.mark.cassandra, pytest.mark.timeout(1800)]

DAG_IDS = {"atlas_compaction", "atlas_full_sweep", "atlas_manual_sweep", "atlas_scrub", "atlas_targeted_sweep",
           "example_bulk_load_then_sweep"}
TABLE = "deploy_compact_me"


def _store(conn_json: str, conn_id: str):
    """The deployment's store opened in the test process through the same connection (an env connection)."""
    from airflow_atlas.airflow.hooks.atlas import AtlasHook
    from airflow_atlas.config import StoreConfig

    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = conn_json
    hook = AtlasHook(conn_id, config=StoreConfig(**STORE_CONFIG, initial_shards=SHARDS))
    store = hook.get_store()
    store.initialize(shards=SHARDS)
    return hook, store


def _settle(store) -> None:
    store.sweep_timestamps.all()
    time.sleep(STORE_CONFIG["unreadable_window_seconds"] + 0.5)


def _trigger_rest(deployment, dag_id: str, conf: dict | None = None) -> str:
    r = deployment.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf or {}})
    assert r.status_code == 200, r.text
    return r.json()["dag_run_id"]


def _trigger_cli(deployment, dag_id: str) -> str:
    out = deployment.airflow("dags", "trigger", dag_id, "--output", "json").stdout
    (run,) = json.loads(next(line for line in reversed(out.splitlines()) if line.startswith("[{")))
    return run["dag_run_id"]


def _assert_success(deployment, dag_id: str, run_id: str) -> dict:
    run = deployment.wait_run(dag_id, run_id)
    assert run["state"] == "success", f"{dag_id} {run_id}: {deployment.task_states(dag_id, run_id)}\n{log_tails()}"
    return run


# ----- a fresh deployment (issue 32) ------------------------------------------------------------------------
def _first_scheduled_run(deployment, dag_id: str) -> dict:
    deadline = time.monotonic() + 300
    while True:
        runs = deployment.api("GET", f"/api/v2/dags/{dag_id}/dagRuns", params={"limit": 100}).json()["dag_runs"]
        scheduled = sorted((r for r in runs if r["run_type"] == "scheduled"), key=lambda r: r["run_after"])
        if scheduled:
            return scheduled[0]
        assert time.monotonic() < deadline, f"no scheduled run of {dag_id} after 300 s\n{log_tails()}"
        time.sleep(2)


def test_the_first_scheduled_runs_of_a_fresh_deployment_succeed(deployment):
    """Item 6: `scripts/deploy.sh init` ran `atlas-sweep init --conn-id atlas_default` (as compose's
    airflow-init does), so the runs the scheduler starts at once find the store's tables (before: they
    failed with TableNotFoundError: table '_timestamp', not retried). Runs before any test touched the store."""
    for dag_id in ("atlas_targeted_sweep", "atlas_scrub"):
        run = deployment.wait_run(dag_id, _first_scheduled_run(deployment, dag_id)["dag_run_id"])
        assert run["state"] == "success", f"{dag_id}: {deployment.task_states(dag_id, run['dag_run_id'])}\n{log_tails()}"


def test_the_seeded_settings_fit_the_process_deployment(deployment):
    """Item 7: the seed is the deployment's own (not compose's Spark mode, 16 shards, /opt/cassandra nodetool)
    and spark_default names no service the deployment did not start (before: 127.0.0.5:7077, the address of
    scripts/spark.sh's master, where someone else's master may run)."""
    seeded = deployment.seeded["atlas_settings"]["value"]
    assert seeded["execution_mode"] == "in_task" and seeded["shard_count"] == SHARDS, seeded
    assert seeded["nodetool_command"] == [str(CASSANDRA_SCRIPT), "nodetool"] and seeded["nodetool_jmx_targets"] == []
    spark = json.loads(deployment.env["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert spark["host"] == f"spark://{HOST}", spark
    assert "127.0.0.5" not in deployment.script("env", timeout=60).stdout


def test_the_documented_variable_edit_keeps_the_description(deployment):
    """Item 8: the edit docs/DEPLOYMENT.md documents (conftest.py's :func:`edit_variables`: export, edit, import with
    overwrite) changed the value and kept the seeded description (``airflow variables set`` dropped it)."""
    r = deployment.api("GET", "/api/v2/variables/atlas_settings")
    assert r.status_code == 200, r.text
    variable = r.json()
    assert json.loads(variable["value"]) == settings_value()
    described = deployment.seeded["atlas_settings"]["description"]
    assert described and "unreadable_window_seconds" in described
    assert variable["description"] == described


def test_the_generated_passwords_file_is_private(deployment):
    """Item 11: the api-server's generated passwords (the admin's among them) are readable by their owner only."""
    path = STATE / "auth" / "passwords.json"
    assert "admin" in json.loads(path.read_text())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, oct(path.stat().st_mode)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, oct(path.parent.stat().st_mode)


def test_the_timestamp_servers_require_the_deployments_client_certificate(deployment, cassandra_store):
    """Mutual TLS (issue 45): `scripts/deploy.sh init` made the CA, server and client certificates in its state
    (`atlas-sweep certs`, keys 0600); both servers serve them and require a client certificate: a client that pins
    the CA but presents none is refused, naming the server, while the deployment's own clients (this module's
    store, with the client certificate of ATLAS_TIMESTAMP_TLS_CERT/_KEY) draw."""
    from airflow_atlas.errors import StoreAccessError
    from airflow_atlas.timestamps.client import TimestampClient
    from airflow_atlas.timestamps.tls import ClientTls

    tls = STATE / "tls"
    assert deployment.env["ATLAS_TIMESTAMP_TLS_CA"] == str(tls / "ca.pem")
    for key in ("ca.key", "server.key", "client.key"):
        assert stat.S_IMODE((tls / key).stat().st_mode) == 0o600, key
    assert cassandra_store.timestamps.fresh_timestamp() > 0
    for address in deployment.env["ATLAS_TIMESTAMP_SERVERS"].split(","):
        client = TimestampClient(cassandra_store.kvs.keyspace, [address], lambda: "", retry_seconds=1.5,
                                 tls=ClientTls(str(tls / "ca.pem")))
        try:
            with pytest.raises(StoreAccessError, match=f"timestamp server {address} closed the TLS connection"):
                client.fresh_timestamp()
        finally:
            client.close()


# ----- 1, 2: registered, parsed ---------------------------------------------------------------------------
def test_plugin_and_connection_types_are_registered(deployment):
    plugins = deployment.airflow("plugins", "--output", "json").stdout
    assert "airflow_atlas" in plugins, plugins[-2000:]
    hooks = json.loads(deployment.airflow("providers", "hooks", "--output", "json").stdout)
    conn_types = {h["connection_type"]: h["package_name"] for h in hooks}
    assert conn_types.get("atlas_embedded") == "airflow-atlas", conn_types
    assert "cassandra" in conn_types, conn_types  # the Cassandra store's connection type (its provider, in the lock)
    # installed from the wheel into the clean venv, not from the repository
    where = subprocess.run([str(deployment.venv / "bin" / "python"), "-c",
                            "import airflow_atlas; print(airflow_atlas.__file__)"], env=deployment.env,
                           capture_output=True, text=True, timeout=60, cwd=STATE)
    assert where.stdout.startswith(str(deployment.venv)), where


def test_every_dag_parses_without_import_errors(deployment):
    r = deployment.api("GET", "/api/v2/importErrors")
    assert r.status_code == 200 and r.json()["total_entries"] == 0, r.text
    dags = deployment.api("GET", "/api/v2/dags", params={"limit": 100}).json()["dags"]
    assert {d["dag_id"] for d in dags} == DAG_IDS
    assert not [d["dag_id"] for d in dags if d["is_paused"]]  # AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION=False


# ----- 3: the dashboard's authentication ------------------------------------------------------------------
def test_dashboard_answers_401_403_200(deployment, cassandra_store):
    import httpx
    import jwt

    assert httpx.get(f"{BASE_URL}/atlas/", timeout=60).status_code == 401
    forged = jwt.encode({"sub": "admin", "role": "admin", "exp": int(time.time()) + 600}, "x" * 64, algorithm="HS512")
    assert httpx.get(f"{BASE_URL}/atlas/", headers={"Authorization": f"Bearer {forged}"}, timeout=60).status_code == 403
    page = deployment.api("GET", "/atlas/")
    assert page.status_code == 200 and "atlas" in page.text.lower(), page.text[:500]
    status = deployment.api("GET", "/atlas/api/status")
    assert status.status_code == 200, status.text
    assert status.json()["number_of_shards"] == SHARDS


# ----- 4: REST- and CLI-triggered runs; compaction follows --------------------------------------------------
def _overwrite(store, rounds: int = 6, rows: int = 150, value_bytes: int = 2000) -> None:
    from airflow_atlas.kvs.api import Cell

    for _ in range(rounds):
        txn = store.transactions.begin()
        txn.put(TABLE, {Cell(f"row{i:04d}".encode(), b"c"): os.urandom(value_bytes) for i in range(rows)})
        txn.commit()


def _when(iso: str | None) -> datetime:
    return datetime.fromisoformat((iso or "1970-01-01T00:00:00+00:00").replace("Z", "+00:00"))


def _compaction_of(deployment, table: str, after: datetime, timeout: float = 300) -> tuple[dict, dict]:
    """The first successful atlas_compaction run started after ``after`` that compacted ``table``."""
    deadline = time.monotonic() + timeout
    seen: dict = {}
    while time.monotonic() < deadline:
        deployment.check_alive()
        runs = deployment.api("GET", "/api/v2/dags/atlas_compaction/dagRuns",
                              params={"order_by": "start_date", "limit": 50}).json()["dag_runs"]
        for run in runs:
            seen[run["dag_run_id"]] = (run["run_type"], run["state"])
            if run["state"] == "success" and _when(run["start_date"]) > after:
                report = deployment.xcom("atlas_compaction", run["dag_run_id"], "compact")
                if table in (report.get("compacted") or {}):
                    return run, report
        time.sleep(3)
    raise AssertionError(f"no atlas_compaction run compacted {table} after {after}: {seen}\n{log_tails()}")


def _pause(deployment, dag_id: str, paused: bool) -> None:
    r = deployment.api("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": paused})
    assert r.status_code == 200, r.text


def _triggering_events(deployment, run: dict) -> list[dict]:
    r = deployment.api("GET", f"/api/v2/dags/{run['dag_id']}/dagRuns/{run['dag_run_id']}/upstreamAssetEvents")
    assert r.status_code == 200, r.text
    return r.json()["asset_events"]


def test_rest_and_cli_runs_succeed_and_compaction_follows_the_sweep(deployment, cassandra_store):
    """The sweep may be the REST-triggered run or the scheduled one (every 5 minutes, as compose sets it)
    that came first: whichever tombstoned the table did so while atlas_compaction was paused. Unpaused, it
    compacts after the next sweep run (issue 32 item 2: before, it waited for a sweep that tombstoned the
    table again)."""
    from airflow_atlas.airflow.hooks import nodetool

    store = cassandra_store
    store.create_table(TABLE, "THOROUGH", gc_grace_seconds=0)
    runner = nodetool.LocalNodetoolRunner([str(CASSANDRA_SCRIPT), "nodetool"], timeout_seconds=600)
    # Only the compaction may reclaim space (the node's background compaction would race the measurement).
    runner.run(["disableautocompaction", deployment.keyspace, TABLE])
    _overwrite(store)
    _settle(store)
    nodetool.flush(runner, deployment.keyspace, TABLE)
    live_before = nodetool.table_stats(runner, deployment.keyspace, TABLE)["space_used_live"]
    assert live_before > 6 * 150 * 2000 * 0.5

    _pause(deployment, "atlas_compaction", True)
    try:
        began = time.monotonic()
        _assert_success(deployment, "atlas_targeted_sweep", _trigger_rest(deployment, "atlas_targeted_sweep"))
        print(f"[deploy] REST-triggered atlas_targeted_sweep succeeded in {time.monotonic() - began:.0f}s")
        counted = store.history.tombstones_since_compaction(TABLE).count
        assert counted >= 150, counted  # swept while atlas_compaction was paused: its asset event is lost
    finally:
        unpaused = datetime.now(UTC)
        _pause(deployment, "atlas_compaction", False)

    began = time.monotonic()
    _assert_success(deployment, "atlas_targeted_sweep", _trigger_cli(deployment, "atlas_targeted_sweep"))
    print(f"[deploy] CLI-triggered atlas_targeted_sweep succeeded in {time.monotonic() - began:.0f}s")

    compaction_run, report = _compaction_of(deployment, TABLE, after=unpaused)
    # Asset-triggered, not forced: it compacted because the store's sweep history counted at least
    # compaction_threshold_tombstones (100) tombstones for the table; the event that triggered it is a sweep
    # run's announcement of the due table (a run after the unpause, which tombstoned nothing of it).
    assert compaction_run["run_type"] == "asset_triggered" and not compaction_run["conf"].get("force"), compaction_run
    due = [e["extra"] for e in _triggering_events(deployment, compaction_run) if e["extra"].get("table") == TABLE]
    assert any(extra.get("tombstones_since_compaction", 0) >= 100 for extra in due), due
    compacted = report["compacted"][TABLE]
    print(f"[deploy] atlas_compaction {compaction_run['dag_run_id']} compacted {TABLE}: {compacted}")
    assert compacted["space_after_bytes"] < compacted["space_before_bytes"], compacted
    live_after = nodetool.table_stats(runner, deployment.keyspace, TABLE)["space_used_live"]
    assert live_after < live_before, (live_before, live_after)  # the node's own figure
    after = store.history.tombstones_since_compaction(TABLE)
    assert after.last_compaction is not None and _when(compaction_run["start_date"]).timestamp() <= after.last_compaction["at"]


# ----- 4a: StatsD reaches a real receiver -------------------------------------------------------------------
def test_the_sweeps_per_pair_metrics_reach_the_statsd_exporter(deployment, cassandra_store):
    """Airflow's StatsD (AIRFLOW__METRICS__STATSD_*) to the deployment's statsd-exporter, through compose's
    mapping: the THOROUGH pairs that tombstoned test 4's table have their runs and tombstones there."""
    runs = statsd_samples("airflow_atlas_sweep_shard_runs_total")
    tombstones = statsd_samples("airflow_atlas_sweep_tombstones_written_total")
    backlog = statsd_samples("airflow_atlas_sweep_backlog_entries")
    print(f"[deploy] statsd-exporter: runs {runs}, tombstones {tombstones}")
    thorough = {("THOROUGH", str(shard)) for shard in range(SHARDS)}
    assert thorough <= set(runs) and thorough <= set(backlog), (runs, backlog)
    assert sum(tombstones.get(pair, 0) for pair in thorough) >= 150, tombstones  # test 4's table: 150 cells


# ----- 5: Prometheus scrapes the api-server -----------------------------------------------------------------
def test_prometheus_scrapes_the_deployments_metrics(deployment, cassandra_store, tmp_path, prometheus_binary):
    from airflow_atlas.status import compute_status

    (tmp_path / "token").write_text(deployment.token())
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: atlas\n    metrics_path: /atlas/metrics\n"
        f"    authorization:\n      credentials_file: {tmp_path / 'token'}\n"
        f"    static_configs:\n      - targets: ['{HOST}:8080']\n")
    log = open(tmp_path / "prometheus.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(["timeout", "300", prometheus_binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address={HOST}:9090",
                             "--log.level=warn"], stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)

    def query(expr: str) -> list:
        url = f"http://{HOST}:9090/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.load(response)["data"]["result"]

    try:
        deadline = time.monotonic() + 90
        result: list = []
        while time.monotonic() < deadline:
            try:
                result = query("last_over_time(atlas_sweep_backlog_entries[1m])")
                if result and query("atlas_status_up == 1"):
                    break
            except OSError:
                pass
            time.sleep(1)
        assert result, f"Prometheus scraped nothing: {(tmp_path / 'prometheus.log').read_text()[-2000:]}"
        pairs = {(int(r["metric"]["shard"]), r["metric"]["strategy"]) for r in result}
        want = compute_status(cassandra_store)
        assert pairs == {(r["shard"], r["strategy"]) for r in want["shards"]}
        assert len(pairs) == 2 * SHARDS
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


# ----- 6: the embedded store ----------------------------------------------------------------------------------
def test_a_run_sweeps_the_embedded_store(deployment):
    from airflow_atlas.status import compute_status
    from airflow_atlas.workload import WorkloadSpec, run_workload

    hook, store = _store(deployment.env["AIRFLOW_CONN_ATLAS_EMBEDDED"], "atlas_deploy_embedded_test")
    try:
        run_workload(store, WorkloadSpec(transactions=40, rows=20, seed=3))
        _settle(store)
        before = {(r["shard"], r["strategy"]): r["backlog_entries"] for r in compute_status(store)["shards"]}
        assert sum(before.values()) > 0
        deployment.airflow("variables", "set", "atlas_settings", json.dumps(settings_value(store_conn_id="atlas_embedded")))
        began = time.monotonic()
        _assert_success(deployment, "atlas_targeted_sweep", _trigger_cli(deployment, "atlas_targeted_sweep"))
        print(f"[deploy] atlas_targeted_sweep on the embedded store succeeded in {time.monotonic() - began:.0f}s")
        after = {(r["shard"], r["strategy"]): r["backlog_entries"] for r in compute_status(store)["shards"]}
        assert sum(after.values()) < sum(before.values()), (before, after)
    finally:
        deployment.airflow("variables", "set", "atlas_settings", json.dumps(settings_value()), check=False)
        hook.close()
