"""Issue 22 item 4 on real processes: with a real password on the secured node, during and after
``atlas_targeted_sweep`` in Spark mode (spark-submit on ``local[2]``) and in the task, the password and its
URL-encoded forms appear in none of the places below, nor does the timestamp servers' client key of the tier
(mutual TLS, issue 45: the key travels in the Spark task closure, as the password does); a failure names the place.

* ``/proc/*/cmdline`` of every process (spark-submit, the driver's JVM and Python, the executors' Python
  workers), sampled every 0.1 s while the run goes on;
* the Spark application's environment JSON (the driver UI's REST endpoint ``/api/v1/applications/<id>/environment``),
  fetched while the application runs, and its event log (``spark.eventLog.enabled``: what a history server shows);
* the Airflow task logs of the ``dag.test()`` runs (what they wrote: captured output and log records, and
  any file under ``$AIRFLOW_HOME/logs``);
* every XCom value and every rendered template field of the runs (the metadata database);
* the status JSON (``atlas-sweep status --json`` as the sweeper) and the run's swept results;
* exception messages: a run with a wrong password (texts and the exception of the hook, with its chain).

The second test repeats the scan with the Spark job on the standalone master (127.0.0.5, scripts/spark.sh):
the executors' command lines (the workers' ``CoarseGrainedExecutorBackend`` JVMs and their Python workers),
the master's and the workers' JSON (``/json/``), the application's environment JSON. The dashboard's page and
status JSON are scanned by ``test_secured_dags.py`` (its dashboard test).

The third runs the job over Spark Connect (a real Connect server on loopback) to the secured node over TLS:
the Connect server's command line and log, the task logs, XComs, template fields.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
import traceback
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from airflow_atlas.timestamps.tls import KEY_ENV
from tests.airflow.conftest import CONN_ID, FAST, SHARDS, load_dag, set_connection, set_settings, settle, task_states
from tests.integration.cli.conftest import Cli
from tests.integration.security.test_secured_airflow import (  # noqa: F401
    PASSWORD,
    STANDALONE_CONF,
    connection,
    standalone,
    sweeper,
    sweeper_store,
)

pytestmark = [pytest.mark.cassandra, pytest.mark.airflow, pytest.mark.spark]

MASTER_UI = "http://127.0.0.5:8085"  # the standalone master's web UI (scripts/spark.sh, ATLAS_SPARK_WEBUI_PORT)


def forms(secret: str) -> set[str]:
    return {secret, quote(secret, safe=""), quote(secret), quote_plus(secret)}


def client_key_secret() -> str:
    """A line of the tier's timestamp client key (its PEM body, base64: what a leak of the key would show), which
    ``$ATLAS_TIMESTAMP_TLS_KEY`` names inside the tier (tests/timestamp_servers.py ``serving``)."""
    path = os.environ.get(KEY_ENV)
    assert path, f"the secured tier names a timestamp client key (${KEY_ENV})"
    return max((line for line in Path(path).read_text().splitlines() if not line.startswith("-----")), key=len)


class Places:
    """Text seen per place; :meth:`check` fails naming every place that holds a form of a secret."""

    def __init__(self, *secrets: str):
        self.forms = set().union(*(forms(secret) for secret in secrets))
        self.texts: dict[str, list[str]] = {}

    def add(self, place: str, text: str) -> None:
        self.texts.setdefault(place, []).append(text)

    def check(self, *required: str) -> None:
        missing = [p for p in required if not any(self.texts.get(p, []))]
        assert not missing, f"nothing was seen in {missing}: the scan of those places would prove nothing"
        leaks = sorted({place for place, texts in self.texts.items() for t in texts for f in self.forms if f in t})
        assert not leaks, f"a secret (the password, the timestamp client key) leaked into: {', '.join(leaks)}"


class ProcessSampler(threading.Thread):
    """Reads ``/proc/*/cmdline`` of every process and the Spark UI's environment JSON every 0.1 s."""

    def __init__(self, places: Places, ui_port: int, ui_host: str = "127.0.0.1", master_ui: str | None = None):
        super().__init__(daemon=True)
        self.places, self.ui_port, self.ui_host, self.master_ui = places, ui_port, ui_host, master_ui
        self.stop = threading.Event()
        self.commands: set[str] = set()

    def sweep(self):
        """Run ``atlas_targeted_sweep`` (``dag.test()``) while sampling; the run, which must succeed."""
        self.start()
        try:
            run = load_dag("atlas_targeted_sweep").test()
        finally:
            self.stop.set()
            self.join(timeout=10)
        assert str(run.state) == "success", task_states(run)
        return run

    def run(self) -> None:
        while not self.stop.is_set():
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit():
                    continue
                try:
                    command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if command and command not in self.commands:
                    self.commands.add(command)
                    self.places.add("/proc/*/cmdline", command)
            self._spark_environment()
            if self.master_ui:
                self._standalone()
            time.sleep(0.1)

    def _standalone(self) -> None:
        """The standalone master's JSON (applications, workers) and each worker's (its executors)."""
        try:
            master = urllib.request.urlopen(f"{self.master_ui}/json/", timeout=2).read().decode()
            self.places.add("Spark master JSON", master)
            for worker in json.loads(master).get("workers", []):
                address = worker.get("webuiaddress")
                if address:
                    self.places.add("Spark worker JSON", urllib.request.urlopen(f"{address}/json/", timeout=2).read().decode())
        except (OSError, ValueError):
            pass

    def _spark_environment(self) -> None:
        base = f"http://{self.ui_host}:{self.ui_port}/api/v1/applications"
        try:
            apps = json.loads(urllib.request.urlopen(base, timeout=1).read())
            for app in apps:
                env = urllib.request.urlopen(f"{base}/{app['id']}/environment", timeout=2).read().decode()
                self.places.add("Spark application environment JSON", env)
        except (OSError, ValueError):
            pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _database(places: Places, run) -> None:
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        for row in session.query(XComModel).filter_by(dag_id=run.dag_id, run_id=run.run_id):
            places.add("XCom values", json.dumps(XComModel.deserialize_value(row), default=str))
        for row in session.query(RenderedTaskInstanceFields).filter_by(dag_id=run.dag_id, run_id=run.run_id):
            places.add("rendered template fields", json.dumps(row.rendered_fields, default=str))


