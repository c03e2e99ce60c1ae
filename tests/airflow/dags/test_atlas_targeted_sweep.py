"""atlas_targeted_sweep end to end with the real dag.test(), on the embedded store and on Cassandra."""
from __future__ import annotations

import time
from functools import partial

import pytest

from tests.airflow.conftest import SHARDS, load_dag, settle, task_states, xcom
from tests.faults import FaultyKvs, hang, raise_fault

pytestmark = pytest.mark.airflow


def _progress(store) -> dict[tuple[int, str], int]:
    return {
        (shard, strategy): store.queue.progress.get_progress(shard, strategy)
        for shard in range(SHARDS)
        for strategy in ("CONSERVATIVE", "THOROUGH")
    }


def test_targeted_sweep_run_sweeps_obsolete_versions_and_keeps_visible_data(atlas_store):
    from airflow_atlas.oracle import Reader, compare, observe, obsolete_versions
    from airflow_atlas.workload import WorkloadSpec, run_workload

    store, _ = atlas_store
    spec = WorkloadSpec(transactions=120, rows=40, columns=3, open_transactions=1, seed=11)
    report = run_workload(store, spec)
    open_txn = report.open[0]
    assert report.committed > 50 and report.dead_writers > 0 and report.aborted > 0
    settle(store)  # let the read-only window pass over the workload

    fresh = store.timestamps.fresh_timestamp()
    readers = [Reader(open_txn.start_timestamp), Reader(fresh), Reader(fresh, read_only=True)]
    before = observe(store, readers)
    progress_before = _progress(store)
    versions_before = sum(1 for t in store.user_tables() for _ in store.kvs.scan(t))

    dag = load_dag("atlas_targeted_sweep")
    started = time.monotonic()
    run = dag.test()
    elapsed = time.monotonic() - started
    states = task_states(run)
    assert str(run.state) == "success", states
    print(f"atlas_targeted_sweep: {len(states)} task instances in {elapsed:.1f}s")

    sweep_ts = xcom(run, "compute_sweep_timestamps")
    # The open transaction holds the sweep timestamp back: nothing at or above its start is swept.
    assert all(ts <= open_txn.start_timestamp for ts in sweep_ts.values()), (sweep_ts, open_txn.start_timestamp)

    after = observe(store, readers)
    assert compare(before, after, sweep_ts) == []
    assert obsolete_versions(store, sweep_ts) == []
    versions_after = sum(1 for t in store.user_tables() for _ in store.kvs.scan(t))
    assert versions_after < versions_before

    summary = xcom(run, "summary")
    assert summary["failed_pairs"] == []
    assert summary["cells_tombstoned"] > 0 and summary["aborted_writes_deleted"] > 0
    progress_after = _progress(store)
    for (shard, strategy), value in progress_after.items():
        assert value >= progress_before[(shard, strategy)]
        assert value == sweep_ts[strategy] - 1 or store.sweeper.has_sweepable_work(shard, strategy, sweep_ts[strategy]) is False
        assert not store.queue.cleaner.queue_rows_below(shard, strategy, value), (shard, strategy)
    assert sum(progress_after.values()) > sum(progress_before.values())
    assert all(lock.expired and lock.holder is None for lock in store.locks.list_locks("sweep/"))
    assert len(store.locks.list_locks("sweep/")) == summary["pairs"]
    open_txn.abort()


def _faulty_stores(monkeypatch, marker, action) -> None:
    """Every store the tasks open (they run in this process under dag.test()) sits on a FaultyKvs: the
    first ranged delete of the run is followed by ``action`` (once: the marker is claimed)."""
    from airflow_atlas.kvs import opening

    open_kvs = opening.open_kvs  # every store opens through it (AtlasStore.open, which the hook uses)
    monkeypatch.setattr(opening, "open_kvs", lambda address, **kw: FaultyKvs(open_kvs(address, **kw), str(marker), action, after_progress=False))


def _retried_sweep(run) -> int:
    """The map index of the one sweep task that needed a second try (the others needed one)."""
    tries = {ti.map_index: ti.try_number for ti in run.get_task_instances() if ti.task_id == "sweep"}
    retried = [index for index, n in tries.items() if n == 2]
    assert len(retried) == 1 and len(tries) > 1 and all(n == 1 for i, n in tries.items() if i not in retried), tries
    return retried[0]


def test_a_shard_task_that_fails_once_is_retried_and_the_run_succeeds(embedded_store, monkeypatch, tmp_path):
    from airflow_atlas.workload import WorkloadSpec, run_workload
    from tests.airflow.conftest import FAST, set_settings

    store, _ = embedded_store
    run_workload(store, WorkloadSpec(transactions=40, rows=20, seed=3))
    settle(store)
    set_settings(monkeypatch, **FAST, skip_idle_shards=False)
    marker = tmp_path / "fault.marker"
    _faulty_stores(monkeypatch, marker, raise_fault)
    dag = load_dag("atlas_targeted_sweep")
    run = dag.test()
    assert str(run.state) == "success", task_states(run)

    assert marker.exists(), "the fault was injected"
    index = _retried_sweep(run)  # failed once (after a real ranged delete), then succeeded; others undisturbed
    (target,) = xcom(run, "plan")[index]
    assert xcom(run, "sweep", map_index=index)[0]["result"]["status"] == "caught_up"
    assert store.queue.progress.get_progress(target["shard"], target["strategy"]) > -1
    assert all(lock.holder is None for lock in store.locks.list_locks("sweep/"))


