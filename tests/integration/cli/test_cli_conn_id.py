"""``--conn-id``: the store behind an Airflow connection (here an ``atlas_embedded`` connection given as an
environment variable, so no Airflow metadata database is needed). Importing Airflow costs seconds, so one
invocation covers it."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.airflow


def test_status_through_an_airflow_connection(sqlite_cli, tmp_path):
    sqlite_cli.ok("init", "--shards", "2")
    path = sqlite_cli.url[len("sqlite:///"):]
    conn = json.dumps({"conn_type": "atlas_embedded", "host": path})
    result = sqlite_cli.run("shards", "--json", "--conn-id", "atlas_cli_test", store=False,
                            env={"AIRFLOW_CONN_ATLAS_CLI_TEST": conn})
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["number_of_shards"] == 2 and shown["store"] == f"sqlite {path}"


def test_conn_id_to_a_store_that_is_not_there_creates_nothing(sqlite_cli, tmp_path):
    """Issue 16 item 4 through the Airflow hook: only ``init`` creates anything."""
    path = tmp_path / "never-initialised.db"
    conn = json.dumps({"conn_type": "atlas_embedded", "host": str(path)})
    result = sqlite_cli.run("status", "--conn-id", "atlas_cli_missing", store=False,
                            env={"AIRFLOW_CONN_ATLAS_CLI_MISSING": conn})
    assert result.returncode == 2, result.stdout + result.stderr
    assert "init" in result.stderr and not path.exists()


@pytest.mark.cassandra
def test_conn_id_to_an_empty_keyspace_creates_no_table(sqlite_cli, cassandra_node, fresh_keyspace, cassandra_session):
    host, port = cassandra_node
    conn = json.dumps({"conn_type": "cassandra", "host": host, "port": port, "schema": fresh_keyspace})
    result = sqlite_cli.run("status", "--conn-id", "atlas_cli_empty_ks", store=False,
                            env={"AIRFLOW_CONN_ATLAS_CLI_EMPTY_KS": conn})
    assert result.returncode == 2, result.stdout + result.stderr
    assert "holds no Atlas store" in result.stderr
    tables = cassandra_session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (fresh_keyspace,)
    ).all()
    assert tables == []


def test_status_through_a_connection_knows_the_compaction_threshold_of_the_variable(sqlite_cli):
    """Issue 32 item 3: ``compaction_threshold_tombstones`` lives in the atlas_settings Variable; with
    ``--conn-id`` status reads it and says which tables are due (without, it is unknown: test_status_compaction.py)."""
    from airflow_atlas.cli.status import render_status

    sqlite_cli.ok("init", "--shards", "1")
    sqlite_cli.ok("workload", "-n", "30", "--seed", "2")
    sqlite_cli.ok("sweep")
    path = sqlite_cli.url[len("sqlite:///"):]
    env = {"AIRFLOW_CONN_ATLAS_CLI_TEST": json.dumps({"conn_type": "atlas_embedded", "host": path}),
           "AIRFLOW_VAR_ATLAS_SETTINGS": json.dumps({"compaction_threshold_tombstones": 7})}
    result = sqlite_cli.run("status", "--json", "--conn-id", "atlas_cli_test", store=False, env=env)
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["settings"]["compaction_threshold_tombstones"] == 7
    rows = status["compaction"]
    assert rows and all(c["threshold_tombstones"] == 7 for c in rows)
    assert all(c["due"] == (c["tombstones_since_compaction"] >= 7) for c in rows)
    assert any(c["due"] for c in rows)
    assert "threshold 7 (compaction_threshold_tombstones)" in render_status(status)
