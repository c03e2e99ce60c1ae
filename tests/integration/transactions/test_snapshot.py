"""Snapshot transactions on real stores: isolation, conflicts, rollback of dead writers, sentinels, leases,
the commit order towards the sweep queue, and input validation."""
from __future__ import annotations

import threading
import time
from itertools import pairwise

import pytest

from airflow_atlas.errors import (
    InvalidInputError,
    ReadOnlyNotAllowedError,
    SweptVersionReadError,
    TableNotFoundError,
    TransactionAbortedError,
    TransactionClosedError,
    TransactionConflictError,
    TransactionFailedRetriableError,
    TransactionLockExpiredError,
)
from airflow_atlas.kvs.api import MAX_TIMESTAMP, Cell
from airflow_atlas.kvs.tables import SweepStrategy, WriteMode
from airflow_atlas.sweep.queue.write_info import WriteInfo
from airflow_atlas.transactions.encoding import ABORTED
from tests.integration.transactions.conftest import FakeClock

C = Cell(b"row", b"col")
D = Cell(b"row", b"other")


def put_committed(manager, table, values):
    return manager.run(lambda txn: txn.put(table, values))


def read(manager, table, cells, read_only=False):
    txn = manager.begin(read_only=read_only)
    try:
        return txn.get(table, cells)
    finally:
        txn.abort()


# ----- snapshot reads ---------------------------------------------------------------------------------
def test_snapshot_does_not_see_later_commits(manager, make_table):
    table = make_table()
    put_committed(manager, table, {C: b"v1"})
    reader = manager.begin()
    ro_reader = manager.begin(read_only=True)
    writer = manager.begin()
    writer.put(table, {C: b"v2", D: b"new"})
    writer.commit()
    assert reader.get(table, [C, D]) == {C: b"v1"}
    assert ro_reader.get(table, [C, D]) == {C: b"v1"}
    assert read(manager, table, [C, D]) == {C: b"v2", D: b"new"}
    reader.commit()
    ro_reader.commit()


def test_uncommitted_and_aborted_writes_are_invisible(manager, make_table, kvs):
    table = make_table()
    put_committed(manager, table, {C: b"v1"})
    txn = manager.begin()
    txn.put(table, {C: b"mine"})
    assert txn.get(table, [C]) == {C: b"mine"}  # own writes
    assert read(manager, table, [C]) == {C: b"v1"}
    txn.abort()
    assert read(manager, table, [C]) == {C: b"v1"}
    # an explicitly aborted version in the store is skipped for the next older one
    aborted = manager.timestamps.fresh_timestamp()
    kvs.put(table, {C: b"aborted"}, aborted)
    manager.transaction_service.put_unless_exists(aborted, ABORTED)
    assert read(manager, table, [C]) == {C: b"v1"}


def test_deletes_and_row_reads(manager, make_table):
    table = make_table()
    put_committed(manager, table, {C: b"1", D: b"2", Cell(b"row2", b"x"): b"3"})
    txn = manager.begin()
    assert txn.get_row_columns(table, b"row") == {b"col": b"1", b"other": b"2"}
    txn.delete(table, [C])
    txn.put(table, {Cell(b"row", b"z"): b"4"})
    assert txn.get(table, [C, D]) == {D: b"2"}
    assert txn.get_row_columns(table, b"row") == {b"other": b"2", b"z": b"4"}
    txn.commit()
    assert read(manager, table, [C, D]) == {D: b"2"}
    assert manager.run(lambda t: t.get_row_columns(table, b"row")) == {b"other": b"2", b"z": b"4"}


# ----- write-write conflicts -----------------------------------------------------------------------
def test_lost_update_is_prevented(manager, make_table):
    table = make_table()
    put_committed(manager, table, {C: b"0"})
    first, second = manager.begin(), manager.begin()
    for txn in (first, second):
        value = int(txn.get(table, [C])[C])
        txn.put(table, {C: str(value + 1).encode()})
    assert first.commit() is not None
    with pytest.raises(TransactionConflictError):
        second.commit()
    assert second.state == "aborted"
    assert manager.transaction_service.get(second.start_timestamp) == ABORTED
    assert read(manager, table, [C]) == {C: b"1"}
    with pytest.raises(TransactionClosedError):
        second.get(table, [C])


def test_conflict_with_a_later_writer_that_committed_first(manager, make_table):
    table = make_table()
    older = manager.begin()
    younger = manager.begin()
    younger.put(table, {C: b"young"})
    younger.commit()
    older.put(table, {C: b"old"})
    with pytest.raises(TransactionConflictError):
        older.commit()
    assert read(manager, table, [C]) == {C: b"young"}


