"""Compaction after sweep: on the real Cassandra node ``nodetool tablestats`` shows the table's live space
drop; on the embedded store VACUUM shrinks the file. The tombstone counts come from the store's own records
of the sweeps (not from asset events: a dag.test() run of atlas_compaction has no triggering events at
all), so sweeps run outside Airflow, or while the DAG was paused, and a cleared Variable change nothing."""
from __future__ import annotations

import json

import pytest

from tests.airflow.conftest import CONN_ID, FAST, load_dag, set_settings, settle, task_states, xcom

pytestmark = pytest.mark.airflow

TABLE = "compact_me"


def _overwrite(store, rounds=6, rows=150, value_bytes=2000) -> None:
    """``rounds`` committed versions of every cell: all but the newest become obsolete."""
    import os

    from airflow_atlas.kvs.api import Cell

    for _ in range(rounds):
        txn = store.transactions.begin()
        txn.put(TABLE, {Cell(f"row{i:04d}".encode(), b"c"): os.urandom(value_bytes) for i in range(rows)})
        txn.commit()
    settle(store)


def _asset_events(run) -> dict[str, dict]:
    """The asset events of the run, read back from Airflow's metadata DB: {table: extra}."""
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(AssetEvent).filter(AssetEvent.source_run_id == run.run_id).all()
        return {e.extra["table"]: dict(e.extra) for e in rows}


def _sweep_and_compact(monkeypatch, store, extra_settings):
    set_settings(monkeypatch, **FAST, compaction_threshold_tombstones=100, **extra_settings)
    sweep_run = load_dag("atlas_targeted_sweep").test()
    assert str(sweep_run.state) == "success", task_states(sweep_run)
    events = _asset_events(sweep_run)
    assert events[TABLE]["tombstones"] >= 150 and events[TABLE]["store_conn_id"] == CONN_ID  # still the trigger
    compaction_run = load_dag("atlas_compaction").test()
    assert str(compaction_run.state) == "success", task_states(compaction_run)
    return xcom(compaction_run, "compact")


@pytest.mark.cassandra
def test_compaction_after_sweep_drops_live_space_on_the_node(cassandra_store, monkeypatch):
    from airflow_atlas.airflow.hooks import nodetool
    from tests.conftest import CASSANDRA_SCRIPT

    store, conn = cassandra_store
    store.create_table(TABLE, "THOROUGH", gc_grace_seconds=0)
    keyspace = conn["schema"]
    runner = nodetool.LocalNodetoolRunner([str(CASSANDRA_SCRIPT), "nodetool"], timeout_seconds=600)
    # Only the operator's compaction may reclaim space: on a busy node, background compaction of the
    # table's many flushed sstables would otherwise do it before the operator measures.
    runner.run(["disableautocompaction", keyspace, TABLE])
    _overwrite(store)
    nodetool.flush(runner, keyspace, TABLE)
    live_before = nodetool.table_stats(runner, keyspace, TABLE)["space_used_live"]
    assert live_before > 6 * 150 * 2000 * 0.5  # the versions are on disk (compressed a little)

    report = _sweep_and_compact(monkeypatch, store, {"nodetool_command": [str(CASSANDRA_SCRIPT), "nodetool"]})
    compacted = report["compacted"][TABLE]
    print("compaction report:", compacted)
    assert compacted["space_after_bytes"] < compacted["space_before_bytes"]
    live_after = nodetool.table_stats(runner, keyspace, TABLE)["space_used_live"]  # independent check
    assert live_after < live_before / 2, (live_before, live_after)
    assert report["pending"][TABLE] == 0
    last = store.history.tombstones_since_compaction(TABLE).last_compaction
    assert last is not None and last["space_after_bytes"] == compacted["space_after_bytes"]


def test_vacuum_after_sweep_shrinks_the_embedded_store(embedded_store, monkeypatch):
    import os

    store, conn = embedded_store
    store.create_table(TABLE, "THOROUGH")
    _overwrite(store)
    size_before = os.path.getsize(conn["host"])
    report = _sweep_and_compact(monkeypatch, store, {})
    compacted = report["compacted"][TABLE]
    assert report["method"] == "vacuum"
    assert compacted["file_after_bytes"] < compacted["file_before_bytes"]
    assert compacted["space_after_bytes"] < compacted["space_before_bytes"]
    assert os.path.getsize(conn["host"]) < size_before


def test_below_the_threshold_nothing_is_compacted(embedded_store, monkeypatch):
    store, _ = embedded_store
    store.create_table(TABLE, "THOROUGH")
    _overwrite(store, rounds=2, rows=10, value_bytes=10)
    set_settings(monkeypatch, **FAST, compaction_threshold_tombstones=1_000_000)
    load_dag("atlas_targeted_sweep").test()
    run = load_dag("atlas_compaction").test()
    assert str(run.state) == "success", task_states(run)
    report = xcom(run, "compact")
    assert report["compacted"] == {} and report["pending"][TABLE] == 10


