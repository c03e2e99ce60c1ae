"""AtlasBaseOperator's error handling: a store that was never initialised (a fresh deployment whose init
did not reach it) fails the task at once, naming the command that creates it (issue 32 item 6)."""
from __future__ import annotations

import pytest

from tests.airflow.conftest import CONN_ID, FAST, SHARDS, set_connection, set_settings

from .conftest import fails_at_once, run_operator

pytestmark = pytest.mark.airflow


@pytest.fixture
def uninitialised_store(monkeypatch, tmp_path, airflow_home):
    """Connection ``atlas_test``: an embedded store file nobody ran ``atlas-sweep init`` on."""
    set_connection(monkeypatch, CONN_ID, {"conn_type": "atlas_embedded", "host": str(tmp_path / "fresh.db")})
    set_settings(monkeypatch, **FAST, shard_count=SHARDS)


def test_an_uninitialised_store_fails_at_once_naming_the_init_command(uninitialised_store):
    from airflow_atlas.airflow.operators.scrub import ScrubOperator
    from airflow_atlas.airflow.operators.sweep_timestamps import ComputeSweepTimestampsOperator

    for operator in (ScrubOperator(task_id="scrub"), ComputeSweepTimestampsOperator(task_id="sweep_timestamps")):
        fails_at_once(lambda op=operator: run_operator(op),
                      f"store of connection '{CONN_ID}' is not initialised (table '_timestamp' does not exist")
        fails_at_once(lambda op=operator: run_operator(op), f"`atlas-sweep init --conn-id {CONN_ID} --shards {SHARDS}`")
