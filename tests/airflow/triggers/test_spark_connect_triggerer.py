"""The deferred Spark Connect path with a real ``airflow triggerer`` process: Airflow's own processes (API
server, scheduler with the LocalExecutor, DAG processor, triggerer; tests/processes.py) on SQLite and a Spark
Connect server of this module's own, started once for the module, all on the loopback address ``HOST``
(one no service of the suite uses: free ports there cannot collide with theirs).

``atlas_targeted_sweep`` runs in Spark mode on the Connect connection, on the embedded store (connection
``atlas_default``, the ``atlas_settings`` Variable from the environment); its one sweep task (one group of
all four pairs) defers to :class:`~airflow_atlas.airflow.triggers.spark_connect.SparkConnectJobTrigger`.

1. A run: the sweep task defers, the triggerer runs the job, the task resumes in ``execute_complete`` (its
   first try) and every pair is caught up.
2. The Connect server is killed (SIGKILL: a crash) while the sweep task is deferred and its Spark tasks
   sweep (a fixed pace keeps them at it), and started again. Meanwhile a deferrable ``LockFreeSensor`` of
   another DAG fires in the same triggerer as soon as its lock is released, while the job's thread still
   waits on the dead server (the triggerer is not blocked); the triggerer process stays up and healthy;
   the job fails retriably, the task's retry runs a new job on the new server, and the run ends in success
   with every pair caught up. The recovery times are printed.
"""
from __future__ import annotations

import json
import sys
import time
from datetime import datetime

import pytest

from devkit.airflow import running_airflow
from tests.conftest import REPO_ROOT
from tests.processes import ConnectServer

pytestmark = [pytest.mark.spark, pytest.mark.airflow, pytest.mark.timeout(900)]

HOST = "127.0.0.14"
SPARK_CONN = "spark_connect_own"
DAG_ID = "atlas_targeted_sweep"
SENSOR_DAG_ID = "atlas_test_lock_wait"
SWEEP_TASK = "sweep"
OUTAGE_LOCK = "atlas-test/outage"
SHARDS = 2
PAIRS = [(shard, strategy) for shard in range(SHARDS) for strategy in ("CONSERVATIVE", "THOROUGH")]
STORE_CONFIG = {
    "unreadable_window_seconds": 1.0,
    "punch_interval_seconds": 0.1,
    "transaction_lease_seconds": 600.0,
    # A fixed pace (no application pace): test 2's job sweeps long enough to be caught by the restart.
    "sweep_latency_target": 0,
    "sweep_max_entries_per_second": 4,
    # The killed job's Spark tasks hold their pairs' locks until the leases expire: well within the outage.
    "lock_lease_seconds": 10,
}
SETTINGS = {
    "execution_mode": "spark",
    "spark_conn_id": SPARK_CONN,
    "spark_group_size": 4,  # one sweep task (one Connect job) for all four pairs
    # Normally two tries (the retry's job waits in the Connect client's own retries until the server is
    # back); more, 2, 4, 8, 10, 10, 10 s apart, in case a retry's job fails too.
    "retries": 6,
    "retry_delay_seconds": 2,
    "max_retry_delay_seconds": 10,
    "targeted_sweep_schedule": None,
    "store_config": STORE_CONFIG,
}
SENSOR_DAG = f'''
from datetime import datetime

from airflow.sdk import DAG

from airflow_atlas.airflow.sensors import LockFreeSensor

with DAG(dag_id="{SENSOR_DAG_ID}", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
    LockFreeSensor(task_id="wait_for_lock", lock="{OUTAGE_LOCK}", poke_interval=1, timeout=600)
'''


@pytest.fixture(scope="module")
def connect(tmp_path_factory):
    server = ConnectServer(tmp_path_factory.mktemp("triggerer-connect"), host=HOST)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    return tmp_path_factory.mktemp("triggerer-store") / "atlas.db"


@pytest.fixture(scope="module")
def store(store_path):
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.store import AtlasStore

    s = AtlasStore.open(f"sqlite:///{store_path}", config=StoreConfig(**STORE_CONFIG, initial_shards=SHARDS))
    s.initialize(shards=SHARDS)
    yield s
    s.close()


