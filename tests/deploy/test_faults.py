"""Faults in the deployment mid-sweep (issue 21 item 2), each while a REST-triggered run of
atlas_targeted_sweep has its sweep task sweeping a fresh backlog:

* the scheduler killed with SIGKILL (its supervisor in scripts/deploy.sh starts it again); the api-server
  restarted;
* Postgres restarted (the metadata database and Celery's result backend): the components that exit when
  they lose it are started again by their supervisors - the test starts nothing (issue 32 item 9); Redis
  restarted (the broker);
* SIGKILL of a Celery worker's MAIN process: its pool processes die with it (billiard's parent-death
  signal), the rest of its process group (the worker's stale-bundle cleanup process, a plain fork that
  would live on with parent 1: issue 32 item 11) is ended by the supervisor, the task process - a process
  group of its own - is orphaned and goes on sweeping (it talks to the store directly) until it has nothing
  left to tell its dead supervisor; the worker is started again by its supervisor; the task, without
  heartbeats, is failed after ``task_instance_heartbeat_timeout`` and retried;
* SIGKILL of a whole worker's process tree (every process of its current session, the task process
  included), the worker started again by its supervisor: the task is lost, failed after the heartbeat
  timeout and retried. It is killed
  once a pair's metrics have reached the deployment's statsd-exporter (sent per pair, while the task runs).

* SIGKILL of the timestamp server instance that serves the store: the other instance takes over within
  seconds and the sweep's draws carry on.

After each: the run ends in success (through the retry where a task was lost); no sweep lease (shard,
strategy) is held once the run is over (the orphan, if any, has exited by then); every tombstone written -
the orphan's included - is counted for compaction: the tombstones since the last compaction in the store's
sweep history (what ``atlas_compaction`` plans from) grew by at least the cells whose versions the run
actually removed (read from the store before and after); ``verify`` passes on the store. The recovery time
(fault to the run's success) is printed.

The fault runs sweep at a fixed ``sweep_max_entries_per_second`` :data:`PACE` (``sweep_latency_target`` 0: the
application pace, which runs free while the workload rests, is off; a Variable edit through the REST API, as in
the UI) so a sweep task is still sweeping when the fault hits; where a task is lost, the full pace is
restored once the fault has hit, so the retry does not sweep at the test's pace. ``atlas_compaction`` is
paused meanwhile (the count must not be reset by a compaction between the two readings; a paused DAG loses
no count: the store holds it). The deployment is conftest.py's, shared with test_deployment.py (started once)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass

import pytest

from .conftest import SHARDS, log_tails, settings_value, statsd_samples
from .test_deployment import _assert_success, _settle, _trigger_rest

pytestmark = [pytest.mark.deploy, pytest.mark.cassandra, pytest.mark.timeout(900)]

DAG = "atlas_targeted_sweep"
SWEEP_TASK = "sweep"  # targeted_sweep_pipeline's sweep task, one per group of pairs
PACE = 20
"""sweep_max_entries_per_second of the fault runs: the workload's ~450 queue entries take a sweep task
about 20 s (4 pairs, one after the other); the fault hits 3 s in."""
WORKLOAD = {"transactions": 100, "rows": 30, "columns": 4}
TABLES = ("demo_conservative", "demo_thorough")  # WorkloadSpec's
RUNNING_TIMEOUT = 180.0
ORPHAN_TIMEOUT = 300.0


@dataclass
class FaultRun:
    run_id: str
    ti_id: str
    versions: dict  # (table, cell) -> the cell's version timestamps before the run
    counted: int  # tombstones since the last compaction, summed over TABLES, before the run
    runs_before: dict  # statsd-exporter's per-pair run counters read before the run was triggered


@pytest.fixture(scope="module")
def fault_settings(deployment):
    """The fault runs' pace (a Variable edit) and atlas_compaction paused (see the module doc); both undone."""
    r = deployment.api("PATCH", "/api/v2/dags/atlas_compaction", json={"is_paused": True})
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + 300
    while deployment.api("GET", "/api/v2/dags/atlas_compaction/dagRuns", params={"state": "running"}).json()["total_entries"]:
        assert time.monotonic() < deadline, "an atlas_compaction run did not end"
        time.sleep(2)
    yield
    _set_settings(deployment, settings_value())
    deployment.api("PATCH", "/api/v2/dags/atlas_compaction", json={"is_paused": False})