def _sweep_outside_airflow(store) -> int:
    """Sweep every pair by calling the engine directly, as the orphaned task processes of a killed worker
    did (their results never reached Airflow; no asset event, no Variable). Returns the tombstones written."""
    written = 0
    for strategy in ("CONSERVATIVE", "THOROUGH"):
        for shard in range(store.number_of_shards()):
            written += store.sweeper.sweep_shard(shard, strategy).tables.get(TABLE, 0)
    return written


@pytest.mark.parametrize("variable", ["absent", "cleared", "stale"])
def test_sweeps_airflow_never_heard_of_are_compacted(embedded_store, monkeypatch, variable):
    """Issue 21 "Tombstones go uncounted": (a) sweeps while atlas_compaction was paused and (b) sweeps whose
    task results never reached Airflow - here sweeps run outside Airflow altogether - are compacted by the
    next run, and (c) the old counting Variable, absent, cleared or stale, changes nothing. Fails on the
    Variable-backed counting (nothing was counted there: "due: []")."""
    import os

    from airflow.models import Variable

    store, conn = embedded_store
    store.create_table(TABLE, "THOROUGH")
    _overwrite(store)
    written = _sweep_outside_airflow(store)
    assert written >= 150
    # the metadata database from outside a task (the Task SDK Variable works only inside one): noqa AIR311
    if variable == "cleared":
        Variable.set("atlas_compaction_state", "{}")  # noqa: AIR311
        Variable.delete("atlas_compaction_state")  # noqa: AIR311
    elif variable == "stale":
        stale = {CONN_ID: {TABLE: {"pending_tombstones": 0}}}
        Variable.set("atlas_compaction_state", json.dumps(stale))  # noqa: AIR311
    set_settings(monkeypatch, **FAST, compaction_threshold_tombstones=100)
    size_before = os.path.getsize(conn["host"])
    run = load_dag("atlas_compaction").test()
    assert str(run.state) == "success", task_states(run)
    report = xcom(run, "compact")
    assert set(report["compacted"]) == {TABLE}, report
    assert report["pending"][TABLE] == 0
    assert os.path.getsize(conn["host"]) < size_before
    again = load_dag("atlas_compaction").test()  # the count restarted from zero: nothing due now
    assert xcom(again, "compact")["compacted"] == {}


def test_a_sweep_run_that_swept_nothing_announces_the_tables_due_for_compaction(embedded_store, monkeypatch):
    """Issue 32 item 2: tombstones whose announcement was lost - written while atlas_compaction was paused
    (Airflow keeps no asset-triggered run for a paused DAG), or by a first try whose worker was killed while
    its retry swept nothing - are announced by the next sweep run, whatever it swept: a table due for
    compaction (its count since its last compaction, from the store, reached the threshold) gets an asset
    event, so the unpaused atlas_compaction compacts it. Once compacted, or below the threshold, a table gets
    no event from a run that did not tombstone it. (Before: only this run's tombstones were announced.)"""
    store, _ = embedded_store
    store.create_table(TABLE, "THOROUGH")
    store.create_table("below_threshold", "THOROUGH")
    from airflow_atlas.kvs.api import Cell

    for value in (b"1", b"2"):  # one obsolete version of 5 cells: 5 tombstones, below the threshold
        txn = store.transactions.begin()
        txn.put("below_threshold", {Cell(f"r{i}".encode(), b"c"): value for i in range(5)})
        txn.commit()
    _overwrite(store)
    written = _sweep_outside_airflow(store)  # the lost first try: the store counted its tombstones
    assert written >= 150 and store.history.tombstones_since_compaction("below_threshold").count == 5
    set_settings(monkeypatch, **FAST, compaction_threshold_tombstones=100)

    sweep_run = load_dag("atlas_targeted_sweep").test()  # the retry: nothing left to sweep
    assert str(sweep_run.state) == "success", task_states(sweep_run)
    events = _asset_events(sweep_run)
    assert set(events) == {TABLE}, events
    assert events[TABLE]["tombstones"] == 0 and events[TABLE]["tombstones_since_compaction"] == written, events
    assert xcom(sweep_run, "publish_swept_tables")[TABLE]["tombstones_since_compaction"] == written

    compaction_run = load_dag("atlas_compaction").test()  # what that event triggers
    assert str(compaction_run.state) == "success", task_states(compaction_run)
    assert set(xcom(compaction_run, "compact")["compacted"]) == {TABLE}

    again = load_dag("atlas_targeted_sweep").test()  # compacted: nothing due, nothing announced
    assert str(again.state) == "success", task_states(again)
    assert _asset_events(again) == {}
