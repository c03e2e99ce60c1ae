"""Every DAG of dags/ runs as the least-privilege sweeper on the secured node (``dag.test()``, a TLS Airflow
connection with a pinned CA): ``atlas_targeted_sweep`` is in test_secured_airflow.py and test_rotation.py;
here ``atlas_full_sweep``, ``atlas_manual_sweep``, ``atlas_scrub``, ``example_bulk_load_then_sweep`` and
``atlas_compaction`` (nodetool over the node's authenticated JMX: ``-u atlas_jmx -pwf FILE``). The
administrator creates every table first (the sweeper has no CREATE); the sweeper gets exactly the grants
``atlas-sweep grants`` prints."""
from __future__ import annotations

import uuid

import pytest

from tests.airflow.conftest import (
    CONN_ID,
    FAST,
    engine_config,
    load_dag,
    set_connection,
    set_settings,
    settle,
    task_states,
    xcom,
)
from tests.airflow.test_dashboard_app import api_app  # noqa: F401
from tests.conftest import CASSANDRA_SCRIPT
from tests.integration.security.conftest import grant_sweeper
from tests.integration.security.test_secured_airflow import connection

pytestmark = [pytest.mark.cassandra, pytest.mark.airflow]

PASSWORD = "d@gs/sw33p:" + uuid.uuid4().hex[:8]
TABLES = {"legacy_data": "THOROUGH", "secrets": "THOROUGH", "example_events": "THOROUGH", "big": "THOROUGH"}


@pytest.fixture(scope="module")
def role(secure_node, secure_keyspace, tmp_path_factory):
    from airflow_atlas.store import AtlasStore
    from airflow_atlas.workload import WorkloadSpec, run_workload

    with AtlasStore.open(secure_node.admin_url(secure_keyspace), config=engine_config()) as admin:
        admin.initialize(shards=2)
        run_workload(admin, WorkloadSpec(transactions=5, rows=5, seed=1))
        for table, strategy in TABLES.items():
            admin.create_table(table, strategy)
    name = grant_sweeper(secure_node, secure_keyspace, PASSWORD, tmp_path_factory.mktemp("secure-dags"))
    yield name
    secure_node.cql(f"DROP ROLE IF EXISTS {name}")


@pytest.fixture
def store(secure_node, secure_keyspace, role, monkeypatch, airflow_home):
    """The sweeper's store, and the connection ``atlas_test`` as the sweeper."""
    from airflow_atlas.store import AtlasStore

    set_connection(monkeypatch, CONN_ID, connection(secure_node, secure_keyspace, role, PASSWORD))
    set_settings(monkeypatch, **FAST, in_task_group_size=4)
    url = secure_node.url(role, PASSWORD, secure_keyspace, create_keyspace="false")
    with AtlasStore.open(url, config=engine_config()) as opened:
        yield opened


def test_full_sweep_as_the_sweeper(store):
    from airflow_atlas.oracle import obsolete_versions
    from tests.airflow.dags.test_atlas_full_sweep import _write_without_queue

    _write_without_queue(store, "legacy_data", rounds=3, rows=10)
    settle(store)
    run = load_dag("atlas_full_sweep").test(run_conf={"tables": ["legacy_data"], "parts": 2})
    assert str(run.state) == "success", task_states(run)
    sweep_ts = xcom(run, "plan")[0]["sweep_ts"]
    assert obsolete_versions(store, {"THOROUGH": sweep_ts, "CONSERVATIVE": 0}, ["legacy_data"]) == []
    assert xcom(run, "publish_swept_tables")["legacy_data"]["versions_deleted"] == 20


def test_manual_sweep_and_scrub_as_the_sweeper(store):
    from airflow_atlas.kvs.api import Cell

    cells = [Cell(f"user{i}".encode(), b"ssn") for i in range(5)]
    store.transactions.run(lambda txn: txn.put("secrets", {c: b"123-45-6789" for c in cells}))
    store.transactions.run(lambda txn: txn.delete("secrets", cells), hard_delete=True)
    settle(store)
    manual = load_dag("atlas_manual_sweep").test(run_conf={"shards": [0, 1], "strategy": "THOROUGH"})
    assert str(manual.state) == "success", task_states(manual)
    scrub = load_dag("atlas_scrub").test()
    assert str(scrub.state) == "success", task_states(scrub)
    assert xcom(scrub, "scrub")["tables"]["secrets"] == 5
    assert not store.scrub_queue.pending()
    assert all(value != b"123-45-6789" for _, _, value in store.kvs.scan("secrets"))


def test_example_bulk_load_then_sweep_as_the_sweeper(store, monkeypatch):
    set_settings(monkeypatch, **FAST, in_task_group_size=4, sensor_poke_seconds=0.5)
    run = load_dag("example_bulk_load_then_sweep").test(run_conf={"rows": 50})
    assert str(run.state) == "success", task_states(run)
    assert xcom(run, "bulk_load", key="commit_ts") > 0


def test_compaction_over_authenticated_jmx_as_the_sweeper(store, secure_node, monkeypatch):
    """atlas_targeted_sweep tombstones a table, then atlas_compaction compacts it with nodetool over the
    node's JMX, which asks for a password (read by nodetool from its file, never on a command line)."""
    from airflow_atlas.kvs.api import Cell

    for version in range(3):
        store.transactions.run(lambda txn, v=version: txn.put("big", {Cell(f"r{i:03d}".encode(), b"c"): b"v%d" % v
                                                                      for i in range(40)}))
    settle(store)
    nodetool = {"nodetool_command": [str(CASSANDRA_SCRIPT), "nodetool", "-u", "atlas_jmx", "-pwf",
                                     str(secure_node.nodetool_password_file)],
                "nodetool_jmx_targets": ["127.0.0.1:7206"]}
    set_settings(monkeypatch, **FAST, in_task_group_size=4, compaction_threshold_tombstones=30, **nodetool)
    sweep = load_dag("atlas_targeted_sweep").test()
    assert str(sweep.state) == "success", task_states(sweep)
    run = load_dag("atlas_compaction").test()
    assert str(run.state) == "success", task_states(run)
    report = xcom(run, "compact")
    assert "big" in report["compacted"], report
    assert report["compacted"]["big"]["space_before_bytes"] > 0, report
    assert report["pending"]["big"] == 0, report


def test_the_dashboard_reads_the_status_over_tls_as_the_sweeper(store, api_app):  # noqa: F811
    """The dashboard (Airflow's API server app, in-process) opens the store through the sweeper's TLS
    connection; its page and status JSON carry no form of the password."""
    from tests.integration.security.test_secret_leaks import forms

    client, token = api_app
    headers = {"Authorization": f"Bearer {token}"}
    status = client.get("/atlas/api/status", headers=headers)
    assert status.status_code == 200, status.text
    assert status.json()["number_of_shards"] == 2
    page = client.get("/atlas/", headers=headers)
    assert page.status_code == 200, page.text
    for place, text in (("status JSON", status.text), ("dashboard page", page.text)):
        assert not [form for form in forms(PASSWORD) if form in text], f"the password leaked into the {place}"