@pytest.fixture(scope="module")
def airflow(tmp_path_factory, connect, store_path, store):
    from airflow_atlas.airflow.settings import split_dag_settings

    root = tmp_path_factory.mktemp("airflow-triggerer")
    dag_settings, variable = split_dag_settings(SETTINGS)
    env = {
        "AIRFLOW_CONN_ATLAS_DEFAULT": json.dumps({"conn_type": "atlas_embedded", "host": str(store_path)}),
        f"AIRFLOW_CONN_{SPARK_CONN.upper()}": json.dumps({"conn_type": "spark_connect", "host": f"sc://{HOST}",
                                                          "port": connect.port}),
        "AIRFLOW_VAR_ATLAS_SETTINGS": json.dumps(variable),
        "ATLAS_DAG_SETTINGS": json.dumps(dag_settings),
        "ATLAS_SPARK_ARTIFACT_DIR": str(root / "artifacts"),
    }
    dag_files = {f"{DAG_ID}.py": REPO_ROOT / "dags" / f"{DAG_ID}.py", f"{SENSOR_DAG_ID}.py": SENSOR_DAG}
    with running_airflow(root, dag_files, env, host=HOST,
                         components=("api-server", "scheduler", "dag-processor", "triggerer"),
                         ready_dags=[DAG_ID, SENSOR_DAG_ID]) as running:
        yield running


def write_and_settle(store, transactions: int, seed: int) -> None:
    """Committed (and aborted, dead-writer) transactions on both strategies, sweepable when this returns."""
    from airflow_atlas.workload import WorkloadSpec, run_workload

    run_workload(store, WorkloadSpec(transactions=transactions, rows=60, seed=seed))
    store.sweep_timestamps.all()  # a punch now; the read-only window passes over it
    time.sleep(STORE_CONFIG["unreadable_window_seconds"] + 0.5)


def assert_swept(airflow, store, run_id: str) -> None:
    from airflow_atlas.oracle import obsolete_versions

    swept = airflow.xcom(DAG_ID, run_id, SWEEP_TASK, map_index=0)
    assert {(t["shard"], t["strategy"]) for t in swept} == set(PAIRS), swept
    assert {t["result"]["status"] for t in swept} == {"caught_up"} and {t["execution_mode"] for t in swept} == {"spark"}
    assert obsolete_versions(store, airflow.xcom(DAG_ID, run_id, "compute_sweep_timestamps")) == []


def sweep_ti(airflow, run_id: str) -> dict:
    return airflow.task_instances(DAG_ID, run_id).get((SWEEP_TASK, 0), {})


def say(message: str) -> None:
    print(f"[triggerer] {message}", file=sys.stderr)


def test_the_sweep_task_defers_and_completes_through_the_triggerer(airflow, store):
    write_and_settle(store, transactions=12, seed=31)
    started = time.monotonic()
    run_id = airflow.trigger(DAG_ID)
    deferred = False
    while (state := airflow.run_state(DAG_ID, run_id)) not in ("success", "failed"):
        airflow.check_alive()
        deferred = deferred or sweep_ti(airflow, run_id).get("state") == "deferred"
        assert time.monotonic() - started < 600, (state, airflow.task_states(DAG_ID, run_id))
        time.sleep(1.0)
    assert state == "success", f"{airflow.task_states(DAG_ID, run_id)}\n{airflow.log_tails()}"
    ti = sweep_ti(airflow, run_id)
    assert ti["try_number"] == 1, ti
    log = airflow.task_log(DAG_ID, run_id, SWEEP_TASK, 1, map_index=0)
    assert deferred and "(from the triggerer)" in log, log[-3000:]
    assert_swept(airflow, store, run_id)
    say(f"a deferred run took {time.monotonic() - started:.1f}s")