def _set_settings(deployment, value: dict) -> None:
    """The atlas_settings Variable's value, edited through the REST API (as the UI edits it); each task reads
    it when it starts."""
    r = deployment.api("PATCH", "/api/v2/variables/atlas_settings", params={"update_mask": ["value"]},
                       json={"key": "atlas_settings", "value": json.dumps(value)})
    assert r.status_code == 200, r.text


def _full_pace(deployment) -> None:
    """Once the fault has hit: the retry sweeps what is left at the deployment's own pace, not :data:`PACE`."""
    _set_settings(deployment, settings_value())


def _cells():
    from airflow_atlas.kvs.api import Cell

    return [Cell(f"row{r:06d}".encode(), f"c{c:02d}".encode()) for r in range(WORKLOAD["rows"])
            for c in range(WORKLOAD["columns"])]


def _versions(store) -> dict:
    out = {}
    for table in TABLES:
        for cell, stamps in store.kvs.get_all_timestamps(table, _cells()).items():
            out[(table, cell)] = {ts for ts in stamps if ts >= 0}  # not a sweep's sentinel (-1)
    return out


def _counted(store) -> int:
    return sum(store.history.tombstones_since_compaction(table).count for table in TABLES)


def _sweep_ti(deployment, run_id: str) -> dict | None:
    r = deployment.api("GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances")
    return next((t for t in r.json().get("task_instances", []) if t["task_id"] == SWEEP_TASK), None)


def _mid_sweep(deployment, store, seed: int) -> FaultRun:
    """A fresh backlog, a REST-triggered run, returned once its sweep task's process is sweeping. A run of
    the 5-minute schedule may come first and sweep the backlog (its sweep task is then ``skipped`` in ours,
    nothing to do): then once more, with a new backlog."""
    for attempt in range(3):
        run = _try_mid_sweep(deployment, store, seed + 100 * attempt)
        if run is not None:
            return run
        print(f"[deploy] a scheduled run swept the backlog first (attempt {attempt + 1}): once more")
    raise AssertionError(f"scheduled runs swept every backlog first\n{log_tails()}")


def _try_mid_sweep(deployment, store, seed: int) -> FaultRun | None:
    from airflow_atlas.workload import WorkloadSpec, run_workload

    _set_settings(deployment, settings_value(sweep_max_entries_per_second=PACE, sweep_latency_target=0))
    run_workload(store, WorkloadSpec(**WORKLOAD, seed=seed))
    _settle(store)
    versions, counted = _versions(store), _counted(store)
    runs_before = statsd_samples("airflow_atlas_sweep_shard_runs_total")
    run_id = _trigger_rest(deployment, DAG)
    deadline = time.monotonic() + RUNNING_TIMEOUT
    while True:
        ti = _sweep_ti(deployment, run_id)
        if ti is not None and ti["state"] == "skipped":
            _assert_success(deployment, DAG, run_id)
            return None
        if ti is not None and ti["state"] == "running" and _task_process(deployment, ti["id"]) is not None:
            break
        assert time.monotonic() < deadline, f"the sweep task of {run_id} did not start: {ti}\n{log_tails()}"
        time.sleep(0.5)
    time.sleep(3)  # some of the backlog swept, most of it not
    return FaultRun(run_id, ti["id"], versions, counted, runs_before)


def _session_pids(session: str) -> list[int]:
    return [int(p) for p in subprocess.run(["pgrep", "-s", session], capture_output=True, text=True).stdout.split()]


def _task_process(deployment, ti_id: str) -> tuple[str, int] | None:
    """(worker, pid) of the task process running ``ti_id`` (its title: ``airflow worker -- <ti id>``)."""
    for worker in ("worker-1", "worker-2"):
        session = deployment.script("session", worker, timeout=60).stdout.strip()
        out = subprocess.run(["pgrep", "-s", session, "-f", f"airflow worker -- {ti_id}"], capture_output=True,
                             text=True).stdout.split() if session else []
        if out:
            return worker, int(out[0])
    return None


