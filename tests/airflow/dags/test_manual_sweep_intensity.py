"""atlas_manual_sweep's intensity field with the real dag.test(): the form's value reaches every sweep task
(in the engine result: ``max_entries_per_second``, ``seconds_paced``), a paced run still sweeps everything
(verify), and an empty field means the setting ``sweep_max_entries_per_second``. The value flows as a
settings layer (validate_request's ``store_config`` output -> the sweep tasks' ``store_config``)."""
from __future__ import annotations

import pytest

from tests.airflow.conftest import FAST, load_dag, set_settings, settle, task_states, xcom

pytestmark = pytest.mark.airflow


def _sweep_results(run) -> list[dict]:
    out, i = [], 0
    while (swept := xcom(run, "sweep", map_index=i)) is not None:
        out += [t["result"] for t in swept]
        i += 1
    return out


def test_the_forms_intensity_paces_every_sweep_task_and_sweeps_everything(embedded_store, monkeypatch):
    from airflow_atlas.verify import run_verify
    from airflow_atlas.workload import WorkloadSpec, run_workload

    store, _ = embedded_store
    set_settings(monkeypatch, **FAST, batch_limit=5)  # many small batches: paced between them
    run_workload(store, WorkloadSpec(transactions=40, rows=20, seed=3, open_transactions=0))
    settle(store)
    dag = load_dag("atlas_manual_sweep")
    run = dag.test(run_conf={"strategy": "THOROUGH", "max_entries_per_second": 100})
    assert str(run.state) == "success", task_states(run)
    # the form's value travels as a settings layer of the sweep tasks (their store_config), not as a value
    assert xcom(run, "validate_request", key="store_config") == {"sweep_max_entries_per_second": 100,
                                                                 "sweep_latency_target": 0.0}  # a fixed rate
    results = _sweep_results(run)
    assert results and all(r["max_entries_per_second"] == 100 and r["latency_target"] == 0 for r in results)
    assert {r["status"] for r in results} == {"caught_up"}
    paced = [r for r in results if r["iterations"] > 1]
    assert paced and all(0 < r["seconds_paced"] <= r["entries_read"] / 100 for r in paced)
    assert run_verify(store).ok

    # An empty field is the setting (here: 0, unlimited, from the Variable).
    set_settings(monkeypatch, **FAST, sweep_max_entries_per_second=0)
    run = load_dag("atlas_manual_sweep").test(run_conf={"strategy": "THOROUGH"})
    assert str(run.state) == "success", task_states(run)
    assert xcom(run, "validate_request", key="store_config") == {}  # the sweep tasks read the setting themselves
    assert all(r["max_entries_per_second"] == 0 and r["seconds_paced"] == 0 for r in _sweep_results(run))


def test_the_setting_reaches_the_scheduled_dags_sweep_tasks(embedded_store, monkeypatch):
    store, _ = embedded_store
    set_settings(monkeypatch, **FAST, skip_idle_shards=False, sweep_max_entries_per_second=7000)
    run = load_dag("atlas_targeted_sweep").test()
    assert str(run.state) == "success", task_states(run)
    results = _sweep_results(run)
    assert results and all(r["max_entries_per_second"] == 7000 for r in results)


def test_a_bad_form_value_is_refused_by_the_form_schema(embedded_store):
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError, match="max_entries_per_second"):
        load_dag("atlas_manual_sweep").test(run_conf={"max_entries_per_second": -5})