def _logs(places: Places, caplog, capfd, airflow_home) -> None:
    out, err = capfd.readouterr()
    places.add("Airflow task logs", caplog.text + out + err)
    for path in Path(airflow_home, "logs").rglob("*"):
        if path.is_file():
            places.add("Airflow task logs", path.read_text(errors="replace"))


def test_the_password_leaks_nowhere(sweeper_store, secure_node, secure_keyspace, sweeper, monkeypatch, tmp_path,  # noqa: F811
                                    airflow_home, caplog, capfd):
    from airflow_atlas.workload import WorkloadSpec, run_workload

    places = Places(PASSWORD, client_key_secret())
    ui_port = _free_port()
    event_logs = tmp_path / "spark-events"  # the application's event log (what a history server would show)
    event_logs.mkdir()
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    runs = []
    for mode in ("spark", "in_task"):
        run_workload(sweeper_store, WorkloadSpec(transactions=30, rows=20, seed=len(runs) + 3))
        settle(sweeper_store)
        extra = {"execution_mode": "spark", "spark_conn_id": "spark_test", "spark_group_size": SHARDS * 2,
                 "spark_conf": {"spark.ui.enabled": "true", "spark.ui.port": str(ui_port),
                                "spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{event_logs}"}
                 } if mode == "spark" else {}
        set_settings(monkeypatch, **FAST, **extra)
        sampler = ProcessSampler(places, ui_port)
        run = sampler.sweep()
        runs.append(run)
        if mode == "spark":
            seen = "\n".join(sampler.commands)
            assert "spark-submit" in seen or "SparkSubmit" in seen, "the sampler never saw spark-submit run"
            assert "pyspark" in seen, "the sampler never saw a Python worker"
    for path in event_logs.rglob("*"):
        if path.is_file():
            places.add("Spark event log", path.read_text(errors="replace"))
    for run in runs:
        _database(places, run)
    _logs(places, caplog, capfd, airflow_home)

    # status JSON, as the sweeper sees it (after the sampling: this command line holds the URL by design)
    status = Cli(secure_node.url(sweeper, PASSWORD, secure_keyspace), tmp_path).ok("status", "--json")
    places.add("status JSON", status.stdout + status.stderr)

    # exception messages: the same DAG with a wrong password, and the hook's exception with its chain
    wrong = "wr0ng:p@ss/" + uuid.uuid4().hex[:8]
    wrong_places = Places(wrong)
    set_connection(monkeypatch, CONN_ID, connection(secure_node, secure_keyspace, sweeper, wrong))
    set_settings(monkeypatch, **FAST)
    failed = load_dag("atlas_targeted_sweep").test()
    assert str(failed.state) == "failed"
    from airflow_atlas.airflow.hooks.atlas import AtlasHook

    with AtlasHook(CONN_ID) as hook, pytest.raises(Exception) as refused:
        hook.get_store()
    wrong_places.add("exception messages", "".join(traceback.format_exception(refused.value)) + repr(refused.value))
    _logs(wrong_places, caplog, capfd, airflow_home)
    _database(wrong_places, failed)
    assert "refused the credentials" in str(refused.value)

    probe = Places(PASSWORD)  # the scan itself finds every form
    for form in probe.forms:
        probe.add("probe", f"x{form}x")
        with pytest.raises(AssertionError, match="probe"):
            probe.check()
        probe.texts.clear()
    places.check("/proc/*/cmdline", "Spark application environment JSON", "Spark event log", "Airflow task logs", "XCom values",
                 "rendered template fields", "status JSON")
    wrong_places.check("exception messages", "Airflow task logs")
    assert os.environ.get(f"AIRFLOW_CONN_{CONN_ID.upper()}")  # (the test's own connection: env, by design)


