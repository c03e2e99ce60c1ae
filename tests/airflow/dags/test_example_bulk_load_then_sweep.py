"""The example user pipeline: bulk load -> deferrable sensor (the trigger runs inline in dag.test()) ->
sweep of the touched shards."""
from __future__ import annotations

import threading
import time

import pytest

from tests.airflow.conftest import FAST, load_dag, set_settings, task_states, xcom

pytestmark = pytest.mark.airflow


def test_bulk_load_waits_in_the_trigger_then_sweeps_the_touched_shards(atlas_store, monkeypatch):
    store, _ = atlas_store
    set_settings(monkeypatch, **FAST, sensor_poke_seconds=0.5)
    dag = load_dag("example_bulk_load_then_sweep")

    first = dag.test(run_conf={"rows": 300})
    assert str(first.state) == "success", task_states(first)

    # Second load overwrites the same rows while an older transaction is open: the sensor must defer
    # (trigger) until that transaction ends, then the sweep removes the first load's versions.
    blocker = store.transactions.begin()
    threading.Timer(4.0, blocker.abort).start()
    started = time.monotonic()
    second = dag.test(run_conf={"rows": 300})
    assert str(second.state) == "success", task_states(second)
    assert time.monotonic() - started > 4.0

    load = {k: xcom(second, "bulk_load", key=k) for k in ("commit_ts", "targets")}
    sensed = xcom(second, "wait_until_load_is_sweepable")
    assert sensed["sweep_timestamps"]["THOROUGH"] > load["commit_ts"] > blocker.start_timestamp
    assert sensed["deferred"] is True  # it waited in the trigger, not in a worker slot
    assert xcom(first, "wait_until_load_is_sweepable")["deferred"] is False  # nothing to wait for
    swept = xcom(second, "sweep_touched_shards")
    assert {(t["shard"], t["strategy"]) for t in swept} == {(t["shard"], t["strategy"]) for t in load["targets"]}
    assert sum(t["result"]["cells_tombstoned"] for t in swept) == 300
    versions = {}
    for cell, _ts, _ in store.kvs.scan("example_events"):
        versions[cell] = versions.get(cell, 0) + 1
    assert len(versions) == 300 and set(versions.values()) == {1}  # THOROUGH: only the newest is left
    assert all(lock.holder is None for lock in store.locks.list_locks("sweep/"))
