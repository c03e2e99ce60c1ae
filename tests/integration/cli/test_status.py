"""``airflow_atlas.status.compute_status`` on a real (embedded) store: figures, why the sweep timestamp is
not advancing, and the drain forecast."""
from __future__ import annotations

import json

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.encoding import LONG_MAX
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.status import compute_status
from airflow_atlas.store import AtlasStore
from airflow_atlas.workload import WorkloadSpec, run_workload

from .helpers import queued_entries


@pytest.fixture
def store(tmp_path):
    with AtlasStore.open(f"sqlite:///{tmp_path / 'status.db'}", StoreConfig(unreadable_window_seconds=0)) as s:
        s.initialize(shards=2)
        yield s


def _spec(n: int, seed: int, **kw) -> WorkloadSpec:
    return WorkloadSpec(transactions=n, seed=seed, tables={"t": "THOROUGH", "c": "CONSERVATIVE"}, **kw)


def _row(status: dict, shard: int, strategy: str) -> dict:
    return next(r for r in status["shards"] if r["shard"] == shard and r["strategy"] == strategy)


def test_why_not_advancing_names_the_open_transaction_and_what_it_pins(store):
    run_workload(store, _spec(30, 1))
    txn = store.transactions.begin()
    run_workload(store, _spec(40, 2))
    status = compute_status(store)
    json.dumps(status, allow_nan=False)  # JSON-able, no NaN/inf

    why = status["why_not_advancing"]["THOROUGH"]
    start = txn.start_timestamp
    assert why["limited_by"] == "open_transaction"
    assert why["sweep_ts"] == start == status["sweep_timestamps"]["THOROUGH"]
    assert why["held_by"]["kind"] == "open_transaction" and why["held_by"]["start_ts"] == start
    assert why["held_by"]["holder"] == store.transactions.holder
    assert 0 <= why["held_by"]["age_seconds"] < 60 and why["held_by"]["expires_in_seconds"] > 0
    assert f"open transaction {start}" in why["message"]
    expected = {shard: queued_entries(store, shard, "THOROUGH", start - 1) for shard in (0, 1)}
    assert {p["shard"]: p["entries"] for p in why["pinned_by_shard"]} == expected
    assert why["pinned_entries"] == sum(expected.values()) > 0
    for shard in (0, 1):
        row = _row(status, shard, "THOROUGH")
        assert row["pinned_entries"] == expected[shard]
        assert row["sweepable_entries"] == queued_entries(store, shard, "THOROUGH", -1, start)
        assert row["backlog_entries"] == queued_entries(store, shard, "THOROUGH")

    # Sweeping cannot pass it: everything below it goes, the pinned entries stay.
    for shard in (0, 1):
        store.sweeper.sweep_shard(shard, "THOROUGH")
    swept = compute_status(store, strategies=["THOROUGH"])
    assert all(r["sweepable_entries"] == 0 and r["progress"] == start - 1 for r in swept["shards"])
    assert swept["why_not_advancing"]["THOROUGH"]["pinned_entries"] == sum(expected.values())

    txn.abort()
    released = compute_status(store, strategies=["THOROUGH"])
    why = released["why_not_advancing"]["THOROUGH"]
    assert why["limited_by"] == "none" and why["held_by"] is None and why["pinned_entries"] == 0
    assert why["oldest_open_transaction"] is None


