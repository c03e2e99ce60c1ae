"""Fault: two sweepers on one shard - the first one's lease expires while it is still running.

Sweeper A (its own thread, the engine's TargetedSweeper over the store's own components, some of them
wrapped to stall) takes the shard, reads its batch, and stalls at a chosen step - like a process in a long
GC pause or cut off from the store: its lease keeper cannot refresh either, so the lease expires. Sweeper
B (the plain engine, another holder) then takes the shard over with a larger fencing token; new
transactions commit; B sweeps everything to a higher progress. Then A wakes up and finishes its iteration
with its stale view. The interleaving is forced with events, not with sleeps.

* A stalled before its fencing check (reading, commit lookup, ranged delete, sentinels): A's remaining
  deletes are harmless (ranged tombstones below an older sweep timestamp, fresh write times), and the
  fencing check stops it with LockNotHeldError before queue cleanup and progress.
* A stalled after passing the check (queue cleanup, progress check-and-set): A cleans only rows below its
  own (lower) progress - already swept - and its check-and-set cannot lower B's progress: the persisted
  progress stays B's, and A reports the persisted value.

Either way: the oracle holds (an open transaction begun after B's sweep and fresh readers read the same
before and after A wakes up), entries queued after B's sweep are still in the queue, progress never went
backwards, and after a final sweep nothing obsolete, queued below the sweep timestamp or leaked remains,
and every committed write is where the model says.
"""
from __future__ import annotations

import dataclasses
import threading

import pytest

from airflow_atlas.errors import LockNotHeldError
from airflow_atlas.oracle import Reader, compare, observe, obsolete_versions
from airflow_atlas.sweep.queue.constants import FINE_PARTITION
from airflow_atlas.sweep.targeted import TargetedSweeper
from airflow_atlas.workload import stage_writes

from .helpers import (
    CONFIG,
    Model,
    backlog_below,
    cell,
    leaked_queue_rows,
    model_mismatches,
    sweep_all,
    wait_until,
)

pytestmark = pytest.mark.cassandra

LEASE = 2.0
BEFORE_CHECK = ("read_batch", "commit_lookup", "ranged_delete", "sentinels")
AFTER_CHECK = ("cleanup", "progress")


class Proxy:
    """Delegates to ``inner`` except for the attributes given."""

    def __init__(self, inner, **overrides):
        self.__dict__["_inner"] = inner
        self.__dict__.update(overrides)

    def __getattr__(self, name):
        return getattr(self.__dict__["_inner"], name)


class Stall:
    """The first time A reaches the point, it announces it and waits to be woken up."""

    def __init__(self):
        self.reached = threading.Event()
        self.wake = threading.Event()
        self._armed = True

    def here(self):
        if self._armed:
            self._armed = False
            self.reached.set()
            assert self.wake.wait(300), "never woken up"

    def stalled(self):  # the whole process is stalled: the lease keeper cannot refresh either
        if self.reached.is_set():
            assert self.wake.wait(300)


def _stalling_sweeper(store, point: str, stall: Stall) -> TargetedSweeper:
    kvs, queue, locks = store.kvs, store.queue, store.locks

    def before(fn):
        def wrapped(*args, **kwargs):
            stall.here()
            return fn(*args, **kwargs)

        return wrapped

    def after(fn):
        def wrapped(*args, **kwargs):
            out = fn(*args, **kwargs)
            stall.here()
            return out

        return wrapped

    def refresh(lease, seconds):
        stall.stalled()
        return locks.refresh(lease, seconds)

    kvs_over, reader, cleaner, progress, service = {}, queue.reader, queue.cleaner, queue.progress, store.transaction_service
    if point == "read_batch":
        reader = Proxy(reader, read_batch=after(reader.read_batch))
    elif point == "commit_lookup":
        service = Proxy(service, get_many=after(service.get_many))
    elif point == "ranged_delete":  # THOROUGH: plain ranged deletes; CONSERVATIVE: with the sentinels
        kvs_over["delete_all_timestamps"] = before(kvs.delete_all_timestamps)
        kvs_over["add_gc_sentinels_and_delete_all_timestamps"] = before(kvs.add_gc_sentinels_and_delete_all_timestamps)
    elif point == "sentinels":
        kvs_over["add_gc_sentinels_and_delete_all_timestamps"] = before(kvs.add_gc_sentinels_and_delete_all_timestamps)
    elif point == "cleanup":
        cleaner = Proxy(cleaner, clean=before(cleaner.clean))
    elif point == "progress":
        progress = Proxy(progress, update_progress=before(progress.update_progress))
    else:  # pragma: no cover
        raise ValueError(point)
    view = Proxy(
        store,
        kvs=Proxy(kvs, **kvs_over),
        queue=Proxy(queue, reader=reader, cleaner=cleaner, progress=progress),
        locks=Proxy(locks, refresh=refresh),
        transaction_service=service,
        config=dataclasses.replace(store.config, lock_lease_seconds=LEASE),
    )
    return TargetedSweeper(view)


