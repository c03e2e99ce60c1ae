"""PlanFullSweepOperator and FullTableSweepOperator run on their own against a real embedded store:
the plan's parts, a full sweep deleting the obsolete versions (and a dry run deleting none), templating,
bad input."""
from __future__ import annotations

import pytest

from airflow_atlas.kvs.api import Cell
from tests.airflow.conftest import settle

from .conftest import fails_at_once, run_operator

pytestmark = pytest.mark.airflow

TABLE = "full_t"


def _plan(**kwargs):
    from airflow_atlas.airflow.operators.full_sweep import PlanFullSweepOperator

    return PlanFullSweepOperator(task_id="plan", **kwargs)


def _sweep(**kwargs):
    from airflow_atlas.airflow.operators.full_sweep import FullTableSweepOperator

    return FullTableSweepOperator(task_id="full_sweep", **kwargs)


@pytest.fixture
def overwritten(embedded_store):
    """A THOROUGH table with 3 committed versions of each of 20 cells (40 obsolete), and a NOTHING table."""
    store, _ = embedded_store
    store.create_table(TABLE, "THOROUGH")
    store.create_table("never", "NOTHING")
    for version in range(3):
        txn = store.transactions.begin()
        txn.put(TABLE, {Cell(f"r{i:02d}".encode(), b"c"): f"v{version}".encode() for i in range(20)})
        txn.commit()
    settle(store)
    return store


def _versions(store) -> int:
    return sum(1 for _ in store.kvs.scan(TABLE, None))


def test_plan_splits_each_swept_table_into_parts(overwritten):
    out, _ = run_operator(_plan(parts="{{ params.parts }}", execution_mode="in_task"), params={"parts": 3})
    assert {p["table"] for p in out} == {TABLE} and len(out) == 3  # "never" (NOTHING) is left out
    assert all(set(p) == {"table", "sweep_ts", "scan_ranges"} and len(p["scan_ranges"]) == 1 for p in out)
    spark, _ = run_operator(_plan(tables=[TABLE], parts=4, execution_mode="spark"))
    assert [(p["table"], p["parts"], set(p)) for p in spark] == [(TABLE, 4, {"table", "sweep_ts", "parts"})]  # the task's arguments


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"tables": ["nope"]}, "unknown table(s): nope"),
        ({"tables": ["never"]}, "sweep strategy NOTHING"),
    ],
)
def test_plan_bad_input_fails_at_once(overwritten, kwargs, message):
    fails_at_once(lambda: run_operator(_plan(**kwargs)), message)


def test_full_sweep_of_planned_ranges_deletes_the_obsolete_versions(overwritten):
    store = overwritten
    parts, _ = run_operator(_plan(tables=[TABLE], parts=2, execution_mode="in_task"))
    before = _versions(store)
    totals = {"versions_deleted": 0, "ranges": 0}
    for part in parts:
        out, _ = run_operator(_sweep(execution_mode="in_task", **part))
        assert (out["table"], out["strategy"], out["dry_run"], "spark" in out) == (TABLE, "THOROUGH", False, False)
        totals["versions_deleted"] += out["versions_deleted"]
        totals["ranges"] += out["ranges"]
    assert totals == {"versions_deleted": 40, "ranges": 2}
    assert before - _versions(store) >= 40
    assert out["swept_tables"] in ([], [{"table": TABLE, "cells_tombstoned": 0, "versions_deleted": out["versions_deleted"]}])


def test_a_dry_run_reports_and_deletes_nothing(overwritten):
    store = overwritten
    before = _versions(store)
    operator = _sweep(table="{{ params.table }}", dry_run="{{ params.dry_run }}", parts=2, execution_mode="in_task")
    out, _ = run_operator(operator, params={"table": TABLE, "dry_run": "yes"})
    assert operator.table == TABLE and operator.sweep_dry_run is True  # rendered "yes", converted
    assert callable(operator.dry_run)  # BaseOperator.dry_run() is not shadowed
    assert out["dry_run"] is True and out["versions_deleted"] == 40 and out["swept_tables"] == [] and out["ranges"] == 2
    assert _versions(store) == before


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"table": "nope"}, "nope"),
        ({"table": "never"}, "sweep strategy NOTHING"),
        ({"table": TABLE, "execution_mode": "warp"}, "execution_mode must be one of"),
        ({"table": TABLE, "scan_ranges": [{"kind": "rows"}]}, "a scan range is"),
    ],
)
def test_full_sweep_bad_input_fails_at_once(overwritten, kwargs, message):
    fails_at_once(lambda: run_operator(_sweep(**kwargs)), message)