def test_a_connect_server_restart_under_a_deferred_sweep(airflow, connect, store):
    write_and_settle(store, transactions=40, seed=37)
    lease = store.locks.acquire(OUTAGE_LOCK, "test-holder", 600.0)
    assert lease is not None
    run_id = airflow.trigger(DAG_ID)
    sensor_run = airflow.trigger(SENSOR_DAG_ID)
    moments = {"triggered": time.monotonic()}

    def spark_holders() -> set[str]:
        """The live holders of the pairs' locks that are Spark tasks (``spark:<app id>:<shard>:<strategy>``)."""
        from airflow_atlas.sweep.targeted import TargetedSweeper

        states = [store.locks.describe(TargetedSweeper.lock_name(shard, strategy)) for shard, strategy in PAIRS]
        return {s.holder for s in states if s is not None and (s.holder or "").startswith("spark:") and not s.expired}

    # Wait until the sweep task is deferred and its job's Spark tasks sweep, and the sensor waits in the triggerer.
    while not (sweep_ti(airflow, run_id).get("state") == "deferred" and (killed := spark_holders())
               and airflow.task_states(SENSOR_DAG_ID, sensor_run).get(("wait_for_lock", -1)) == "deferred"):
        airflow.check_alive()
        assert airflow.run_state(DAG_ID, run_id) in ("queued", "running"), airflow.task_states(DAG_ID, run_id)
        assert time.monotonic() - moments["triggered"] < 300, (airflow.task_states(DAG_ID, run_id),
                                                              airflow.task_states(SENSOR_DAG_ID, sensor_run))
        time.sleep(0.5)
    moments["killing"], killing_at = time.monotonic(), time.time()
    connect.kill()
    moments["killed"] = time.monotonic()
    store.locks.release_held_by(lease.name, lease.holder)
    # The sensor's trigger fires while the job's thread waits on the dead server (its client retries).
    assert airflow.wait_run(SENSOR_DAG_ID, sensor_run, timeout=120) == "success"
    moments["sensor"] = time.monotonic()
    waiting = sweep_ti(airflow, run_id)
    assert waiting["state"] == "deferred" and waiting["try_number"] == 1, waiting
    assert airflow.processes["triggerer"].poll() is None and airflow.health()["triggerer"]["status"] == "healthy"

    connect.start()
    moments["started"] = time.monotonic()
    while (state := airflow.run_state(DAG_ID, run_id)) not in ("success", "failed"):
        airflow.check_alive()
        if "resumed" not in moments and spark_holders() - killed:  # the retry's job sweeps on the new server
            moments["resumed"] = time.monotonic()
        assert time.monotonic() - moments["started"] < 480, airflow.task_states(DAG_ID, run_id)
        time.sleep(1.0)
    moments["done"] = time.monotonic()
    assert state == "success", f"{airflow.task_states(DAG_ID, run_id)}\n{airflow.log_tails()}"
    assert airflow.processes["triggerer"].poll() is None and airflow.health()["triggerer"]["status"] == "healthy"

    # The first try resumed from the trigger's event with the job's failure, retriable (SparkSweepFailed, not
    # SparkSweepRefused); a later try swept everything.
    ti = sweep_ti(airflow, run_id)
    assert ti["try_number"] >= 2, ti
    first = airflow.task_log(DAG_ID, run_id, SWEEP_TASK, 1, map_index=0)
    assert '"SparkSweepFailed"' in first and '"execute_complete"' in first, first[-3000:]
    assert "SparkSweepRefused" not in first and "not retried" not in first, first[-3000:]
    assert "(from the triggerer)" in airflow.task_log(DAG_ID, run_id, SWEEP_TASK, ti["try_number"], map_index=0)
    assert_swept(airflow, store, run_id)
    since = moments["killing"]
    tries = {t["try_number"]: t for t in airflow.api(
        "GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{SWEEP_TASK}/0/tries").json()["task_instances"]}
    first_failed = datetime.fromisoformat(tries[1]["end_date"]).timestamp() - killing_at
    say(f"restart: the server was killed in {moments['killed'] - since:.1f}s; the sensor's run succeeded "
        f"{moments['sensor'] - since:.1f}s after the kill; the first try failed {first_failed:.1f}s after it; the server was "
        f"up again {moments['started'] - since:.1f}s after it; after that the retry's Spark tasks swept within "
        f"{moments.get('resumed', float('nan')) - moments['started']:.1f}s and the run succeeded within "
        f"{moments['done'] - moments['started']:.1f}s (sweep task tries: {ti['try_number']}, states "
        f"{[tries[n]['state'] for n in sorted(tries)]})")