def test_the_password_leaks_nowhere_on_the_standalone_master(sweeper_store, secure_node, secure_keyspace, sweeper,  # noqa: F811
                                                              standalone, monkeypatch, airflow_home, caplog, capfd):  # noqa: F811
    """The same scan with the Spark job on the standalone master (127.0.0.5): executors' command lines (the
    workers' CoarseGrainedExecutorBackend JVMs and their Python workers), the master's and the workers'
    JSON, the application's environment JSON (its UI on 127.0.0.5), the task logs, XComs, template fields."""
    from airflow_atlas.workload import WorkloadSpec, run_workload

    places = Places(PASSWORD, client_key_secret())
    ui_port = _free_port()
    conf = {**STANDALONE_CONF, "spark.ui.enabled": "true", "spark.ui.port": str(ui_port)}
    set_settings(monkeypatch, **FAST, execution_mode="spark", spark_conn_id=standalone, spark_group_size=SHARDS * 2,
                 spark_driver_host="127.0.0.5", spark_conf=conf)
    run_workload(sweeper_store, WorkloadSpec(transactions=30, rows=20, seed=11))
    settle(sweeper_store)
    sampler = ProcessSampler(places, ui_port, ui_host="127.0.0.5", master_ui=MASTER_UI)
    run = sampler.sweep()
    seen = "\n".join(sampler.commands)
    assert "CoarseGrainedExecutorBackend" in seen, "the sampler never saw an executor of the standalone master"
    _database(places, run)
    _logs(places, caplog, capfd, airflow_home)
    places.check("/proc/*/cmdline", "Spark master JSON", "Spark worker JSON", "Spark application environment JSON",
                 "Airflow task logs", "XCom values", "rendered template fields")


def test_the_password_leaks_nowhere_over_spark_connect(sweeper_store, secure_node, secure_keyspace, sweeper,  # noqa: F811
                                                       connect_server, connect_server_dir, monkeypatch, airflow_home,
                                                       caplog, capfd):
    """Spark Connect over TLS (issue 22 item 3) and its leak scan (item 4): ``atlas_targeted_sweep`` in Spark
    mode through a ``spark_connect`` connection (a real Connect server on loopback, ``connect_server``) as
    the sweeper, to the secured node over TLS with the pinned CA. The job runs in the Connect server's
    JVM and its Python workers (the CA's content travels with the job as for spark-submit, spark/ca.py). The
    password is in none of: the command lines (the Connect server's ``SparkConnectServer`` JVM, its Python
    workers), the Connect server's log, the task logs, XComs, rendered template fields."""
    from airflow_atlas.workload import WorkloadSpec, run_workload

    places = Places(PASSWORD, client_key_secret())
    host, port = connect_server.removeprefix("sc://").rsplit(":", 1)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_TEST",
                       json.dumps({"conn_type": "spark_connect", "host": f"sc://{host}", "port": int(port)}))
    set_settings(monkeypatch, **FAST, execution_mode="spark", spark_conn_id="spark_connect_test",
                 spark_group_size=SHARDS * 2)
    run_workload(sweeper_store, WorkloadSpec(transactions=30, rows=20, seed=13))
    settle(sweeper_store)
    sampler = ProcessSampler(places, _free_port())
    run = sampler.sweep()
    from tests.airflow.conftest import xcom

    swept = [t for i in range(len(xcom(run, "plan"))) for t in xcom(run, "sweep", map_index=i)]
    assert swept and {t["execution_mode"] for t in swept} == {"spark"}, swept
    assert all(t["result"]["status"] in ("caught_up", "skipped_locked") for t in swept), swept
    assert xcom(run, "summary")["cells_tombstoned"] > 0
    seen = "\n".join(sampler.commands)
    assert "SparkConnectServer" in seen, "the sampler never saw the Connect server's JVM"
    for path in Path(connect_server_dir).rglob("*.log"):
        places.add("Spark Connect server log", path.read_text(errors="replace"))
    _database(places, run)
    _logs(places, caplog, capfd, airflow_home)
    # (a server given by $ATLAS_TEST_SPARK_CONNECT has its log elsewhere: then that place is not required)
    server_log = () if os.environ.get("ATLAS_TEST_SPARK_CONNECT") else ("Spark Connect server log",)
    places.check("/proc/*/cmdline", *server_log, "Airflow task logs", "XCom values", "rendered template fields")