def _group(pid: int) -> int | None:
    """The process group of ``pid``, None once it is gone."""
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _ps(pids: list[int]) -> str:
    return subprocess.run(["ps", "-ww", "-o", "pid,ppid,pgid,sid,args", "-p", ",".join(map(str, pids))],
                          capture_output=True, text=True).stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _after(deployment, store, run: FaultRun, fault_at: float, fault: str) -> None:
    from airflow_atlas.sweep.targeted import TargetedSweeper
    from airflow_atlas.verify import run_verify

    _assert_success(deployment, DAG, run.run_id)
    print(f"[deploy] {fault}: the run succeeded {time.monotonic() - fault_at:.0f}s after the fault")
    # The sweep leases (atlas_compaction, paused, holds none of them).
    held = [state for shard in range(SHARDS) for strategy in ("CONSERVATIVE", "THOROUGH")
            if (state := store.locks.describe(TargetedSweeper.lock_name(shard, strategy))) is not None and state.held]
    assert not held, held
    # Every tombstone counted: each cell that lost a version got at least one tombstone, recorded in the
    # store's sweep history by whichever process wrote it (a sweep step may tombstone a cell more than once).
    after = _versions(store)
    removed = sum(1 for key, stamps in run.versions.items() if stamps - after.get(key, set()))
    counted = _counted(store) - run.counted
    print(f"[deploy] {fault}: {removed} cell(s) lost versions, {counted} tombstone(s) counted since the run began")
    assert removed > 0 and counted >= removed, (removed, counted)
    report = run_verify(store)
    assert report.ok, report.findings


def _main_pid(deployment, name: str) -> int:
    out = deployment.script("pid", name, timeout=60).stdout.strip()
    assert out, f"{name} has no process"
    return int(out)


def _started_again_by_itself(deployment, name: str, killed: int, seconds: float = 60) -> int:
    """The new main process of ``name``, which its supervisor started after ``killed`` died (nobody runs
    ``scripts/deploy.sh start``: the deployment's restart policy, as compose's ``restart: unless-stopped``)."""
    deadline = time.monotonic() + seconds
    while True:
        out = deployment.script("pid", name, timeout=60).stdout.strip()
        if out and int(out) != killed and _alive(int(out)):
            return int(out)
        assert time.monotonic() < deadline, f"{name} was not started again {seconds:.0f}s after it died\n{log_tails()}"
        time.sleep(0.5)


