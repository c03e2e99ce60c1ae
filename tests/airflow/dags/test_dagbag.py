"""Every DAG file imports with zero errors and zero warnings, and every task has an owner and retries."""
from __future__ import annotations

import subprocess
import sys
import warnings
from itertools import pairwise

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.airflow

EXPECTED = {
    "atlas_targeted_sweep",
    "atlas_manual_sweep",
    "atlas_full_sweep",
    "atlas_compaction",
    "atlas_scrub",
    "example_bulk_load_then_sweep",
}


def test_dag_files_import_with_warnings_as_errors(airflow_home):
    code = f"""
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder={str(REPO_ROOT / 'dags')!r})
assert not bag.import_errors, bag.import_errors
print("DAGS", sorted(bag.dags))
"""
    strict = ["-W", "error::DeprecationWarning", "-W", "error::FutureWarning", "-W", "error::PendingDeprecationWarning"]
    result = subprocess.run([sys.executable, *strict, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert all(dag_id in result.stdout for dag_id in EXPECTED)


def test_dagbag_owners_retries_and_shape(airflow_home):
    from airflow.dag_processing.dagbag import DagBag

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bag = DagBag(dag_folder=str(REPO_ROOT / "dags"))
    assert bag.import_errors == {}
    ours = [w for w in caught if "airflow_atlas" in str(w.filename) or str(REPO_ROOT / "dags") in str(w.filename)]
    assert ours == [], [str(w.message) for w in ours]
    assert EXPECTED <= set(bag.dags)
    for dag_id, dag in bag.dags.items():
        for task in dag.tasks:
            assert task.owner == "airflow-atlas", f"{dag_id}.{task.task_id}"
            assert task.retries >= 1, f"{dag_id}.{task.task_id}"
            assert task.retry_exponential_backoff, f"{dag_id}.{task.task_id}"

    sweep = bag.dags["atlas_targeted_sweep"]
    assert sweep.max_active_runs == 1
    assert sweep.timetable.expression == "*/5 * * * *"
    # a group of pairs is ONE mapped task (lock, sweep, reconcile and release inside it)
    assert set(sweep.task_dict) == {"compute_sweep_timestamps", "plan", "sweep", "publish_swept_tables", "summary"}
    for upstream, downstream in pairwise(["compute_sweep_timestamps", "plan", "sweep", "publish_swept_tables", "summary"]):
        assert downstream in sweep.task_dict[upstream].downstream_task_ids
    assert type(sweep.task_dict["sweep"]).__name__ == "MappedOperator"
    assert sweep.task_dict["publish_swept_tables"].trigger_rule == "all_done"
    assert sweep.task_dict["summary"].trigger_rule == "all_done"

    from airflow.sdk import AssetAlias

    assert isinstance(bag.dags["atlas_compaction"].timetable.asset_condition, AssetAlias)
    assert set(bag.dags["atlas_manual_sweep"].params) == {"tables", "shards", "strategy", "dry_run", "max_batches", "max_entries_per_second"}


def test_dag_settings_environment_variable_changes_the_dags(airflow_home, monkeypatch):
    import json

    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("ATLAS_DAG_SETTINGS", json.dumps({"targeted_sweep_schedule": None, "retries": 4}))
    monkeypatch.setenv("AIRFLOW_VAR_ATLAS_SETTINGS", json.dumps({"retries": 7}))  # the Variable does not shape DAGs
    bag = DagBag(dag_folder=str(REPO_ROOT / "dags"))
    sweep = bag.dags["atlas_targeted_sweep"]
    assert type(sweep.timetable).__name__ == "NullTimetable"
    assert all(t.retries == 4 for t in sweep.tasks)
    monkeypatch.setenv("ATLAS_DAG_SETTINGS", json.dumps({"retries": 0}))
    bag = DagBag(dag_folder=str(REPO_ROOT / "dags"))
    assert bag.import_errors and all("setting retries must be between 1 and 100" in e for e in bag.import_errors.values())
    monkeypatch.setenv("ATLAS_DAG_SETTINGS", json.dumps({"batch_limit": 10}))  # a run-time key: refused, named
    bag = DagBag(dag_folder=str(REPO_ROOT / "dags"))
    assert bag.import_errors and all("batch_limit is read when a task runs" in e for e in bag.import_errors.values())
