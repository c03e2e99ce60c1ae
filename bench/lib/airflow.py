"""A real Airflow for the benchmarks ``sustained`` and ``orchestration``: :func:`devkit.airflow.running_airflow`
(API server with one worker - the task processes talk to its execution API -, scheduler with the LocalExecutor
and DAG processor on SQLite in a temporary AIRFLOW_HOME, on a free loopback port; the same processes the tests
start). The DAGs folder holds only ``atlas_targeted_sweep`` (a link to dags/), scheduled by
``ATLAS_DAG_SETTINGS``; the store is the connection ``atlas_default`` and the engine settings the
``atlas_settings`` Variable (environment).
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from airflow_atlas.airflow.settings import split_dag_settings
from bench.lib.log import log
from bench.lib.paths import REPO_ROOT
from devkit.airflow import AirflowProcesses, running_airflow

DAG_ID = "atlas_targeted_sweep"


@contextmanager
def bench_airflow(root: Path, connection: dict, settings: dict, parallelism: int = 2, *,
                  variable_in_database: bool = False) -> Iterator[AirflowProcesses]:
    """Airflow running ``atlas_targeted_sweep`` against ``connection`` (an Airflow connection as JSON) with
    ``settings`` (the ``atlas_settings`` keys and the DAG-shaping ones, split as the DAGs read them); every
    process group it started is stopped on the way out. ``variable_in_database``: the ``atlas_settings``
    Variable is not given in the environment (which would shadow the stored one), so the caller can store
    and change it over REST between runs."""
    started = time.monotonic()
    dag_settings, variable = split_dag_settings(settings)
    env = {
        "AIRFLOW__CORE__PARALLELISM": str(parallelism),
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        "AIRFLOW_CONN_ATLAS_DEFAULT": json.dumps(connection),
        "ATLAS_DAG_SETTINGS": json.dumps(dag_settings),
    }
    if not variable_in_database:
        env["AIRFLOW_VAR_ATLAS_SETTINGS"] = json.dumps(variable)
    # api_first: the DAG is scheduled at once, and a task started before the API server answers fails.
    with running_airflow(root, {f"{DAG_ID}.py": REPO_ROOT / "dags" / f"{DAG_ID}.py"}, env, ready_dags=[DAG_ID],
                         api_first=True) as airflow:
        log(f"  Airflow ready on {airflow.base_url} after {time.monotonic() - started:.0f}s (logs {airflow.logs})")
        yield airflow


def dag_runs(airflow: AirflowProcesses) -> list[dict]:
    """The DAG's runs (state, start and end) from the REST API, oldest first."""
    r = airflow.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns", params={"limit": 1000, "order_by": "run_after"})
    r.raise_for_status()
    return [
        {"run_id": d["dag_run_id"], "state": d["state"], "start": d.get("start_date"), "end": d.get("end_date")}
        for d in r.json()["dag_runs"]
    ]
