"""Fault: the process running a sweep is SIGKILLed in the middle of an iteration while it holds the lease.

Nothing runs on its behalf afterwards (no ``finally``, no ``on_kill``, no lease release). What must hold:

* while the dead sweeper's lease is still valid, nobody else sweeps the shard (the next sweeper is turned
  away: ``skipped_locked`` naming the dead holder);
* once the lease expires (``lock_lease_seconds``, short here), the next run takes the lock over with a
  larger fencing token and RESUMES from the persisted progress (its first iteration starts exactly at the
  progress the dead process persisted last, not from the beginning), and catches up;
* the half-done iteration (ranged deletes written, queue cleanup and progress not) is harmless: the oracle
  holds for an open transaction and fresh readers, nothing committed is lost, no obsolete version or queued
  entry below the sweep timestamp and no queue row below progress is left.

Short variant (default run): the engine's ``sweep_shard`` in a subprocess (``killable_sweep.py``).
Long variant (``-m reliability``): a real Airflow run (``atlas_manual_sweep`` via ``dag.test()`` in a
subprocess) is SIGKILLed; the next ``atlas_targeted_sweep`` run recovers the shard.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from airflow_atlas.oracle import Reader, compare, observe, obsolete_versions
from tests.conftest import REPO_ROOT

from .helpers import (
    CONFIG,
    Model,
    WriterLoop,
    backlog_below,
    ensure_tables,
    leaked_queue_rows,
    model_mismatches,
    wait_until,
)

pytestmark = pytest.mark.cassandra

TABLE = {"killed_t": "THOROUGH"}
THOR = "THOROUGH"
LEASE_SECONDS = 3


def _prepare(store, transactions: int, seed: int):
    ensure_tables(store, TABLE)
    model = Model()
    writer = WriterLoop(store, model, TABLE, seed=seed, rows=60, columns=2, large_ratio=0.05, dead_ratio=0.06)
    writer.run(stop=_Never(), transactions=transactions)
    pinned = store.transactions.begin()  # holds the sweep timestamp at its start, for every sweeper
    WriterLoop(store, model, TABLE, seed=seed + 1, rows=60, columns=2).run(stop=_Never(), transactions=5)
    ts = store.sweep_timestamps.all()
    assert ts[THOR] == pinned.start_timestamp
    fresh = store.timestamps.fresh_timestamp()
    readers = [Reader(pinned.start_timestamp), Reader(fresh)]
    return model, writer, pinned, ts, readers, observe(store, readers)


def _read_until(proc, marker: str, seen: list[str]) -> None:
    for line in proc.stdout:
        seen.append(line.rstrip())
        if line.startswith(marker):
            return
    raise AssertionError(f"the sweep process ended before {marker!r} (exit {proc.wait()}):\n" + "\n".join(seen[-30:]))


def _check_end_state(store, model, pinned, ts, readers, before, domain):
    assert compare(before, observe(store, readers), ts) == []
    assert obsolete_versions(store, ts) == []
    assert backlog_below(store, ts) == {}
    assert leaked_queue_rows(store) == []
    assert pinned.get("killed_t", domain) == _pinned_expected(model, pinned)
    pinned.abort()
    assert model_mismatches(store, model, store.timestamps.fresh_timestamp(), TABLE) == []


def _pinned_expected(model, pinned) -> dict:
    view = model.view(pinned.start_timestamp, TABLE)["killed_t"]
    return {c: v for c, v in view.items() if isinstance(v, bytes)}


def _kill9(proc) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


class _Never:
    def is_set(self) -> bool:
        return False


def test_sigkilled_sweeper_lease_expires_and_next_run_resumes(shared_stores):
    store, url = shared_stores(config=dataclasses.replace(CONFIG, lock_lease_seconds=LEASE_SECONDS), shards=1)
    model, writer, pinned, ts, readers, before = _prepare(store, transactions=50, seed=5)
    name = store.sweeper.lock_name(0, THOR)
    victim = "airflow:atlas_targeted_sweep:scheduled__1:THOROUGH:0"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.killable_sweep", url, "0", THOR, victim, str(LEASE_SECONDS), "10", "2"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines: list[str] = []
    try:
        _read_until(proc, "MID", lines)
    finally:
        _kill9(proc)  # no finally, no on_kill, no lease release
    killed_token = int(next(line for line in lines if line.startswith("HELD")).split()[1])
    persisted = [int(line.split()[1]) for line in lines if line.startswith("PROGRESS")]
    assert len(persisted) == 2 and -1 < persisted[-1] < ts[THOR] - 1, (persisted, ts)
    assert store.queue.progress.get_progress(0, THOR) == persisted[-1]

    # The dead sweeper's lease still guards the shard until it expires: nobody else sweeps it.
    turned_away = store.sweeper.sweep_shard(0, THOR, sweep_ts=ts[THOR], holder="airflow:next_run")
    state = store.locks.describe(name)
    assert state.holder == victim
    assert turned_away.status == "skipped_locked" or state.expired, turned_away
    if turned_away.status == "skipped_locked":
        assert turned_away.lock_holder == victim and turned_away.new_progress is None
    assert store.queue.progress.get_progress(0, THOR) == persisted[-1]

    wait_until(lambda: store.locks.describe(name).expired, 60, "the dead sweeper's lease to expire")
    resumed = store.sweeper.sweep_shard(0, THOR, sweep_ts=ts[THOR], holder="airflow:next_run")
    assert resumed.status == "caught_up", resumed
    assert resumed.old_progress == persisted[-1], "the next run must resume from the persisted progress"
    assert resumed.new_progress == ts[THOR] - 1
    assert store.locks.describe(name).token > killed_token
    _check_end_state(store, model, pinned, ts, readers, before, writer.domain)


@pytest.mark.reliability
@pytest.mark.airflow
def test_sigkilled_airflow_task_is_recovered_by_the_next_dag_run(shared_stores, cassandra_node, airflow_home, monkeypatch):
    """A real Airflow run of atlas_manual_sweep (dag.test() in its own process) is SIGKILLed while its
    sweep task is mid-iteration; the next scheduled run (atlas_targeted_sweep) waits out the lease,
    takes the lock over and resumes from the persisted progress."""
    from tests.airflow.conftest import load_dag, set_connection, task_states, xcom

    store, url = shared_stores(config=dataclasses.replace(CONFIG, lock_lease_seconds=LEASE_SECONDS), shards=1)
    model, writer, pinned, ts, readers, before = _prepare(store, transactions=80, seed=9)
    host, port = cassandra_node
    conn_id = "atlas_reliability"
    conn = {"conn_type": "cassandra", "host": host, "port": port, "schema": store.kvs.keyspace}
    set_connection(monkeypatch, conn_id, conn)
    settings = {
        "store_conn_id": conn_id,
        "retries": 1,
        "retry_delay_seconds": 1,
        "batch_limit": 10,
        "lock_lease_seconds": LEASE_SECONDS,
        "lock_wait_seconds": LEASE_SECONDS * 10,
        "strategies": [THOR],
        "store_config": {"unreadable_window_seconds": 0, "transaction_lease_seconds": 600},
    }
    from airflow_atlas.airflow.settings import split_dag_settings

    dag_settings, settings = split_dag_settings(settings)
    monkeypatch.setenv("AIRFLOW_VAR_ATLAS_SETTINGS", json.dumps(settings))
    monkeypatch.setenv("ATLAS_DAG_SETTINGS", json.dumps(dag_settings))
    name = store.sweeper.lock_name(0, THOR)
    script = textwrap.dedent(
        """
        import time
        from airflow_atlas.sweep.deleter import SweepDeleter
        from airflow_atlas.sweep.queue.progress import ShardProgress

        updates = []
        real_update, real_sweep = ShardProgress.update_progress, SweepDeleter.sweep_cells

        def update_progress(self, shard, strategy, value):
            out = real_update(self, shard, strategy, value)
            updates.append(out)
            print("PROGRESS", out, flush=True)
            return out

        def sweep_cells(self, *args, **kwargs):
            out = real_sweep(self, *args, **kwargs)
            if len(updates) >= 2:
                print("MID", flush=True)
                time.sleep(3600)
            return out

        ShardProgress.update_progress, SweepDeleter.sweep_cells = update_progress, sweep_cells
        from tests.airflow.conftest import load_dag
        load_dag("atlas_manual_sweep").test(run_conf={"shards": [0], "strategy": "THOROUGH"})
        print("DONE", flush=True)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO_ROOT, env=os.environ.copy(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines: list[str] = []
    try:
        _read_until(proc, "MID", lines)
    finally:
        _kill9(proc)
    persisted = [int(line.split()[1]) for line in lines if line.startswith("PROGRESS")]
    assert len(persisted) == 2 and -1 < persisted[-1] < ts[THOR] - 1, persisted
    state = store.locks.describe(name)
    assert state.holder.startswith("airflow:atlas_manual_sweep:"), state  # the dead task's holder
    killed_token = state.token

    run = load_dag("atlas_targeted_sweep").test()
    assert str(run.state) == "success", task_states(run)
    groups = xcom(run, "plan")
    assert [[(t["shard"], t["strategy"]) for t in g] for g in groups] == [[(0, THOR)]]
    result = xcom(run, "sweep", map_index=0)[0]["result"]
    assert result["status"] == "caught_up", result
    assert result["lock_holder"].startswith("airflow:atlas_targeted_sweep:")  # the new run's holder took it over
    assert result["old_progress"] == persisted[-1], "the next run must resume from the persisted progress"
    state = store.locks.describe(name)
    assert state.holder is None and state.token > killed_token  # taken over (after the lease expired), then released
    _check_end_state(store, model, pinned, ts, readers, before, writer.domain)
