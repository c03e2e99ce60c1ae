"""atlas_full_sweep: legacy sweep of data the sweep queue never saw (written before it existed)."""
from __future__ import annotations

import pytest

from tests.airflow.conftest import load_dag, settle, task_states, xcom

pytestmark = pytest.mark.airflow


def _write_without_queue(store, table, rounds=4, rows=30) -> None:
    """Committed versions written straight to the table and the transactions table: no queue entries."""
    from airflow_atlas.kvs.api import Cell

    for r in range(rounds):
        start = store.timestamps.fresh_timestamp()
        store.kvs.put(table, {Cell(f"r{i:03d}".encode(), b"c"): f"v{r}".encode() for i in range(rows)}, start)
        store.transaction_service.put_unless_exists(start, store.timestamps.fresh_timestamp())


def test_full_sweep_removes_versions_written_before_the_queue(atlas_store):
    from airflow_atlas.oracle import Reader, compare, observe, obsolete_versions

    store, _ = atlas_store
    store.create_table("legacy_data", "THOROUGH")
    _write_without_queue(store, "legacy_data")
    settle(store)
    assert not any(store.sweeper.has_sweepable_work(s, "THOROUGH") for s in range(store.number_of_shards()))
    readers = [Reader(store.timestamps.fresh_timestamp())]
    before = observe(store, readers, ["legacy_data"])
    versions_before = sum(1 for _ in store.kvs.scan("legacy_data"))

    run = load_dag("atlas_full_sweep").test(run_conf={"tables": ["legacy_data"], "parts": 3})
    assert str(run.state) == "success", task_states(run)
    plan = xcom(run, "plan")
    assert len(plan) >= 1 and all(p["table"] == "legacy_data" for p in plan)
    sweep_ts = plan[0]["sweep_ts"]
    assert obsolete_versions(store, {"THOROUGH": sweep_ts, "CONSERVATIVE": 0}, ["legacy_data"]) == []
    assert compare(before, observe(store, readers, ["legacy_data"])) == []
    assert sum(1 for _ in store.kvs.scan("legacy_data")) == 30 < versions_before
    counts = xcom(run, "publish_swept_tables")
    assert counts["legacy_data"]["versions_deleted"] == versions_before - 30


def test_full_sweep_rejects_unknown_tables_before_writing(embedded_store):
    from tests.airflow.conftest import sqlite_tables

    store, conn = embedded_store
    before = sqlite_tables(conn["host"])
    run = load_dag("atlas_full_sweep").test(run_conf={"tables": ["nope"]})
    assert str(run.state) == "failed"
    assert sqlite_tables(conn["host"]) == before
