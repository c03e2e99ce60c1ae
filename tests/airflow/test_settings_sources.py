"""One visible source of settings (issue 21 item 4), in real Airflow: the ``atlas_settings`` Variable stored
in the metadata database (as a deployment holds it: no ``AIRFLOW_VAR_ATLAS_SETTINGS``) is what the next
run uses after an edit; an ``AIRFLOW_VAR_ATLAS_SETTINGS`` that shadows it is reported (task log, dashboard,
``status --conn-id``); ``atlas-sweep status --conn-id`` and the dashboard show the effective settings with
their source, resolved as the tasks resolve them."""
from __future__ import annotations

import json
import logging

import pytest

from tests.airflow.conftest import CONN_ID, FAST, load_dag, task_states

pytestmark = pytest.mark.airflow

SHADOW_WARNING = "is read from the environment variable AIRFLOW_VAR_ATLAS_SETTINGS"
BASE = {"store_conn_id": CONN_ID, "store_config": FAST["store_config"]}


@pytest.fixture
def stored_variable(embedded_store, monkeypatch):
    """``put(values)`` stores the atlas_settings Variable in Airflow's metadata database; the environment
    variable the other tests use is removed, so nothing shadows it (the DAG-shaping keys stay in
    ATLAS_DAG_SETTINGS)."""
    from airflow.models.variable import Variable

    from airflow_atlas.airflow.settings import VARIABLE, VARIABLE_ENV

    monkeypatch.delenv(VARIABLE_ENV)

    def put(values: dict) -> None:
        Variable.set(VARIABLE, values, serialize_json=True)

    yield put
    Variable.delete(VARIABLE)


def _shards(store) -> int:
    from airflow_atlas.airflow.hooks.atlas import AtlasHook

    with AtlasHook(CONN_ID) as hook:  # a fresh read of the store, as another process would
        return hook.get_store().number_of_shards()


def test_an_edit_of_the_stored_variable_applies_to_the_next_run(embedded_store, stored_variable):
    store, _ = embedded_store
    dag = load_dag("atlas_targeted_sweep")
    stored_variable({**BASE, "shard_count": 3})
    run = dag.test()
    assert str(run.state) == "success", task_states(run)
    assert _shards(store) == 3
    stored_variable({**BASE, "shard_count": 5})  # the edit (`airflow variables set` / the UI do the same)
    run = dag.test()
    assert str(run.state) == "success", task_states(run)
    assert _shards(store) == 5


def test_a_shadowing_environment_variable_wins_and_is_reported_in_the_task_log(embedded_store, stored_variable,
                                                                              monkeypatch, caplog):
    store, _ = embedded_store
    stored_variable({**BASE, "shard_count": 5})
    monkeypatch.setenv("AIRFLOW_VAR_ATLAS_SETTINGS", json.dumps({**BASE, "shard_count": 3}))
    dag = load_dag("atlas_targeted_sweep")
    with caplog.at_level(logging.WARNING, logger="airflow_atlas.airflow.settings"):
        run = dag.test()
    assert str(run.state) == "success", task_states(run)
    assert _shards(store) == 3  # the environment shadowed the stored Variable: reported, not silent
    assert any(SHADOW_WARNING in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


def _status(capsys, *args: str):
    from airflow_atlas.cli import main

    code = main(["status", "--conn-id", CONN_ID, *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_status_by_connection_reads_the_variable_and_shows_each_settings_source(embedded_store, stored_variable,
                                                                               monkeypatch, capsys):
    stored_variable({**BASE, "batch_limit": 77, "store_config": {**FAST["store_config"], "unreadable_window_seconds": 2.5}})
    document = json.loads(_status(capsys, "--json", "--set", "lock_lease_seconds=45"))
    sources = {s["name"]: (s["value"], s["source"]) for s in document["effective_settings"]}
    assert sources["batch_limit"] == (77, "the atlas_settings Variable")
    assert sources["unreadable_window_seconds"] == (2.5, "the atlas_settings Variable")
    assert sources["lock_lease_seconds"] == (45.0, "--set")
    assert sources["store_conn_id"] == (CONN_ID, "the atlas_settings Variable")
    assert sources["retries"] == (FAST["retries"], "the environment variable ATLAS_DAG_SETTINGS")
    assert sources["rollback_guard_max_fraction"][1] == "default"
    # the store was opened with those settings, as a task opens it (same sweep timestamps as the DAGs)
    assert document["settings"]["unreadable_window_seconds"] == 2.5
    assert document["settings_warnings"] == []
    text = _status(capsys)
    (line,) = [line for line in text.splitlines() if line.startswith("batch_limit ")]
    assert line.split() == ["batch_limit", "engine", "77", "the", "atlas_settings", "Variable"]
    assert "SETTINGS WARNING" not in text

    monkeypatch.setenv("AIRFLOW_VAR_ATLAS_SETTINGS", json.dumps({**BASE, "batch_limit": 66}))
    document = json.loads(_status(capsys, "--json"))
    sources = {s["name"]: (s["value"], s["source"]) for s in document["effective_settings"]}
    assert sources["batch_limit"] == (66, "the atlas_settings Variable from the environment variable AIRFLOW_VAR_ATLAS_SETTINGS")
    assert any(SHADOW_WARNING in w for w in document["settings_warnings"])
    assert f"SETTINGS WARNING: the atlas_settings Variable {SHADOW_WARNING}" in _status(capsys)


@pytest.fixture(scope="module")
def server_app(airflow_home):
    """The API server's own app, ``airflow.api_fastapi.main:app`` (what ``airflow api-server`` serves), with
    a token. Importing it marks the process as an Airflow server, as in a deployment: there the Task SDK's
    ``Variable.get`` (the dashboard's read) reaches the metadata database. (It stays marked for the rest of
    this test process; every other test's Variable comes from the environment, read first anyway.)"""
    import importlib

    from airflow.api_fastapi.app import get_auth_manager, purge_cached_app
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    server = importlib.import_module("airflow.api_fastapi.main")
    with TestClient(server.app) as client:
        yield client, get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
    purge_cached_app()


def test_the_dashboard_shows_the_effective_settings_and_a_shadowing_variable(server_app, embedded_store, stored_variable,
                                                                            monkeypatch):
    from tests.airflow.test_dashboard_app import _auth

    client, token = server_app
    stored_variable({**BASE, "batch_limit": 88})
    got = client.get("/atlas/api/status", headers=_auth(token)).json()
    sources = {s["name"]: (s["value"], s["source"]) for s in got["effective_settings"]}
    assert sources["batch_limit"] == (88, "the atlas_settings Variable")
    assert got["settings_warnings"] == []
    page = client.get("/atlas/", headers={"Cookie": f"_token={token}"}).text
    assert '<tr data-setting="batch_limit" data-source="the atlas_settings Variable">' in page
    assert 'data-field="value" data-value="88"' in page
    assert 'id="settings-warnings"' not in page

    monkeypatch.setenv("AIRFLOW_VAR_ATLAS_SETTINGS", json.dumps({**BASE, "batch_limit": 66}))
    page = client.get("/atlas/", headers={"Cookie": f"_token={token}"}).text
    assert 'id="settings-warnings"' in page and SHADOW_WARNING in page
    assert ('<tr data-setting="batch_limit" data-source="the atlas_settings Variable from the environment variable '
            'AIRFLOW_VAR_ATLAS_SETTINGS">') in page