def _commit(store, model, table, values) -> None:
    txn = store.transactions.begin()
    stage_writes(txn, {table: values})
    commit = txn.commit()
    model.record(txn.start_timestamp, commit, {table: values})


def _interleave(store, strategy: str, point: str, round_: int = 0):
    from airflow_atlas.workload import dead_writer

    table = f"fence_{strategy[0].lower()}_{point}_{round_}"
    store.create_table(table, strategy)
    model = Model()
    cells = [cell(i) for i in range(8)]
    for v in range(3):  # several versions per cell in one fine partition, a delete, a dead writer
        _commit(store, model, table, {c: b"" if (v == 2 and i == 0) else b"%d-%d" % (v, i) for i, c in enumerate(cells)})
    dead_writer(store, {table: {cells[1]: b"dead"}})
    store.timestamps.fresh_timestamps(FINE_PARTITION)  # the next writes land in the next fine partition
    for v in range(3, 5):
        _commit(store, model, table, {c: b"%d-%d" % (v, i) for i, c in enumerate(cells[:5])})
    name = TargetedSweeper.lock_name(0, strategy)
    start_progress = store.queue.progress.get_progress(0, strategy)

    stall = Stall()
    a = _stalling_sweeper(store, point, stall)
    outcome: dict = {}

    def run_a():
        try:
            outcome["result"] = a.run_iteration(0, strategy, holder="sweeper-a")
        except BaseException as exc:  # reported to the test thread
            outcome["error"] = exc

    thread = threading.Thread(target=run_a, name="sweeper-a", daemon=True)
    thread.start()
    try:
        assert stall.reached.wait(120), f"sweeper A never reached {point}: {outcome}"
        a_token = store.locks.describe(name).token
        wait_until(lambda: store.locks.describe(name).expired, 60, "A's lease to expire")

        # B takes over: new commits first (beyond A's sweep timestamp), then a full sweep of the shard.
        for v in range(5, 7):
            _commit(store, model, table, {c: b"%d-%d" % (v, i) for i, c in enumerate(cells[2:6])})
        b_result = store.sweeper.sweep_shard(0, strategy, holder="sweeper-b")
        assert b_result.status == "caught_up", b_result
        assert store.locks.describe(name).token > a_token
        progress_b = store.queue.progress.get_progress(0, strategy)
        assert progress_b == b_result.new_progress > start_progress

        # Readers of the state B left, and work queued after B's sweep that A must not touch.
        _commit(store, model, table, {cells[6]: b"after-b", cells[7]: b""})
        pinned = store.transactions.begin()
        fresh = store.timestamps.fresh_timestamp()
        readers = [Reader(pinned.start_timestamp), Reader(fresh), Reader(fresh, read_only=True)]
        before = observe(store, readers, [table])
        queued_after_b = store.queue.reader.count_entries(0, strategy, progress_b)
        assert queued_after_b >= 2
    finally:
        stall.wake.set()
        thread.join(120)
    assert not thread.is_alive()

    if point in BEFORE_CHECK:
        assert isinstance(outcome.get("error"), LockNotHeldError), outcome
    else:
        assert "error" not in outcome, outcome
        assert outcome["result"].new_progress == progress_b, "A reports the persisted progress, not its own"
    assert store.queue.progress.get_progress(0, strategy) == progress_b, "A's late write lowered progress"
    assert store.queue.reader.count_entries(0, strategy, progress_b) == queued_after_b, "A removed queued work"
    after = observe(store, readers, [table])
    assert compare(before, after, {strategy: fresh}) == []
    pinned.abort()

    ts, _ = sweep_all(store)
    assert obsolete_versions(store, ts, [table]) == []
    assert backlog_below(store, ts) == {}
    assert leaked_queue_rows(store) == []
    assert model_mismatches(store, model, store.timestamps.fresh_timestamp(), [table]) == []
    return outcome


@pytest.mark.parametrize("point", ["ranged_delete", "cleanup"])
def test_expired_sweeper_wakes_up_after_takeover_short(shared_stores, point):
    store, _ = shared_stores(config=dataclasses.replace(CONFIG, lock_lease_seconds=LEASE))
    _interleave(store, "THOROUGH", point)


@pytest.mark.reliability
def test_expired_sweeper_wakes_up_after_takeover_every_step(shared_stores):
    store, _ = shared_stores(config=dataclasses.replace(CONFIG, lock_lease_seconds=LEASE))
    for strategy in ("CONSERVATIVE", "THOROUGH"):
        for point in (*BEFORE_CHECK, *AFTER_CHECK):
            if point == "sentinels" and strategy == "THOROUGH":
                continue  # THOROUGH writes no sentinels
            for round_ in range(2):
                _interleave(store, strategy, point, round_)
