"""Sweep metrics arrive at a real StatsD listener (a UDP socket of the test) through Airflow's own metrics
configuration: atlas_manual_sweep run with the real dag.test() sends, per swept pair, the counters,
timers and gauges of docs/METRICS.md with the figures the sweep task returned; plain StatsD gets the
dotted per-pair names, a tag-keeping StatsD (InfluxDB tags) the tagged ones; a metrics error never fails
a sweep."""
from __future__ import annotations

import re
import socket
import time

import pytest

from airflow_atlas.serialisation import to_json
from tests.airflow.conftest import load_dag, set_settings, task_states, xcom

pytestmark = pytest.mark.airflow


@pytest.fixture
def statsd(monkeypatch, airflow_home):
    """A UDP socket on a free port, and Airflow's metrics pointed at it (StatsD on), set up the way the
    task runner does when a task process starts. Yields a function returning the lines received so far."""
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics.stats_utils import get_stats_factory

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.3)
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(sock.getsockname()[1]))
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PREFIX", "airflow")
    stats.initialize(factory=get_stats_factory(), export_legacy_names=False)
    received: list[str] = []

    def lines() -> list[str]:
        while True:
            try:
                data, _ = sock.recvfrom(65536)
            except TimeoutError:
                return received
            received.extend(data.decode().splitlines())

    yield lines
    sock.close()
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "False")  # metrics off again, through the same public path
    stats.initialize(factory=get_stats_factory(), export_legacy_names=False)


def _metrics(lines: list[str], prefix: str) -> dict[str, tuple[float, str]]:
    """{name: (value, type)} of the lines starting with ``prefix`` (the last value of each name)."""
    out = {}
    for line in lines:
        m = re.fullmatch(r"([^:]+):([-0-9.eE]+)\|(c|g|ms)(\|@[0-9.]+)?", line)
        if m and m.group(1).startswith(prefix):
            out[m.group(1)] = (float(m.group(2)), m.group(3))
    return out


def _workload(store):
    from airflow_atlas.workload import WorkloadSpec, run_workload

    run_workload(store, WorkloadSpec(transactions=60, rows=25, seed=4))
    time.sleep(1.5)  # past the read-only window of the test settings


def test_a_manual_sweep_sends_per_pair_metrics_to_statsd(embedded_store, statsd):
    store, _ = embedded_store
    _workload(store)
    dag = load_dag("atlas_manual_sweep")
    run = dag.test(run_conf={"shards": [0], "strategy": "THOROUGH"})
    assert str(run.state) == "success", task_states(run)
    (swept,) = xcom(run, "sweep", map_index=0)
    result = swept["result"]
    assert result["status"] == "caught_up" and result["entries_read"] > 0 and result["cells_tombstoned"] > 0

    lines = statsd()
    pair = _metrics(lines, "airflow.atlas.sweep.thorough.0.")
    p = "airflow.atlas.sweep.thorough.0."
    assert pair[p + "shard_runs.caught_up"] == (1, "c")
    assert pair[p + "iterations"] == (result["iterations"], "c")
    assert pair[p + "entries_swept"] == (result["entries_read"], "c")
    assert pair[p + "tombstones_written"] == (result["cells_tombstoned"], "c")
    assert pair[p + "aborted_writes_deleted"] == (result["aborted_writes_deleted"], "c")
    assert pair[p + "sentinels_written"] == (result["sentinels_written"], "c")
    assert pair[p + "duration"][1] == "ms" and pair[p + "iteration_time"][1] == "ms"
    assert pair[p + "duration"][0] == pytest.approx(result["duration_seconds"] * 1000, abs=1)
    assert pair[p + "backlog"] == (0, "g")  # caught up, nothing left queued
    assert p + "backlog:0|g" in lines  # counts go out as integers, as dashboards and alerts expect them
    assert pair[p + "lag"] == (max(0, result["sweep_ts"] - 1 - result["new_progress"]), "g")
    assert pair[p + "lag_seconds"][1] == "g"
    # The tagged names still carry the counters (tags dropped by plain StatsD), but no shared gauge.
    tagged = _metrics(lines, "airflow.atlas.sweep.")
    assert tagged["airflow.atlas.sweep.entries_swept"] == (result["entries_read"], "c")
    assert "airflow.atlas.sweep.backlog" not in tagged
    # Only the chosen pair was swept.
    assert not [name for name in tagged if ".conservative." in name or ".thorough.1." in name]


