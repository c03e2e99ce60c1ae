"""Triggers: serialize() round trips to an importable class with small kwargs; run() against a real
embedded store yields exactly one event, success or error, and never blocks the event loop."""
from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from airflow_atlas.airflow.triggers.atlas import LockFreeTrigger, SweepableWorkTrigger, SweepTimestampTrigger
from tests.airflow.conftest import import_string

CONN = "atlas_trigger_test"


def roundtrip(trigger):
    classpath, kwargs = trigger.serialize()
    assert len(json.dumps(kwargs)) < 400  # small: stored in the metadata DB per deferred task
    clone = import_string(classpath)(**kwargs)
    assert type(clone) is type(trigger) and clone.serialize() == (classpath, kwargs)
    return clone


def test_serialize_round_trips():
    common = {"store_conn_id": CONN, "poll_interval": 0.5, "store_config": {"unreadable_window_seconds": 1.0}}
    work = roundtrip(SweepableWorkTrigger(shard=3, strategy="thorough", **common))
    assert work.shard == 3 and work.strategy == "THOROUGH" and work.store_config == {"unreadable_window_seconds": 1.0}
    ts = roundtrip(SweepTimestampTrigger(target_ts=1234, strategy=None, **common))
    assert ts.target_ts == 1234 and ts.strategy is None
    lock = roundtrip(LockFreeTrigger(lock="sweep/thorough/3", **common))
    assert lock.lock == "sweep/thorough/3" and lock.poll_interval == 0.5


def events(trigger, timeout=60.0) -> list:
    async def collect():
        out = []
        async for event in trigger.run():
            out.append(event.payload)
        return out

    return asyncio.run(asyncio.wait_for(collect(), timeout))


@pytest.fixture
def store(monkeypatch, tmp_path):
    from airflow_atlas.airflow.hooks.atlas import AtlasHook
    from airflow_atlas.config import StoreConfig

    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN.upper()}", json.dumps({"conn_type": "atlas_embedded", "host": str(tmp_path / "t.db")}))
    with AtlasHook(CONN, config=StoreConfig(unreadable_window_seconds=1.0)) as hook:
        store = hook.get_store()
        store.initialize(shards=2)
        store.create_table("events", "THOROUGH")
        yield store


def commit_rows(store, n=5) -> int:
    from airflow_atlas.kvs.api import Cell

    txn = store.transactions.begin()
    txn.put("events", {Cell(f"r{i}".encode(), b"c"): b"v" for i in range(n)})
    return txn.commit()


def test_sweep_timestamp_trigger_waits_for_an_open_transaction(store):
    blocker = store.transactions.begin()  # holds the immutable timestamp at its start, below the commit
    commit = commit_rows(store)
    trigger = SweepTimestampTrigger(target_ts=commit, strategy="THOROUGH", store_conn_id=CONN, poll_interval=0.2)

    def finish_later():
        time.sleep(1.0)
        blocker.abort()

    threading.Thread(target=finish_later).start()
    started = time.monotonic()
    (event,) = events(trigger)
    assert time.monotonic() - started >= 0.9  # it really waited for the transaction
    assert event["status"] == "success" and event["sweep_timestamps"]["THOROUGH"] > commit


def test_sweepable_work_trigger_fires_when_the_queue_has_work(store):
    from airflow_atlas.kvs.api import Cell
    from airflow_atlas.sweep.queue.shards import shard_for

    commit_rows(store)
    shard = shard_for("events", Cell(b"r0", b"c"), 2)
    (event,) = events(SweepableWorkTrigger(shard=shard, strategy="THOROUGH", store_conn_id=CONN, poll_interval=0.2))
    assert event["status"] == "success" and event["shard"] == shard and event["sweep_ts"] > 0


def test_lock_free_trigger_fires_when_the_lease_expires(store):
    lease = store.locks.acquire("sweep/thorough/0", "someone", 1.0)
    assert lease is not None
    started = time.monotonic()
    (event,) = events(LockFreeTrigger(lock="sweep/thorough/0", store_conn_id=CONN, poll_interval=0.2))
    assert event == {"status": "success", "lock": "sweep/thorough/0", "last_holder": "someone", "token": lease.token}
    assert time.monotonic() - started >= 0.5


def test_bad_input_is_an_error_event_at_once(store):
    (event,) = events(SweepableWorkTrigger(shard=7, strategy="THOROUGH", store_conn_id=CONN, poll_interval=5))
    assert event["status"] == "error" and "shard 7 is out of range" in event["message"]


def test_an_unreachable_store_is_an_error_after_a_few_attempts(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_CONN_ATLAS_TRIGGER_DOWN", json.dumps({"conn_type": "cassandra", "host": "127.0.0.1", "port": 1, "schema": "ks"}))
    trigger = SweepTimestampTrigger(target_ts=1, store_conn_id="atlas_trigger_down", poll_interval=0.1, max_consecutive_errors=2)
    (event,) = events(trigger)
    assert event["status"] == "error" and "2 consecutive store errors" in event["message"]


def test_run_keeps_the_event_loop_free(store):
    """The engine's blocking calls run in threads: a heartbeat on the loop keeps ticking while polling."""
    blocker = store.transactions.begin()
    trigger = SweepTimestampTrigger(target_ts=blocker.start_timestamp, store_conn_id=CONN, poll_interval=0.05)
    ticks = 0

    async def main():
        nonlocal ticks
        task = asyncio.ensure_future(trigger.run().__anext__())
        for _ in range(20):
            await asyncio.sleep(0.02)
            ticks += 1
        assert not task.done()  # still waiting: the transaction is open
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, StopAsyncIteration):
            pass

    asyncio.run(main())
    assert ticks == 20
    blocker.abort()