def test_the_lock_of_a_killed_task_is_recovered_after_its_lease_expires(embedded_store, monkeypatch, tmp_path):
    """A process holding a shard lock (refreshing it, as a running sweep does) is SIGKILLed: no release,
    no on_kill. The next run's sweep task waits for the lease to expire (setting lock_wait_seconds), takes
    the lock over - the dead holder's token + 1 -, sweeps under that one lease and releases it: the lock ends
    released with exactly that token. (Before issue 47 the lock was taken by an acquire task and could expire
    before the group's sweep task started, which then took it again with a larger token; one task per group
    has no such gap.) Every other pair of the run ends released after one acquisition too."""
    import os
    import signal
    import subprocess
    import sys

    from airflow_atlas.workload import WorkloadSpec, run_workload
    from tests.airflow.conftest import CONN_ID, FAST, set_settings

    store, _ = embedded_store
    run_workload(store, WorkloadSpec(transactions=40, rows=20, seed=5))
    settle(store)
    lease_seconds = 5  # long enough that a keeper starved by a loaded machine still holds it when checked
    name = store.sweeper.lock_name(0, "THOROUGH")
    holder = "airflow:atlas_targeted_sweep:killed_run:THOROUGH:0"
    script = f"""
import sys, time
from airflow_atlas.airflow.hooks.atlas import AtlasHook
from airflow_atlas.sweep.lease_keeper import LeaseKeeper
with AtlasHook({CONN_ID!r}) as hook:
    store = hook.get_store()
    lease = store.locks.acquire({name!r}, {holder!r}, {lease_seconds})
    assert lease is not None
    with LeaseKeeper(store.locks, lease, {lease_seconds}):
        print("HELD", lease.token, flush=True)
        time.sleep(600)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        for line in proc.stdout:  # Airflow may log to stdout first
            if line.startswith("HELD"):
                break
        assert line.startswith("HELD"), line
        killed_token = int(line.split()[1])
        time.sleep(lease_seconds * 0.7)  # the keeper refreshed it at least once
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    state = store.locks.describe(name)
    assert state.holder == holder and not state.expired  # still held by the dead process

    set_settings(monkeypatch, **FAST, lock_lease_seconds=lease_seconds, lock_wait_seconds=lease_seconds * 4)
    dag = load_dag("atlas_targeted_sweep")
    run = dag.test()
    assert str(run.state) == "success", task_states(run)
    groups = xcom(run, "plan")
    swept = {(t["shard"], t["strategy"]): t for i in range(len(groups)) for t in xcom(run, "sweep", map_index=i)}
    result = swept[(0, "THOROUGH")]["result"]
    assert result["status"] == "caught_up" and result["new_progress"] > -1
    assert result["lock_holder"] == f"airflow:atlas_targeted_sweep:{run.run_id}:THOROUGH:0"
    state = store.locks.describe(name)
    assert state.holder is None and state.token == killed_token + 1  # taken over from the dead holder, released
    for (shard, strategy), target in swept.items():  # one acquisition per pair and run: its first, token 1
        if (shard, strategy) != (0, "THOROUGH"):
            state = store.locks.describe(store.sweeper.lock_name(shard, strategy))
            assert state.holder is None and state.token == 1, (target, state)


def test_a_stuck_sweep_times_out_releases_its_lease_and_the_retry_succeeds(embedded_store, monkeypatch, tmp_path):
    """execution_timeout stops a hanging sweep task: the timeout interrupts the engine mid-pair, which
    records the run failed (the timeout named) and releases the lease as it unwinds (then Airflow's on_kill
    finds nothing of this run's held); the retry takes the lock again (a new fencing token) and sweeps."""
    from airflow_atlas.workload import WorkloadSpec, run_workload
    from tests.airflow.conftest import FAST, set_settings

    store, _ = embedded_store
    run_workload(store, WorkloadSpec(transactions=40, rows=20, seed=9))
    settle(store)
    set_settings(monkeypatch, **FAST, sweep_timeout_seconds=3)
    _faulty_stores(monkeypatch, tmp_path / "fault.marker", partial(hang, 60))  # the first sweep hangs mid-way
    run = load_dag("atlas_targeted_sweep").test()
    assert str(run.state) == "success", task_states(run)
    index = _retried_sweep(run)
    (target,) = xcom(run, "plan")[index]
    state = store.locks.describe(store.sweeper.lock_name(target["shard"], target["strategy"]))
    # the timed-out try took the lock (token 1), the retry again (token 2), each released it
    assert state.holder is None and state.token == 2
    assert xcom(run, "sweep", map_index=index)[0]["result"]["status"] == "caught_up"
    runs = store.history.runs(target["shard"], target["strategy"])
    assert [r["status"] for r in runs[:2]] == ["caught_up", "failed"] and "AirflowTaskTimeout" in runs[1]["error"]
