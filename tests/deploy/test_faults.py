"""Faults in the deployment mid-sweep (issue 21 item 2, the part done so far): the scheduler killed with
SIGKILL and restarted, the api-server restarted, each while a run of atlas_targeted_sweep has a task
running. After each: the run ends in success (through retries where a task was lost), no sweep lease
(shard, strategy) is held once the run is over, ``verify`` passes on the store; the recovery time (fault to the run's success)
is printed. The deployment is conftest.py's, shared with test_deployment.py (started once)."""
from __future__ import annotations

import os
import signal
import time

import pytest

from .conftest import SHARDS, log_tails
from .test_deployment import _assert_success, _settle, _trigger_rest

pytestmark = [pytest.mark.deploy, pytest.mark.cassandra, pytest.mark.timeout(900)]

RUNNING_TIMEOUT = 180.0


def _mid_sweep(deployment, store, seed: int) -> str:
    """A fresh backlog, a REST-triggered run, returned once one of its tasks is running."""
    from airflow_atlas.workload import WorkloadSpec, run_workload

    run_workload(store, WorkloadSpec(transactions=60, rows=30, seed=seed))
    _settle(store)
    run_id = _trigger_rest(deployment, "atlas_targeted_sweep")
    deadline = time.monotonic() + RUNNING_TIMEOUT
    while not deployment.running_tasks("atlas_targeted_sweep", run_id):
        assert time.monotonic() < deadline, f"no task of {run_id} started running\n{log_tails()}"
        time.sleep(0.5)
    return run_id


def _after(deployment, store, run_id: str, fault_at: float, fault: str) -> None:
    from airflow_atlas.verify import run_verify

    _assert_success(deployment, "atlas_targeted_sweep", run_id)
    print(f"[deploy] {fault}: the run succeeded {time.monotonic() - fault_at:.0f}s after the fault")
    from airflow_atlas.sweep.targeted import TargetedSweeper

    # The sweep leases (a compaction the run's asset event scheduled may legitimately hold its own now).
    held = [state for shard in range(SHARDS) for strategy in ("CONSERVATIVE", "THOROUGH")
            if (state := store.locks.describe(TargetedSweeper.lock_name(shard, strategy))) is not None and state.held]
    assert not held, held
    report = run_verify(store)
    assert report.ok, report.findings


def _main_pid(deployment, name: str) -> int:
    out = deployment.script("pid", name, timeout=60).stdout.strip()
    assert out, f"{name} has no process"
    return int(out)


def test_scheduler_killed_and_restarted_mid_sweep(deployment, cassandra_store):
    run_id = _mid_sweep(deployment, cassandra_store, seed=21)
    os.kill(_main_pid(deployment, "scheduler"), signal.SIGKILL)
    fault_at = time.monotonic()
    deadline = time.monotonic() + 30
    while deployment.script("status", timeout=60).returncode == 0:  # its `timeout` wrapper ends with it
        assert time.monotonic() < deadline, "the killed scheduler still shows as running"
        time.sleep(0.5)
    started = deployment.script("start", "scheduler", timeout=300)
    assert started.returncode == 0, started.stderr
    _after(deployment, cassandra_store, run_id, fault_at, "scheduler SIGKILL + restart")


def test_api_server_restarted_mid_sweep(deployment, cassandra_store):
    """Task processes talk to the api-server's execution API: they retry while it is down."""
    run_id = _mid_sweep(deployment, cassandra_store, seed=22)
    fault_at = time.monotonic()
    stopped = deployment.script("stop", "api-server", timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    started = deployment.script("start", "api-server", timeout=300)
    assert started.returncode == 0, started.stderr
    _after(deployment, cassandra_store, run_id, fault_at, "api-server restart")