def _restart(deployment, name: str) -> None:
    stopped = deployment.script("stop", name, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    started = deployment.script("start", name, timeout=300)
    assert started.returncode == 0, started.stderr


def test_scheduler_killed_and_restarted_mid_sweep(deployment, cassandra_store, fault_settings):
    run = _mid_sweep(deployment, cassandra_store, seed=21)
    deployment.session("scheduler")
    killed = _main_pid(deployment, "scheduler")
    os.kill(killed, signal.SIGKILL)
    fault_at = time.monotonic()
    _started_again_by_itself(deployment, "scheduler", killed)
    _after(deployment, cassandra_store, run, fault_at, "scheduler SIGKILL, started again by its supervisor")


def test_api_server_restarted_mid_sweep(deployment, cassandra_store, fault_settings):
    """Task processes talk to the api-server's execution API: they retry while it is down."""
    run = _mid_sweep(deployment, cassandra_store, seed=22)
    fault_at = time.monotonic()
    _restart(deployment, "api-server")
    _after(deployment, cassandra_store, run, fault_at, "api-server restart")


def test_serving_timestamp_server_killed_mid_sweep(deployment, cassandra_store, fault_settings):
    """kill -9 of the timestamp server instance that leads the store while a sweep task sweeps: the other
    instance takes over (the store's record names it, under a higher epoch) and the task's draws carry on after
    a pause of a few seconds; the killed one is started again by its supervisor and stands by."""
    from airflow_atlas.timestamps.record import read_record

    before, _ = read_record(cassandra_store.kvs, serial=True)
    assert before is not None and before.leader, "the deployment's store is not served by its timestamp servers"
    port = before.leader_address.rsplit(":", 1)[1]
    leader = {"9350": "timestamps-1", "9351": "timestamps-2"}[port]
    run = _mid_sweep(deployment, cassandra_store, seed=23)
    top = cassandra_store.timestamps.fresh_timestamp()
    killed = _main_pid(deployment, leader)
    os.kill(killed, signal.SIGKILL)
    fault_at = time.monotonic()
    drawn = cassandra_store.timestamps.fresh_timestamp()  # waits out the takeover
    print(f"[deploy] timestamp server takeover: a draw answered {time.monotonic() - fault_at:.1f}s after the kill")
    after, _ = read_record(cassandra_store.kvs, serial=True)
    assert after is not None and after.epoch > before.epoch and after.leader != before.leader, (before, after)
    assert drawn > top
    _started_again_by_itself(deployment, leader, killed)
    _after(deployment, cassandra_store, run, fault_at, f"{leader} (the serving timestamp server) SIGKILL")


AIRFLOW_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer", "worker-1", "worker-2")


def _healthy(deployment, seconds: float) -> None:
    """Within ``seconds``: every Airflow component has a main process and the api-server reports the
    scheduler, dag-processor and triggerer healthy."""
    import httpx

    deadline = time.monotonic() + seconds
    last = ""
    while True:
        pids = {name: deployment.script("pid", name, timeout=60).stdout.strip() for name in AIRFLOW_COMPONENTS}
        try:
            health = httpx.get(f"{deployment.base_url}/api/v2/monitor/health", timeout=10).json()
            unhealthy = [k for k in ("scheduler", "dag_processor", "triggerer") if health[k]["status"] != "healthy"]
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            unhealthy = [f"{type(exc).__name__}: {exc}"]
        down = [name for name, pid in pids.items() if not pid]
        if not down and not unhealthy:
            return
        last = f"down: {down}, unhealthy: {unhealthy}"
        assert time.monotonic() < deadline, f"the deployment did not heal within {seconds:.0f}s ({last})\n{log_tails()}"
        time.sleep(2)


def test_postgres_restarted_mid_sweep(deployment, cassandra_store, fault_settings):
    """The metadata database and Celery's result backend. The api-server and workers reconnect; the
    scheduler, triggerer and dag-processor may exit when they lose their database (which ones varies) and
    are started again by their supervisors, as compose's restart policy starts them: the test starts no
    component (issue 32 item 9: before, they stayed down until `scripts/deploy.sh start`)."""
    before = {name: _main_pid(deployment, name) for name in AIRFLOW_COMPONENTS}
    run = _mid_sweep(deployment, cassandra_store, seed=23)
    fault_at = time.monotonic()
    _restart(deployment, "postgres")
    print(f"[deploy] Postgres restart: back after {time.monotonic() - fault_at:.0f}s")
    _after(deployment, cassandra_store, run, fault_at, "Postgres restart")
    _healthy(deployment, 120)
    restarted = [name for name in AIRFLOW_COMPONENTS if _main_pid(deployment, name) != before[name]]
    print(f"[deploy] Postgres restart: exited and started again by their supervisors: {restarted or 'none'}")


def test_redis_restarted_mid_sweep(deployment, cassandra_store, fault_settings):
    """The broker: the running task does not need it; the workers and the scheduler reconnect."""
    run = _mid_sweep(deployment, cassandra_store, seed=24)
    fault_at = time.monotonic()
    _restart(deployment, "redis")
    _after(deployment, cassandra_store, run, fault_at, "Redis restart")


def test_worker_main_process_killed_mid_sweep_orphans_its_task(deployment, cassandra_store, fault_settings):
    """The orphaned task process goes on sweeping after its worker died: its tombstones are counted too."""
    run = _mid_sweep(deployment, cassandra_store, seed=25)
    worker, task_pid = _task_process(deployment, run.ti_id)
    session = deployment.session(worker)  # its orphans: `scripts/deploy.sh stop` ends them (checked at the end)
    task_group = os.getpgid(task_pid)
    killed = _main_pid(deployment, worker)
    os.kill(killed, signal.SIGKILL)
    fault_at, fault_wall = time.monotonic(), time.time()
    time.sleep(1)
    assert _alive(task_pid), "the task process died with its worker's main process: nothing was orphaned"
    _full_pace(deployment)  # the orphan keeps the pace it read when it started
    # Nothing of the dead worker but the orphaned task lives on (issue 32 item 11: before, a `celery worker`
    # child - the stale-bundle cleanup process - lived on with parent 1 until `scripts/deploy.sh stop`).
    deadline = time.monotonic() + 20
    while leftovers := [p for p in _session_pids(session) if _group(p) not in (task_group, None)]:
        assert time.monotonic() < deadline, f"left of the killed {worker}: {_ps(leftovers)}"
        time.sleep(0.5)
    _started_again_by_itself(deployment, worker, killed)
    deadline = time.monotonic() + ORPHAN_TIMEOUT
    while _alive(task_pid):
        assert time.monotonic() < deadline, f"the orphaned task process {task_pid} still runs"
        time.sleep(1)
    print(f"[deploy] the orphaned task process exited {time.monotonic() - fault_at:.0f}s after its worker died")
    swept = _swept_since(cassandra_store, fault_wall)
    assert swept, "the orphan swept nothing after its worker died: the fault came too late"
    print(f"[deploy] the orphan tombstoned {sum(swept.values())} cell(s) after its worker died: {swept}")
    _after(deployment, cassandra_store, run, fault_at, f"{worker} main process SIGKILL (task orphaned) + restart")


def _a_pair_reported(deployment, store, run: FaultRun) -> dict:
    """Once the sweep task has finished a pair: the pair's metrics have reached the deployment's
    statsd-exporter while other pairs of the task still have work to sweep (issue 32 item 10: sent per pair;
    sent at the end of the task, they arrived only once every pair was swept). The pairs' run counters
    before and after. "Before" is read before the run was triggered: read once the task was seen running (as
    until a CI run on a busy machine), it already held the pairs that the task swept while the test looked for
    its process, and a task that had swept them all left nothing to wait for."""
    before = run.runs_before
    deadline = time.monotonic() + RUNNING_TIMEOUT
    while True:
        now = statsd_samples("airflow_atlas_sweep_shard_runs_total")
        if any(value > before.get(pair, 0) for pair, value in now.items()):
            left = [(strategy, shard) for shard in range(SHARDS) for strategy in ("CONSERVATIVE", "THOROUGH")
                    if store.sweeper.has_sweepable_work(shard, strategy)]
            assert left, f"a pair's metrics arrived only once the task had swept every pair: {before} -> {now}"
            assert _task_process(deployment, run.ti_id) is not None, "the sweep task ended before a pair reported"
            return {"before": before, "after": now, "pairs_left": left}
        if time.monotonic() >= deadline:
            ti = _sweep_ti(deployment, run.run_id)
            history = {(strategy, shard): store.history.recent(shard, strategy, limit=3)
                       for shard in range(SHARDS) for strategy in ("CONSERVATIVE", "THOROUGH")}
            raise AssertionError(f"no pair's metrics reached statsd-exporter in {RUNNING_TIMEOUT:g} s: {before} -> "
                                 f"{now}; the sweep task: {ti}, its process "
                                 f"{_task_process(deployment, run.ti_id)}; the pairs' last iterations: {history}\n"
                                 f"{log_tails()}")
        time.sleep(0.5)


def test_worker_process_tree_killed_mid_sweep(deployment, cassandra_store, fault_settings):
    """Every process of the worker's session dies (as in a container killed): the task is lost. It is killed
    once it has finished a pair, whose metrics have reached the StatsD receiver by then."""
    run = _mid_sweep(deployment, cassandra_store, seed=26)
    reported = _a_pair_reported(deployment, cassandra_store, run)
    print(f"[deploy] a pair's metrics reached statsd-exporter while the task ran: {reported}")
    worker, _ = _task_process(deployment, run.ti_id)
    session = deployment.session(worker)
    killed = _main_pid(deployment, worker)
    pids = _session_pids(session)
    subprocess.run(["pkill", "-KILL", "-s", session], check=True)
    fault_at = time.monotonic()
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in pids):
        assert time.monotonic() < deadline, "the killed worker's processes are still alive"
        time.sleep(0.2)
    _full_pace(deployment)
    _started_again_by_itself(deployment, worker, killed)
    _after(deployment, cassandra_store, run, fault_at, f"{worker} process tree SIGKILL + restart")


def _swept_since(store, since: float) -> dict:
    """Cells tombstoned per table by sweep iterations recorded after ``since`` (wall clock)."""
    out: dict = {}
    for shard in range(SHARDS):
        for strategy in ("CONSERVATIVE", "THOROUGH"):
            for record in store.history.recent(shard, strategy, limit=500):
                if record["at"] > since:
                    for table, n in (record.get("tables") or {}).items():
                        out[table] = out.get(table, 0) + n
    return out
