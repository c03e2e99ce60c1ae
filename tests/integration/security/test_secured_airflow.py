"""``atlas_targeted_sweep`` with the real ``dag.test()`` on the secured node, as the least-privilege sweeper
(exactly the grants ``atlas-sweep grants`` prints), through an Airflow ``cassandra`` connection with TLS
extras (``ssl``, a pinned ``ssl_ca``, hostname verification on by default): in the task and in Spark mode
(``spark-submit`` on ``local[2]``). A wrong password fails the first task at once, never retried, with a
message that names the refusal and not the password."""
from __future__ import annotations

import json
import uuid

import pytest

from airflow_atlas.serialisation import to_json
from tests.airflow.conftest import (
    CONN_ID,
    FAST,
    SHARDS,
    engine_config,
    load_dag,
    set_connection,
    set_settings,
    settle,
    task_instances,
    task_states,
    xcom,
)
from tests.integration.cli.conftest import Cli

pytestmark = [pytest.mark.cassandra, pytest.mark.airflow]

PASSWORD = "Sw33p:er/p@ss%" + uuid.uuid4().hex[:8]  # needs percent-encoding in a URL


@pytest.fixture(scope="module")
def sweeper(secure_node, secure_keyspace, tmp_path_factory):
    """The store initialised by the administrator (tables created by its workload); a sweeper role with
    the printed grants. Returns the role name."""
    from airflow_atlas.store import AtlasStore
    from airflow_atlas.workload import WorkloadSpec, run_workload

    with AtlasStore.open(secure_node.admin_url(secure_keyspace), config=engine_config()) as admin:
        admin.initialize(shards=SHARDS)
        run_workload(admin, WorkloadSpec(transactions=5, rows=5, seed=1))
    role = f"sweeper_{uuid.uuid4().hex[:8]}"
    cwd = tmp_path_factory.mktemp("secure-airflow")
    printed = Cli(secure_node.admin_url(secure_keyspace), cwd).json("grants", "--role", "sweeper", "--name", role)["grants"]
    assert {g["permission"] for g in printed} == {"SELECT", "MODIFY"}, printed
    escaped = PASSWORD.replace("'", "''")
    secure_node.cql(f"CREATE ROLE {role} WITH LOGIN = true AND PASSWORD = '{escaped}'", *(g["cql"].rstrip(";") for g in printed))
    yield role
    secure_node.cql(f"DROP ROLE IF EXISTS {role}")


def connection(secure_node, keyspace: str, login: str, password: str, **extra) -> dict:
    return {"conn_type": "cassandra", "host": secure_node.host, "port": 9042, "schema": keyspace, "login": login,
            "password": password, "extra": {"ssl": True, "ssl_ca": str(secure_node.ca), **extra}}


@pytest.fixture
def sweeper_store(secure_node, secure_keyspace, sweeper, monkeypatch, airflow_home):
    """The store as the sweeper sees it through the connection ``atlas_test`` (opened by the AtlasHook)."""
    from airflow_atlas.airflow.hooks.atlas import AtlasHook

    set_connection(monkeypatch, CONN_ID, connection(secure_node, secure_keyspace, sweeper, PASSWORD))
    set_settings(monkeypatch, **FAST)
    hook = AtlasHook(CONN_ID, config=engine_config())
    try:
        yield hook.get_store()
    finally:
        hook.close()


def sweep_and_check(store, secure_node, keyspace: str, role: str, tmp_path, *, mode: str):
    """A workload as the sweeper, the DAG run, the oracle, then ``atlas-sweep verify`` as the sweeper."""
    from airflow_atlas.oracle import Reader, compare, observe, obsolete_versions
    from airflow_atlas.workload import WorkloadSpec, run_workload

    run_workload(store, WorkloadSpec(transactions=40, rows=20, seed=7))  # existing tables: the sweeper may
    settle(store)
    readers = [Reader(store.timestamps.fresh_timestamp())]
    before = observe(store, readers)
    run = load_dag("atlas_targeted_sweep").test()
    assert str(run.state) == "success", task_states(run)
    sweep_ts = xcom(run, "compute_sweep_timestamps")
    summary = xcom(run, "summary")
    assert summary["failed_pairs"] == [] and summary["cells_tombstoned"] > 0, summary
    swept = [t for i in range(len(xcom(run, "plan"))) for t in xcom(run, "sweep", map_index=i)]
    assert swept and {t["execution_mode"] for t in swept} == {mode}, swept
    assert compare(before, observe(store, readers), sweep_ts) == []
    assert obsolete_versions(store, sweep_ts) == []
    Cli(secure_node.url(role, PASSWORD, keyspace), tmp_path).ok("verify")
    return run


def test_targeted_sweep_in_task_as_the_sweeper_over_tls(sweeper_store, secure_node, secure_keyspace, sweeper, tmp_path):
    sweep_and_check(sweeper_store, secure_node, secure_keyspace, sweeper, tmp_path, mode="in_task")


