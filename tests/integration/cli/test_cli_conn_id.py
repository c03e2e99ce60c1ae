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