def test_a_statsd_that_keeps_tags_gets_the_tagged_names(embedded_store, statsd, monkeypatch):
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics.stats_utils import get_stats_factory

    from airflow_atlas.airflow.metrics import emit_shard_metrics

    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED", "True")
    stats.initialize(factory=get_stats_factory(), export_legacy_names=False)
    store, _ = embedded_store
    _workload(store)
    result = to_json(store.sweeper.sweep_shard(1, "THOROUGH"))
    assert result["entries_read"] > 0
    emit_shard_metrics({"shard": 1, "strategy": "THOROUGH"}, result)
    lines = statsd()
    got = _metrics(lines, "airflow.atlas.sweep.")
    tags = ",shard=1,strategy=THOROUGH"
    assert got[f"airflow.atlas.sweep.entries_swept{tags}"] == (result["entries_read"], "c")
    assert got[f"airflow.atlas.sweep.sentinels_written{tags}"] == (result["sentinels_written"], "c")
    assert got[f"airflow.atlas.sweep.backlog{tags}"] == (0, "g")
    assert got[f"airflow.atlas.sweep.shard_runs{tags},status={result['status']}"] == (1, "c")
    assert not [name for name in got if ".thorough." in name]  # no dotted fallback needed


def test_dry_runs_and_skipped_pairs_count_as_runs_only_and_errors_never_raise(embedded_store, statsd, caplog):
    from airflow_atlas.airflow.metrics import emit_shard_metrics

    emit_shard_metrics({"shard": 0, "strategy": "THOROUGH"}, {"shard": 0, "strategy": "THOROUGH", "status": "dry_run", "entries_read": 9})
    got = _metrics(statsd(), "airflow.atlas.sweep.")
    assert got == {"airflow.atlas.sweep.shard_runs": (1, "c"), "airflow.atlas.sweep.thorough.0.shard_runs.dry_run": (1, "c")}

    with caplog.at_level("WARNING"):  # a result the metrics cannot read
        emit_shard_metrics({"shard": 0, "strategy": "THOROUGH"}, {"shard": "zero", "strategy": "THOROUGH", "status": "caught_up"})
    assert "could not emit sweep metrics for THOROUGH/0: invalid literal" in caplog.text


def test_a_failed_pair_counts_as_a_failed_run_with_its_error_class(embedded_store, statsd, monkeypatch):
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics.stats_utils import get_stats_factory

    from airflow_atlas.airflow.metrics import emit_shard_metrics

    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED", "True")
    stats.initialize(factory=get_stats_factory(), export_legacy_names=False)
    failed = {"status": "failed", "error": "StoreUnavailableError: Cannot achieve consistency level ALL"}
    emit_shard_metrics({"shard": 2, "strategy": "THOROUGH"}, failed)
    got = _metrics(statsd(), "airflow.atlas.sweep.")
    assert got == {"airflow.atlas.sweep.shard_runs,shard=2,strategy=THOROUGH,status=failed,error=StoreUnavailableError": (1, "c")}


def test_a_task_stopped_mid_run_has_sent_the_finished_pairs_metrics(embedded_store, statsd, monkeypatch):
    """Issue 32 item 10: the metrics of a pair are sent as soon as the pair is done, not at the end of the
    task. One sweep task for two pairs, the first idle, the second slow (all its writes in one shard, swept
    at 20 entries per second); the task's execution_timeout (``sweep_timeout_seconds``) stops it while the
    second pair is swept: the first pair's metrics have arrived, the second's not. (Sent at the end of the
    task, as before, nothing arrived.)"""
    from airflow_atlas.kvs.api import Cell
    from airflow_atlas.sweep.queue.shards import shard_for
    from tests.airflow.conftest import FAST, settle

    store, _ = embedded_store
    store.create_table("one_cell", "THOROUGH")
    cell = next(c for c in (Cell(f"row{i}".encode(), b"c") for i in range(100)) if shard_for("one_cell", c, 2) == 1)
    for i in range(300):  # 300 queue entries, all in shard 1: ~15 s at 20 entries per second
        txn = store.transactions.begin()
        txn.put("one_cell", {cell: str(i).encode()})
        txn.commit()
    settle(store)
    set_settings(monkeypatch, **{**FAST, "retries": 1}, in_task_group_size=2, sweep_timeout_seconds=5,
                 sweep_max_entries_per_second=20, sweep_latency_target=0)  # a fixed rate: slow whatever the app does
    run = load_dag("atlas_manual_sweep").test(run_conf={"shards": [0, 1], "strategy": "THOROUGH"})
    states = task_states(run)
    assert states[("sweep", 0)] == "failed", states  # stopped by its timeout in the second pair, both tries
    sent = _metrics(statsd(), "airflow.atlas.sweep.thorough.")
    assert sent["airflow.atlas.sweep.thorough.0.shard_runs.caught_up"] == (1, "c"), sent
    assert sent["airflow.atlas.sweep.thorough.0.backlog"] == (0, "g"), sent
    assert not [name for name in sent if name.startswith("airflow.atlas.sweep.thorough.1.")], sent
    assert store.queue.progress.get_progress(1, "THOROUGH") < store.sweep_timestamps.sweep_timestamp("THOROUGH") - 1