def test_disjoint_writes_do_not_conflict(manager, make_table):
    table = make_table()
    a, b = manager.begin(), manager.begin()
    a.put(table, {C: b"a"})
    b.put(table, {D: b"b"})
    assert a.commit() and b.commit()
    assert read(manager, table, [C, D]) == {C: b"a", D: b"b"}


def test_concurrent_writers_in_threads(manager, make_table):
    """Threads increment one cell. Committed transactions never overlap (at most one of every conflicting
    pair commits), and the final value counts exactly the commits."""
    table = make_table()
    put_committed(manager, table, {C: b"0"})
    committed: list[tuple[int, int]] = []
    conflicts = []
    lock = threading.Lock()

    def worker():
        for _ in range(6):
            txn = manager.begin()
            try:
                value = int(txn.get(table, [C])[C])
                txn.put(table, {C: str(value + 1).encode()})
                commit = txn.commit()
                with lock:
                    committed.append((txn.start_timestamp, commit))
            except (TransactionConflictError, TransactionFailedRetriableError, TransactionAbortedError) as exc:
                # a conflict, a writer still running, or rolled back by another writer's post-write check
                txn.abort()
                with lock:
                    conflicts.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert committed, "no transaction committed"
    final = int(read(manager, table, [C])[C])
    assert final == len(committed)
    spans = sorted(committed)
    for (s1, c1), (s2, c2) in pairwise(spans):
        assert c1 < s2, f"transactions {s1}->{c1} and {s2}->{c2} overlap and both committed"
    assert len(committed) + len(conflicts) == 24


