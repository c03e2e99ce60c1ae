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
    tries = {ti.map_index: ti.try_number for ti in run.get_task_instances() if ti.task_id == "shard.sweep"}
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
    assert xcom(run, "shard.sweep", map_index=index)[0]["result"]["status"] == "caught_up"
    assert store.queue.progress.get_progress(target["shard"], target["strategy"]) > -1
    assert all(lock.holder is None for lock in store.locks.list_locks("sweep/"))


def test_the_lock_of_a_killed_task_is_recovered_after_its_lease_expires(embedded_store, monkeypatch, tmp_path):
    """A process holding a shard lock (refreshing it, as a running sweep does) is SIGKILLed: no release,
    no on_kill. The next run waits for the lease to expire, takes the lock over and sweeps.

    Which fencing token the run ends with: the acquire task takes the lock over (the dead holder's token
    + 1). Nobody refreshes that lease until the group's sweep task starts, and dag.test() runs every
    group's acquire_lock before the first sweep, one task at a time (about a second each here, several on a
    loaded machine): with a 5 s lease the lease often expires in between (seen: 7.3 s between this pair's
    acquire and its sweep under load). The sweep task then re-acquires it as the same holder
    (execution/in_task.py ``_ensure_lease``) - a larger token, by design: the lock was free, and anything
    the first lease fenced refuses it now. A failed sweep whose retry finds the lease expired does the same.
    Nothing else takes the lock in the run (reconcile does not lock; release keeps the token). So the
    sweep's XCom carries the lease it swept under, and the lock ends released with exactly that token.
    Checked for every pair of the run: the other pairs' leases expire the same way (their sweeps wait
    for all acquires too), so most runs take the re-acquisition path for some pair."""
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
    index = next(i for i, g in enumerate(groups) if g[0]["shard"] == 0 and g[0]["strategy"] == "THOROUGH")
    acquired = xcom(run, "shard.acquire_lock", map_index=index)[0]
    assert acquired["acquired"] is True and acquired["token"] == killed_token + 1  # taken over from the dead holder
    swept = xcom(run, "shard.sweep", map_index=index)[0]
    assert swept["result"]["status"] == "caught_up" and swept["result"]["new_progress"] > -1
    # swept under the acquire task's lease, or (expired meanwhile) the same holder's re-acquisition
    assert swept["holder"] == acquired["holder"] == swept["result"]["lock_holder"] and swept["token"] >= acquired["token"]
    state = store.locks.describe(name)
    assert state.holder is None and state.token == swept["token"]  # released by this run after its last acquisition
    for i in range(len(groups)):  # the other pairs too (their leases also expire while the other groups run)
        for target in xcom(run, "shard.sweep", map_index=i):
            state = store.locks.describe(target["lock"])
            assert state.holder is None and state.token == target["token"] >= 1, (target, state)


def test_a_stuck_sweep_times_out_its_on_kill_releases_the_lease_and_the_retry_succeeds(embedded_store, monkeypatch, tmp_path):
    """execution_timeout stops a hanging sweep task; Airflow calls on_kill, which releases the lease the
    task held (so the retry must take the lock again: a new fencing token); the retry then sweeps."""
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
    acquired = xcom(run, "shard.acquire_lock", map_index=index)[0]
    state = store.locks.describe(store.sweeper.lock_name(target["shard"], target["strategy"]))
    # on_kill released the lease, so the retry re-acquired it (token + 1) before sweeping and releasing
    assert state.holder is None and state.token == acquired["token"] + 1
    assert xcom(run, "shard.sweep", map_index=index)[0]["result"]["status"] == "caught_up"