def test_targeted_sweep_in_spark_mode_as_the_sweeper_over_tls(sweeper_store, secure_node, secure_keyspace, sweeper,
                                                              monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    set_settings(monkeypatch, **FAST, execution_mode="spark", spark_conn_id="spark_test", spark_group_size=SHARDS * 2)
    sweep_and_check(sweeper_store, secure_node, secure_keyspace, sweeper, tmp_path, mode="spark")


def test_a_wrong_password_fails_at_once_without_retry(secure_node, secure_keyspace, sweeper, monkeypatch, airflow_home,
                                                     caplog, capfd):
    wrong = "wr0ng/p@ss-" + uuid.uuid4().hex[:8]
    set_connection(monkeypatch, CONN_ID, connection(secure_node, secure_keyspace, sweeper, wrong))
    set_settings(monkeypatch, **FAST)  # retries 2: a retriable error would be tried again
    run = load_dag("atlas_targeted_sweep").test()
    assert str(run.state) == "failed", task_states(run)
    failed = [ti for ti in task_instances(run).values() if str(ti.state) == "failed"]
    assert failed, task_states(run)
    assert all(ti.try_number == 1 for ti in failed), {ti.task_id: ti.try_number for ti in failed}
    out, err = capfd.readouterr()
    text = caplog.text + out + err
    assert "refused the credentials" in text, text[-3000:]
    from urllib.parse import quote

    for form in (wrong, quote(wrong, safe=""), quote(wrong)):
        assert form not in text


def test_the_connection_verifies_the_hostname_by_default(secure_node, secure_keyspace, sweeper, monkeypatch, airflow_home):
    """Through another address (a forwarder on 127.0.0.10) the node's certificate (for 127.0.0.6) is refused
    with a TLS error, not retried; ``ssl_verify: false`` is the explicit way out."""
    from airflow_atlas.airflow.hooks.atlas import AtlasHook
    from airflow_atlas.errors import StoreTlsError, is_retriable
    from tests.integration.security.test_secured_node import _forwarder

    conn = connection(secure_node, secure_keyspace, sweeper, PASSWORD)
    with _forwarder("127.0.0.10", (secure_node.host, 9042)):
        set_connection(monkeypatch, CONN_ID, {**conn, "host": "127.0.0.10"})
        with AtlasHook(CONN_ID) as hook, pytest.raises(StoreTlsError) as refused:
            hook.get_store()
        assert not is_retriable(refused.value) and PASSWORD not in str(refused.value)
        set_connection(monkeypatch, CONN_ID, {**conn, "host": "127.0.0.10", "extra": {**conn["extra"], "ssl_verify": False}})
        with AtlasHook(CONN_ID) as hook:
            assert hook.get_store().number_of_shards() == SHARDS


# ----- Spark standalone master (spark://127.0.0.5:7077: tests/conftest.py's spark_master starts it) ----------
MASTER = "spark://127.0.0.5:7077"
STANDALONE_CONF = {"spark.ui.enabled": "false", "spark.cores.max": "2", "spark.executor.memory": "512m"}


@pytest.fixture
def standalone(spark_master, monkeypatch, tmp_path):
    assert spark_master["spark.master"] == MASTER, spark_master
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_STANDALONE", json.dumps({"conn_type": "spark", "host": MASTER}))
    monkeypatch.setenv("ATLAS_SPARK_ARTIFACT_DIR", str(tmp_path / "artifacts"))
    return "spark_standalone"


def test_targeted_sweep_in_spark_mode_on_the_standalone_master(sweeper_store, secure_node, secure_keyspace, sweeper,
                                                               standalone, monkeypatch, tmp_path):
    set_settings(monkeypatch, **FAST, execution_mode="spark", spark_conn_id=standalone, spark_group_size=SHARDS * 2,
                 spark_driver_host="127.0.0.5", spark_conf=STANDALONE_CONF)
    run = sweep_and_check(sweeper_store, secure_node, secure_keyspace, sweeper, tmp_path, mode="spark")
    swept = xcom(run, "sweep", map_index=0)
    assert {t["result"]["status"] for t in swept} == {"caught_up"}, swept


def test_the_pinned_ca_travels_with_the_job(sweeper_store, secure_node, secure_keyspace, sweeper, standalone):
    """The CA named by a path that exists for the driver only: ``../<dir>/ca.pem`` from spark-submit's
    working directory (a private directory in the temp dir) is a file there, and nothing in an executor's
    working directory (``work/<app>/<n>`` of its worker). The executors pin the content the driver read."""
    import shutil
    import tempfile
    from pathlib import Path

    from airflow_atlas.airflow.execution.spark import submit
    from airflow_atlas.airflow.execution.spark_types import RunSettings
    from airflow_atlas.kvs.address import StoreAddress
    from airflow_atlas.spark import TargetedSweepJob

    directory = Path(tempfile.gettempdir()) / f"atlas-ca-only-here-{uuid.uuid4().hex[:8]}"
    directory.mkdir()
    try:
        shutil.copy(secure_node.ca, directory / "ca.pem")
        url = secure_node.url(sweeper, PASSWORD, secure_keyspace, create_keyspace="false")
        url = url.replace(f"ssl_ca={secure_node.ca}", f"ssl_ca=../{directory.name}/ca.pem")
        pairs = [(shard, strategy) for shard in range(SHARDS) for strategy in ("CONSERVATIVE", "THOROUGH")]
        doc = to_json(submit(TargetedSweepJob(pairs=pairs, batch_limit=50),
                     RunSettings(spark_conn_id=standalone, settings={"unreadable_window_seconds": 0},
                                 driver_host="127.0.0.5", spark_conf=dict(STANDALONE_CONF)),
                     StoreAddress.from_url(url)))
    finally:
        shutil.rmtree(directory)
    assert doc["ok"] and doc["master"] == MASTER, doc
    executors = {r["executor"]["pid"] for r in doc["results"]}
    assert executors and all(r["status"] in ("caught_up", "skipped_locked") for r in doc["results"]), doc
    assert PASSWORD not in json.dumps(doc)