def test_run_retries_conflicts(manager, make_table):
    table = make_table()
    put_committed(manager, table, {C: b"0"})

    def increment(txn):
        value = int(txn.get(table, [C])[C])
        txn.put(table, {C: str(value + 1).encode()})

    threads = [threading.Thread(target=lambda: [manager.run(increment, retries=50) for _ in range(5)]) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert read(manager, table, [C]) == {C: b"15"}


def test_post_write_check_rolls_back_a_pending_writer_that_appeared_meanwhile(make_manager, make_table, kvs):
    """A writer with a *larger* start timestamp whose version lands between our pre-check and our write is
    rolled back by our post-write check (it may already have passed its own)."""
    table = make_table()
    box = {}

    class InjectingHook:
        def enqueue(self, writes):
            late = box["manager"].timestamps.fresh_timestamp()
            box["manager"].registry.register(late, "other", 30)
            kvs.put(table, {C: b"late"}, late)
            box["late"] = late

    manager = make_manager(sweep_queue=InjectingHook())
    box["manager"] = manager
    txn = manager.begin()
    txn.put(table, {C: b"ours"})
    commit = txn.commit()
    assert commit is not None
    assert manager.transaction_service.get(box["late"]) == ABORTED
    assert read(manager, table, [C]) == {C: b"ours"}


def test_post_write_check_detects_a_commit_after_our_start(make_manager, make_table, kvs):
    table = make_table()
    box = {}

    class InjectingHook:
        def enqueue(self, writes):
            m = box["manager"]
            other = m.timestamps.fresh_timestamp()
            kvs.put(table, {C: b"other"}, other)
            m.transaction_service.put_unless_exists(other, m.timestamps.fresh_timestamp())

    manager = make_manager(sweep_queue=InjectingHook())
    box["manager"] = manager
    txn = manager.begin()
    txn.put(table, {C: b"ours"})
    with pytest.raises(TransactionConflictError):
        txn.commit()
    assert manager.transaction_service.get(txn.start_timestamp) == ABORTED
    assert read(manager, table, [C]) == {C: b"other"}


def test_pending_older_writer_is_rolled_back_at_commit(manager, make_table, kvs):
    table = make_table()
    pending = manager.timestamps.fresh_timestamp()
    manager.registry.register(pending, "slow", 30)
    kvs.put(table, {C: b"pending"}, pending)
    txn = manager.begin()
    txn.put(table, {C: b"ours"})
    assert txn.commit() is not None
    assert manager.transaction_service.get(pending) == ABORTED


def test_pending_younger_writer_is_a_conflict_before_writing(manager, make_table, kvs):
    table = make_table()
    txn = manager.begin()
    younger = manager.timestamps.fresh_timestamp()
    manager.registry.register(younger, "other", 30)
    kvs.put(table, {C: b"younger"}, younger)
    txn.put(table, {C: b"ours"})
    with pytest.raises(TransactionConflictError, match="started after us"):
        txn.commit()
    assert kvs.get_all_timestamps(table, [C])[C] == [younger]  # we wrote nothing


# ----- writers without a commit entry ---------------------------------------------------------------
def test_reader_rolls_back_a_dead_writer(manager, make_table, kvs):
    table = make_table()
    put_committed(manager, table, {C: b"v1"})
    dead = manager.timestamps.fresh_timestamp()
    kvs.put(table, {C: b"dead"}, dead)  # wrote, never registered or committed
    assert read(manager, table, [C], read_only=True) == {C: b"v1"}
    assert manager.transaction_service.get(dead) == ABORTED


def test_reader_rolls_back_a_writer_whose_registration_expired(manager, make_table, kvs):
    table = make_table()
    put_committed(manager, table, {C: b"v1"})
    stale = manager.timestamps.fresh_timestamp()
    manager.registry.register(stale, "gone", 0.05)
    kvs.put(table, {C: b"stale"}, stale)
    time.sleep(0.1)
    assert read(manager, table, [C]) == {C: b"v1"}
    assert manager.transaction_service.get(stale) == ABORTED


def test_reader_waits_for_a_running_writer_then_gives_up(make_manager, make_table, kvs):
    manager = make_manager(running_writer_wait_seconds=0.3)
    table = make_table()
    put_committed(manager, table, {C: b"v1"})
    running = manager.timestamps.fresh_timestamp()
    manager.registry.register(running, "busy", 30)
    kvs.put(table, {C: b"running"}, running)
    reader = manager.begin()
    began = time.monotonic()
    with pytest.raises(TransactionFailedRetriableError, match=str(running)):
        reader.get(table, [C])
    assert 0.25 < time.monotonic() - began < 5
    assert manager.transaction_service.get(running) is None  # a live writer is never rolled back


def test_reader_sees_a_running_writer_that_commits_while_it_waits(make_manager, make_table, kvs):
    manager = make_manager(running_writer_wait_seconds=5)
    table = make_table()
    running = manager.timestamps.fresh_timestamp()
    manager.registry.register(running, "busy", 30)
    kvs.put(table, {C: b"running"}, running)
    commit = manager.timestamps.fresh_timestamp()
    reader = manager.begin()  # starts after the commit timestamp was drawn: must see the write
    threading.Timer(0.2, manager.transaction_service.put_unless_exists, (running, commit)).start()
    assert reader.get(table, [C]) == {C: b"running"}


# ----- sentinels and strategies ---------------------------------------------------------------------
def test_read_only_transaction_that_needs_a_swept_version_fails(manager, make_table, kvs):
    table = make_table(SweepStrategy.CONSERVATIVE)
    t1 = manager.run(lambda txn: (txn.put(table, {C: b"v1"}), txn.start_timestamp)[1])
    old_reader = manager.begin(read_only=True)  # start between t1 and t2
    rw_reader = manager.begin()
    t2 = manager.run(lambda txn: (txn.put(table, {C: b"v2"}), txn.start_timestamp)[1])
    assert t1 < old_reader.start_timestamp < t2
    # what a CONSERVATIVE sweep does: sentinel, then delete every version below t2
    kvs.add_gc_sentinels(table, [C])
    kvs.delete_all_timestamps(table, {C: (0, t2 - 1)})
    with pytest.raises(SweptVersionReadError):
        old_reader.get(table, [C])
    # a read-write transaction treats the sentinel as absent; a new read-only one sees v2
    assert rw_reader.get(table, [C]) == {}
    assert read(manager, table, [C], read_only=True) == {C: b"v2"}


def test_read_only_refused_on_thorough_tables(manager, make_table):
    thorough = make_table(SweepStrategy.THOROUGH)
    put_committed(manager, thorough, {C: b"v"})
    ro = manager.begin(read_only=True)
    with pytest.raises(ReadOnlyNotAllowedError):
        ro.get(thorough, [C])
    assert read(manager, thorough, [C]) == {C: b"v"}  # read-write is fine


def test_read_write_on_thorough_checks_the_lease_at_read_time(make_manager, make_table):
    clock = FakeClock(time.time())
    manager = make_manager(clock=clock, lease_seconds=10)
    thorough, conservative = make_table(SweepStrategy.THOROUGH), make_table()
    txn = manager.begin()
    manager.registry.unregister(txn.start_timestamp)  # e.g. cleaned up after it expired
    assert txn.get(conservative, [C]) == {}
    with pytest.raises(TransactionLockExpiredError):
        txn.get(thorough, [C])
    assert txn.state == "aborted"


# ----- registration and leases ----------------------------------------------------------------------
def test_registration_lifecycle_and_punch(make_manager, make_table):
    manager = make_manager()
    table = make_table()
    ro = manager.begin(read_only=True)
    assert manager.registry.get(ro.start_timestamp) is None  # read-only: not registered
    assert manager.punch.latest_punch() is not None
    txn = manager.begin()
    assert manager.registry.is_live(txn.start_timestamp)
    assert manager.registry.immutable_timestamp(manager.timestamps.fresh_timestamp) <= txn.start_timestamp
    txn.put(table, {C: b"x"})
    commit = txn.commit()
    assert commit > txn.start_timestamp and txn.commit_timestamp == commit
    assert manager.transaction_service.get(txn.start_timestamp) == commit
    assert not manager.registry.is_live(txn.start_timestamp)
    aborted = manager.begin()
    aborted.abort()
    assert not manager.registry.is_live(aborted.start_timestamp)


def test_lease_is_refreshed_when_half_used(make_manager, make_table):
    clock = FakeClock(time.time())
    manager = make_manager(clock=clock, lease_seconds=10)
    table = make_table()
    txn = manager.begin()
    first = manager.registry.get(txn.start_timestamp).expires_at
    clock.now += 6
    txn.put(table, {C: b"x"})
    assert manager.registry.get(txn.start_timestamp).expires_at == pytest.approx(first + 6, abs=0.01)
    clock.now += 6
    assert txn.commit() is not None


def test_expired_registration_at_commit(make_manager, make_table):
    clock = FakeClock(time.time())
    manager = make_manager(clock=clock, lease_seconds=10)
    table = make_table()
    txn = manager.begin()
    txn.put(table, {C: b"x"})
    clock.now += 11
    with pytest.raises(TransactionLockExpiredError):
        txn.commit()
    assert txn.state == "aborted"
    assert read(manager, table, [C]) == {}


def test_registration_lost_before_writing_writes_nothing(make_manager, make_table, kvs):
    """(b'): a lease that ran out while enqueueing stops the transaction before any cell is written."""
    clock = FakeClock(time.time())

    class ExpiringHook:
        def enqueue(self, writes):
            clock.now += 11  # the lease runs out while the transaction commits

    manager = make_manager(clock=clock, lease_seconds=10, sweep_queue=ExpiringHook())
    table = make_table()
    txn = manager.begin()
    txn.put(table, {C: b"x"})
    with pytest.raises(TransactionLockExpiredError):
        txn.commit()
    assert manager.transaction_service.get(txn.start_timestamp) == ABORTED
    assert kvs.get_all_timestamps(table, [C]) == {}


def test_registration_lost_after_writing_aborts_the_writes(make_manager, make_table, kvs):
    """(f) runs after the cells are written and the commit timestamp is drawn: losing the lease there marks
    the transaction aborted, so its written cells stay invisible."""
    clock = FakeClock(time.time())
    manager = make_manager(clock=clock, lease_seconds=10)
    table = make_table()
    txn = manager.begin()
    txn.put(table, {C: b"x"})
    real = manager.timestamps.fresh_timestamp

    def slow_commit_timestamp():
        clock.now += 11
        return real()

    manager.timestamps.fresh_timestamp = slow_commit_timestamp
    with pytest.raises(TransactionLockExpiredError):
        txn.commit()
    del manager.timestamps.fresh_timestamp
    assert kvs.get_all_timestamps(table, [C])[C] == [txn.start_timestamp]  # written ...
    assert manager.transaction_service.get(txn.start_timestamp) == ABORTED  # ... but aborted
    assert read(manager, table, [C]) == {}


# ----- the sweep queue hook -------------------------------------------------------------------------
def test_sweep_queue_is_told_before_any_cell_is_written(make_manager, make_table, kvs):
    calls = []

    class CheckingHook:
        def __init__(self, name):
            self.name = name

        def enqueue(self, writes):
            for w in writes:
                versions = kvs.get_all_timestamps(w.table, [w.cell], MAX_TIMESTAMP).get(w.cell, [])
                assert w.start_ts not in versions, "a cell was written before the queue was told"
            calls.append((self.name, list(writes)))

    manager = make_manager(sweep_queue=CheckingHook("sweep"), scrub_queue=CheckingHook("scrub"))
    conservative, thorough, nothing = make_table(), make_table(SweepStrategy.THOROUGH), make_table(SweepStrategy.NOTHING)
    txn = manager.begin()
    txn.put(conservative, {C: b"x"})
    txn.delete(thorough, [D])
    txn.put(nothing, {C: b"never swept"})
    txn.commit()
    assert len(calls) == 1 and calls[0][0] == "sweep"
    assert sorted(calls[0][1]) == sorted(
        [WriteInfo(conservative, C, txn.start_timestamp, False), WriteInfo(thorough, D, txn.start_timestamp, True)]
    )
    # hard deletes also go to the scrub queue
    calls.clear()
    hard = manager.begin(hard_delete=True)
    hard.delete(conservative, [C])
    hard.commit()
    assert [name for name, _ in calls] == ["sweep", "scrub"]
    assert calls[1][1] == [WriteInfo(conservative, C, hard.start_timestamp, True)]
    # only NOTHING tables written: no call at all
    calls.clear()
    manager.run(lambda t: t.put(nothing, {D: b"y"}))
    assert calls == []


# ----- closed transactions and bad input ------------------------------------------------------------
def test_closed_transactions_refuse_work(manager, make_table):
    table = make_table()
    for finish in ("commit", "abort"):
        txn = manager.begin()
        txn.put(table, {C: b"x"})
        getattr(txn, finish)()
        with pytest.raises(TransactionClosedError):
            txn.get(table, [C])
        with pytest.raises(TransactionClosedError):
            txn.put(table, {C: b"y"})
        with pytest.raises(TransactionClosedError):
            txn.commit()
        txn.abort()  # idempotent
    ro = manager.begin(read_only=True)
    assert ro.commit() is None
    with pytest.raises(TransactionClosedError):
        ro.get(table, [C])


def test_bad_input(make_manager, make_table):
    manager = make_manager(max_value_bytes=1000)
    table = make_table()
    lwt = make_table(mode=WriteMode.LWT)
    txn = manager.begin()
    with pytest.raises(TableNotFoundError):
        txn.get("no_such_table", [C])
    with pytest.raises(TableNotFoundError):
        txn.put("no_such_table", {C: b"x"})
    with pytest.raises(InvalidInputError, match="1001 bytes.*1000 bytes"):
        txn.put(table, {C: b"x" * 1001})
    with pytest.raises(InvalidInputError, match="must be bytes, got str"):
        txn.put(table, {C: "text"})
    with pytest.raises(InvalidInputError, match="lwt"):
        txn.put(lwt, {C: b"x"})
    with pytest.raises(InvalidInputError):
        txn.put(table, {(b"", b"c"): b"x"})
    with pytest.raises(InvalidInputError):
        txn.get(table, C)
    with pytest.raises(InvalidInputError):
        txn.put("Bad Name", {C: b"x"})
    txn.put(table, {C: b"x" * 1000})
    assert txn.commit() is not None
    ro = manager.begin(read_only=True)
    with pytest.raises(InvalidInputError, match="read-only"):
        ro.put(table, {C: b"x"})
    with pytest.raises(InvalidInputError):
        manager.begin(hard_delete=True)  # no scrub queue configured


def test_run_propagates_other_errors_and_aborts(manager, make_table):
    table = make_table()
    seen = {}

    def boom(txn):
        seen["txn"] = txn
        txn.put(table, {C: b"x"})
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        manager.run(boom)
    assert seen["txn"].state == "aborted"
    assert not manager.registry.is_live(seen["txn"].start_timestamp)
    assert manager.run_read_only(lambda txn: txn.get(table, [C])) == {}


def test_begin_registers_before_drawing_the_start_timestamp(make_manager):
    """What a sweeper reads while the start timestamp is drawn already covers the transaction."""
    import uuid

    holder = f"spy-{uuid.uuid4().hex[:8]}"
    manager = make_manager(holder=holder)
    manager.begin().abort()  # leaves a spare timestamp: the next begin registers under it
    real = manager.timestamps.fresh_timestamps
    seen = []

    def spy(n):
        mine = [e for e in manager.registry.open_transactions() if e.holder == holder]
        block = real(n)
        seen.append((mine, block))
        return block

    manager.timestamps.fresh_timestamps = spy
    for _ in range(2):
        txn = manager.begin()
        mine, block = seen[-1]
        assert block[0] == txn.start_timestamp
        assert mine and min(e.start_ts for e in mine) < txn.start_timestamp
        assert [e.start_ts for e in manager.registry.open_transactions() if e.holder == holder] == [txn.start_timestamp]
        txn.abort()


def test_lease_must_exceed_the_clock_margin(make_manager):
    with pytest.raises(InvalidInputError, match="margin"):
        make_manager(lease_seconds=0.3, margin=0.2)
