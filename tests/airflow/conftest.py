"""Helpers for the Airflow tests: real connections (AIRFLOW_CONN_* env, JSON form), the settings
(AIRFLOW_VAR_ATLAS_SETTINGS and ATLAS_DAG_SETTINGS: :func:`set_settings`), a store per test (embedded file or a fresh Cassandra keyspace), running
a DAG of dags/ with the real dag.test(), and OpenSSH's server binary (``sshd_binary``) for the SSH nodetool tests."""
from __future__ import annotations

import json
import sqlite3
import uuid

import pytest

from tests.conftest import REPO_ROOT, drop_keyspaces_soon
from tests.services import SSHD

CONN_ID = "atlas_test"
SHARDS = 2


def set_connection(monkeypatch, conn_id: str, conn: dict) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))


def set_settings(monkeypatch, **settings) -> None:
    """The settings as a deployment gives them: DAG-shaping keys in ATLAS_DAG_SETTINGS (read when the DAG
    files are parsed), the rest as the atlas_settings Variable (here from the environment: a throw-away
    Variable per test; the tasks log that it shadows a stored one)."""
    from airflow_atlas.airflow.settings import DAG_SETTINGS_ENV, VARIABLE_ENV, split_dag_settings

    dag, runtime = split_dag_settings({"store_conn_id": CONN_ID, **settings})
    monkeypatch.setenv(VARIABLE_ENV, json.dumps(runtime))
    monkeypatch.setenv(DAG_SETTINGS_ENV, json.dumps(dag))


# Fast, test-friendly settings: 1-second retry delays, a short read-only window so CONSERVATIVE tables
# become sweepable within the test, long transaction leases so the workload's open transaction holds.
FAST = {
    "retry_delay_seconds": 1,
    "max_retry_delay_seconds": 2,
    "retries": 2,
    "store_config": {"unreadable_window_seconds": 1.0, "punch_interval_seconds": 0.1, "transaction_lease_seconds": 600.0},
}
WINDOW_SECONDS = 1.0


def engine_config():
    from airflow_atlas.config import StoreConfig

    return StoreConfig(**FAST["store_config"], initial_shards=SHARDS)


@pytest.fixture(params=["embedded", "cassandra"])
def atlas_store(request, monkeypatch, tmp_path, airflow_home):
    """(store, connection dict) for each backend, wired as connection ``atlas_test``; opened through the
    AtlasHook like the tasks do. Cassandra gets a fresh keyspace (created through the connection)."""
    yield from _store(request.param, request, monkeypatch, tmp_path)


@pytest.fixture
def embedded_store(request, monkeypatch, tmp_path, airflow_home):
    yield from _store("embedded", request, monkeypatch, tmp_path)


@pytest.fixture(scope="session")
def sshd_binary() -> str:
    """OpenSSH's server binary (Debian's openssh-server, installed by scripts/ensure_sshd.sh when missing) for the
    tests that start a private sshd of their own; the system sshd is never used."""
    return SSHD.ensure()


@pytest.fixture
def cassandra_store(request, monkeypatch, tmp_path, airflow_home):
    yield from _store("cassandra", request, monkeypatch, tmp_path)


def _store(kind, request, monkeypatch, tmp_path):
    from airflow_atlas.airflow.hooks.atlas import AtlasHook

    keyspace = session = None
    if kind == "embedded":
        conn = {"conn_type": "atlas_embedded", "host": str(tmp_path / "atlas.db")}
    else:
        host, port = request.getfixturevalue("cassandra_node")
        session = request.getfixturevalue("cassandra_session")
        keyspace = f"atlas_af_{uuid.uuid4().hex[:10]}"
        conn = {
            "conn_type": "cassandra",
            "host": host,
            "port": port,
            "schema": keyspace,
            # One node, RF 1: no replica can miss a tombstone, so the compaction tests may use swept tables
            # with gc_grace_seconds 0 (refused by default: kvs/consistency.py GcGraceGuard).
            "extra": {"create_keyspace": True, "replication_factor": 1, "allow_gc_grace_below_repair_interval": True},
        }
    set_connection(monkeypatch, CONN_ID, conn)
    set_settings(monkeypatch, **FAST)
    hook = AtlasHook(CONN_ID, config=engine_config())
    store = hook.get_store()
    store.initialize(shards=SHARDS)
    try:
        yield store, conn
    finally:
        hook.close()
        if keyspace:
            drop_keyspaces_soon(session, [keyspace])


def settle(store) -> None:
    """Make everything written so far sweepable for both strategies: punch (the sweep-timestamp call
    records now -> a fresh timestamp), then let the read-only window pass over that punch."""
    import time

    store.sweep_timestamps.all()
    time.sleep(WINDOW_SECONDS + 0.5)


def load_dag(dag_id: str):
    """Parse dags/ now (settings are read at parse time) and return the DAG."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO_ROOT / "dags"))
    assert bag.import_errors == {}, bag.import_errors
    return bag.dags[dag_id]


def task_states(run) -> dict[tuple[str, int], str]:
    return {(ti.task_id, ti.map_index): str(ti.state) for ti in run.get_task_instances()}


def task_instances(run):
    return {(ti.task_id, ti.map_index): ti for ti in run.get_task_instances()}


def xcom(run, task_id: str, key: str = "return_value", map_index: int = -1):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id, key=key, map_index=map_index)
            .one_or_none()
        )
        return None if row is None else XComModel.deserialize_value(row)


def sqlite_tables(path: str, tables: list[str] | None = None) -> dict[str, list]:
    """Every row of the embedded store's physical tables (or of the named Atlas tables)."""
    with sqlite3.connect(path) as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'kvs_%'")]
        if tables is not None:
            names = [n for n in names if n[len("kvs_"):] in tables]
        return {n: sorted(db.execute(f'SELECT * FROM "{n}"').fetchall()) for n in sorted(names)}


def import_string(path: str):
    """``"package.module.Name"`` -> the object (the standard library's importlib, no private Airflow API)."""
    from importlib import import_module

    module, _, name = path.rpartition(".")
    return getattr(import_module(module), name)