def test_forecast_warns_when_ingest_outpaces_sweep(store):
    run_workload(store, _spec(60, 3))
    store.sweeper.sweep_shard(0, "THOROUGH", batch_limit=5, max_iterations=1)
    run_workload(store, _spec(200, 4))  # far more arrives than the starved sweeper takes
    store.sweeper.sweep_shard(0, "THOROUGH", batch_limit=5, max_iterations=1)
    status = compute_status(store, shards=[0], strategies=["THOROUGH"])
    row = status["shards"][0]
    f = row["forecast"]
    assert f["basis"] == "runs" and f["runs_in_window"] == 1
    # ingest between the two runs: the writes with start timestamps between their sweep timestamps
    first, second = reversed(store.history.recent(0, "THOROUGH"))
    assert f["ingest_entries"] == queued_entries(store, 0, "THOROUGH", first["sweep_ts"], second["sweep_ts"] + 1)
    assert f["ingest_entries"] > 10 * f["swept_entries"] > 0
    assert f["ingest_outpaces_sweep"] is True and f["state"] == "growing"
    assert f["time_to_drain_seconds"] is None and f["net_drain_rate_per_second"] < 0
    assert f["ingest_rate_per_second"] > f["sweep_rate_per_second"] > 0
    assert any(w["kind"] == "ingest_outpaces_sweep" for w in row["warnings"])
    assert [(w["shard"], w["strategy"], w["kind"]) for w in status["warnings"]] == [(0, "THOROUGH", "ingest_outpaces_sweep")]
    assert [p["progress"] for p in row["lag_series"]] == [r["new_progress"] for r in reversed(store.history.recent(0, "THOROUGH"))]
    assert row["last_run"]["entries_read"] == f["swept_entries"]

    # A sweeper that keeps up drains it; no warning once the backlog is gone.
    store.sweeper.sweep_shard(0, "THOROUGH")
    drained = compute_status(store, shards=[0], strategies=["THOROUGH"])["shards"][0]
    assert drained["backlog_entries"] == 0 and drained["forecast"]["state"] == "drained"
    assert drained["forecast"]["ingest_outpaces_sweep"] is False and drained["warnings"] == []
    assert drained["tombstones_written"] == sum(r["cells_tombstoned"] for r in store.history.recent(0, "THOROUGH"))


def test_backlog_cap_and_dedicated_rows(store):
    # 300 writes in one transaction and one table: dedicated rows behind one reference cell.
    run_workload(store, WorkloadSpec(transactions=3, seed=5, writes_per_transaction=(300, 300), rows=2000,
                                     tables={"big": "THOROUGH"}, dead_writer_ratio=0, abort_ratio=0))
    full = compute_status(store, strategies=["THOROUGH"])
    for row in full["shards"]:
        assert row["backlog_entries"] == queued_entries(store, row["shard"], "THOROUGH") > 100
        assert row["backlog_capped"] is False
    capped = compute_status(store, strategies=["THOROUGH"], backlog_cap=100)
    for row in capped["shards"]:
        assert row["sweepable_entries"] == 100 and row["sweepable_capped"] and row["backlog_capped"]
    assert capped["totals"]["THOROUGH"]["capped"] is True


def test_reader_counting_helpers(store):
    run_workload(store, WorkloadSpec(transactions=4, seed=6, writes_per_transaction=(120, 120), rows=2000,
                                     tables={"big": "THOROUGH"}, dead_writer_ratio=0, abort_ratio=0))
    reader = store.queue.reader
    for shard in (0, 1):
        total = queued_entries(store, shard, "THOROUGH")
        assert reader.count_entries(shard, "THOROUGH", -1) == total
        assert reader.count_entries(shard, "THOROUGH", -1, LONG_MAX, cap=7) == 7
        assert reader.next_fine_partition(shard, "THOROUGH", -1, LONG_MAX) == 0
        fresh = store.timestamps.fresh_timestamp()
        assert reader.count_entries(shard, "THOROUGH", fresh) == 0
        assert reader.next_fine_partition(shard, "THOROUGH", fresh, LONG_MAX) is None
        assert reader.count_entries(shard, "CONSERVATIVE", -1) == 0
    with pytest.raises(InvalidInputError):
        reader.count_entries(0, "THOROUGH", -1, cap=0)
    with pytest.raises(InvalidInputError):
        reader.count_entries(0, "NOTHING", -1)


