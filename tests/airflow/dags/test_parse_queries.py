"""Parsing a DAG file does no database work (issue 23 item 4).

The DAG processor re-parses every file every 30 s; a Variable read at import would query the metadata
database each time (in the DAG processor through its supervisor, so not in this process). Each of our DAG
files is parsed for real (``DagBag``, as the DAG processor does), in a fresh interpreter, while two public
seams count:

* every Variable and connection lookup: a secrets backend configured through Airflow's ``[secrets]
  backend`` option (:mod:`.counting_secrets_backend`), which Airflow asks first in every context;
* every SQL statement any SQLAlchemy engine runs (the ``before_cursor_execute`` event of
  ``sqlalchemy.engine.Engine``, which sees Airflow's engine whatever it is).

Zero of both are allowed. The parse time of each file is reported (printed, and recorded as a test
property). A control file that reads a Variable at import proves the counters see such a read: without
it this test could not fail.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.airflow.dags.counting_secrets_backend import LOG_ENV
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.airflow

DAG_FILES = sorted(p for p in (REPO_ROOT / "dags").glob("*.py") if not p.name.startswith("_"))

PARSE = r"""
import json, sys, time
from sqlalchemy import event
from sqlalchemy.engine import Engine

statements = []


@event.listens_for(Engine, "before_cursor_execute")
def count(conn, cursor, statement, parameters, context, executemany):
    statements.append(statement.split("\n")[0][:200])


from airflow.dag_processing.dagbag import DagBag  # Airflow's own imports are not the DAG file's work

import os

log = os.environ["ATLAS_TEST_SECRETS_LOG"]


def lookups():
    return open(log).read().splitlines() if os.path.exists(log) else []


report = {}
for path in sys.argv[1:]:
    before, looked_up = len(statements), len(lookups())
    started = time.perf_counter()
    bag = DagBag(dag_folder=path)
    seconds = time.perf_counter() - started
    report[path] = {
        "seconds": round(seconds, 3),
        "dags": sorted(bag.dags),
        "retries": sorted({dag.default_args.get("retries") for dag in bag.dags.values()}),
        "schedules": {d: str(getattr(dag.timetable, "expression", None)) for d, dag in bag.dags.items()},
        "errors": {k: v[-2000:] for k, v in bag.import_errors.items()},
        "statements": statements[before:],
        "lookups": lookups()[looked_up:],
    }
print("REPORT " + json.dumps(report))
"""

CONTROL = """
from datetime import datetime

from airflow.sdk import DAG, Variable

schedule = Variable.get("atlas_parse_probe", default=None)  # the anti-pattern: a Variable read at parse time

with DAG(dag_id="parse_probe", schedule=schedule, start_date=datetime(2024, 1, 1)) as dag:
    pass
"""


def _parse(paths, settings_env: str | None, tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_VAR_")}  # a read must reach the backends
    env.pop("ATLAS_DAG_SETTINGS", None)
    if settings_env is not None:
        env["ATLAS_DAG_SETTINGS"] = settings_env
    env["AIRFLOW__SECRETS__BACKEND"] = "tests.airflow.dags.counting_secrets_backend.CountingSecretsBackend"
    env[LOG_ENV] = str(tmp_path / "secrets.log")
    result = subprocess.run(
        [sys.executable, "-c", PARSE, *map(str, paths)], capture_output=True, text=True, timeout=600, env=env,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("REPORT "))
    return json.loads(line[len("REPORT "):])


def test_the_counters_see_a_variable_read_at_parse_time(airflow_home, tmp_path):
    probe = tmp_path / "parse_probe.py"
    probe.write_text(CONTROL)
    report = _parse([probe], None, tmp_path)[str(probe)]
    assert report["dags"] == ["parse_probe"], report["errors"]
    assert report["lookups"] == ["variable atlas_parse_probe"], report


@pytest.mark.parametrize("settings_env", [None, json.dumps({"targeted_sweep_schedule": "*/7 * * * *", "retries": 4})])
def test_parsing_each_dag_file_reads_no_variable_and_queries_no_database(airflow_home, tmp_path, record_property, settings_env):
    report = _parse(DAG_FILES, settings_env, tmp_path)
    lines = []
    for path in DAG_FILES:
        entry = report[str(path)]
        assert not entry["errors"], entry["errors"]
        assert entry["dags"], f"{path.name} defines no DAG"
        assert entry["lookups"] == [], f"{path.name} read a Variable or connection at parse time: {entry['lookups']}"
        assert entry["statements"] == [], f"{path.name} queried the metadata database at parse time: {entry['statements']}"
        # the DAG-shaping settings come from the environment
        assert entry["retries"] == [4 if settings_env else 2], entry
        lines.append(f"{path.name}: {entry['seconds']:.3f} s, {len(entry['lookups'])} lookups, {len(entry['statements'])} queries")
        record_property(f"parse_seconds[{path.name}]", entry["seconds"])
    schedule = report[str(REPO_ROOT / "dags" / "atlas_targeted_sweep.py")]["schedules"]["atlas_targeted_sweep"]
    assert schedule == ("*/7 * * * *" if settings_env else "*/5 * * * *")
    print("\nDAG file parse times (the first file includes importing airflow_atlas):\n  " + "\n  ".join(lines))
