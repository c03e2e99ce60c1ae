"""ScrubOperator run on its own against a real embedded store: a hard delete is scrubbed (and reported per
table for the asset events), a dry run scrubs nothing, templating, bad input."""
from __future__ import annotations

import pytest

from airflow_atlas.kvs.api import Cell
from tests.airflow.conftest import settle

from .conftest import fails_at_once, run_operator

pytestmark = pytest.mark.airflow

TABLE = "scrub_t"


def _scrub(**kwargs):
    from airflow_atlas.airflow.operators.scrub import ScrubOperator

    return ScrubOperator(task_id="scrub", **kwargs)


@pytest.fixture
def hard_deleted(embedded_store):
    """Three cells written, then hard-deleted by one transaction: three scrub-queue entries, ready."""
    store, _ = embedded_store
    store.create_table(TABLE, "THOROUGH")
    cells = [Cell(f"r{i}".encode(), b"c") for i in range(3)]
    txn = store.transactions.begin()
    txn.put(TABLE, {c: b"secret" for c in cells})
    txn.commit()
    hard = store.transactions.begin(hard_delete=True)
    hard.delete(TABLE, cells)
    hard.commit()
    settle(store)
    return store


def test_a_dry_run_decides_and_scrubs_nothing(hard_deleted):
    operator = _scrub(dry_run="{{ params.dry_run }}", max_entries="{{ params.n }}")
    out, _ = run_operator(operator, params={"dry_run": "yes", "n": 10})
    assert operator.scrub_dry_run is True and operator.max_entries == 10 and callable(operator.dry_run)  # converted
    assert out["dry_run"] is True and out["swept_tables"] == [] and out["entries_seen"] == 3
    assert len(hard_deleted.scrub_queue.pending()) == 3


def test_scrub_removes_the_ready_entries_and_reports_the_table(hard_deleted):
    out, _ = run_operator(_scrub())
    assert (out["entries_seen"], out["entries_scrubbed"], out["entries_waiting"], out["dry_run"]) == (3, 3, 0, False)
    assert out["tables"] == {TABLE: out["cells_tombstoned"]} and out["cells_tombstoned"] > 0
    assert out["swept_tables"] == [{"table": TABLE, "cells_tombstoned": out["cells_tombstoned"], "versions_deleted": 0}]
    assert hard_deleted.scrub_queue.pending() == []
    again, _ = run_operator(_scrub())
    assert again["entries_seen"] == 0 and again["swept_tables"] == []


def test_max_entries_limits_a_run(hard_deleted):
    out, _ = run_operator(_scrub(max_entries=2))
    assert out["entries_scrubbed"] == 2 and len(hard_deleted.scrub_queue.pending()) == 1


def test_bad_input_fails_at_once(hard_deleted):
    fails_at_once(lambda: run_operator(_scrub(store_config={"no_such_setting": 1})), "unknown setting(s): no_such_setting")