def test_bad_selection_is_refused(store):
    with pytest.raises(InvalidInputError, match="shard 5 is out of range"):
        compute_status(store, shards=[5])
    with pytest.raises(InvalidInputError, match="NOTHING"):
        compute_status(store, strategies=["NOTHING"])


def test_embedded_store_has_no_grace_period(tmp_path):
    from airflow_atlas.store import AtlasStore as _Store

    with _Store.open(f"sqlite:///{tmp_path / 'g.db'}") as store:
        store.initialize()
        store.create_table("t", "THOROUGH")
        store.create_table("n", "NOTHING")
        document = compute_status(store)
    assert [(g["table"], g["gc_grace_seconds"], g["below_repair_interval"]) for g in document["gc_grace"]] == [
        ("t", None, False)
    ]
    assert document["table_warnings"] == []


def test_the_last_run_shows_its_pace_and_why(store):
    """The application pace's state and reason reach the status document and its text form (the default: the
    workload's store publishes, so a run right after it sees the application running); a fixed rate says so."""
    from airflow_atlas.cli.status import render_status

    run_workload(store, _spec(40, 3))
    store.sweeper.sweep_shard(0, "THOROUGH", batch_limit=4, max_entries_per_second=10_000)
    store.sweeper.sweep_shard(1, "THOROUGH", batch_limit=4, max_entries_per_second=10_000, latency_target=0)
    status = compute_status(store, strategies=["THOROUGH"])
    assert status["settings"]["sweep_latency_target"] == store.config.sweep_latency_target == 1.2
    assert status["settings"]["sweep_max_entries_per_second"] == store.config.sweep_max_entries_per_second == 250
    steered, fixed = _row(status, 0, "THOROUGH")["last_run"], _row(status, 1, "THOROUGH")["last_run"]
    assert steered["pace_reason"].split(":")[0] in ("running", "resting", "unseen"), steered
    assert steered["pace_entries_per_second"] in (0.0, 10_000.0), steered
    assert fixed == {**fixed, "pace_entries_per_second": 10_000.0, "pace_reason": "fixed rate (sweep_latency_target 0)"}
    text = render_status(status)
    assert steered["pace_reason"] in text


def test_status_falls_back_to_non_serial_reads_when_paxos_fails(store):
    """Issue 32 item 4: a read-only status must not fail on a Paxos timeout. Every serial read and
    check-and-set of the store raises the engine's error for "CAS operation result is unknown" (a wrapper
    around the real store's key-value service); the status is read again without Paxos and says so."""
    from airflow_atlas.cli.status import render_status
    from tests.faults import CAS_UNKNOWN, PaxosUnknownKvs

    run_workload(store, _spec(20, 1))
    for shard in (0, 1):
        store.sweeper.sweep_shard(shard, "THOROUGH")
    serial = compute_status(store)
    paxos_fails = PaxosUnknownKvs(store.kvs)
    status = compute_status(AtlasStore(paxos_fails, store.config))  # raised StoreUnavailableError before
    assert serial["reads"] == {"serial": True, "fallback": None, "reason": None}
    json.dumps(status, allow_nan=False)
    assert paxos_fails.serial_reads_refused >= 1
    reads = status["reads"]
    assert reads["serial"] is False and "without Paxos" in reads["fallback"] and CAS_UNKNOWN in reads["reason"]
    assert status["number_of_shards"] == serial["number_of_shards"] == 2
    assert status["timestamps"]["fresh_ts"] >= serial["timestamps"]["fresh_ts"]  # issued up to there, read plainly
    for shard in (0, 1):
        for strategy in ("THOROUGH", "CONSERVATIVE"):
            assert _row(status, shard, strategy)["progress"] == _row(serial, shard, strategy)["progress"]
    text = render_status(status)
    assert "NON-SERIAL FALLBACK" in text.splitlines()[1] and CAS_UNKNOWN in text
    assert "NON-SERIAL" not in render_status(serial)
