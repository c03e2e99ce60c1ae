"""A transaction may run, and commit, for longer than its lease (issue 16, item 3): the manager's keeper
refreshes the registration while the transaction is open. Short leases, no timing assertions."""
from __future__ import annotations

import time

import pytest

from airflow_atlas.errors import TransactionLockExpiredError
from airflow_atlas.kvs.api import Cell
from tests.integration.transactions.conftest import FakeClock

LEASE = 2.0  # > 2 x the margin of 0.2 s; refreshed with 1.3 s to spare, so a loaded machine does not lose it


class SlowQueue:
    """A sweep-queue hook that takes ``seconds`` to enqueue: a commit that outlives its lease."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.enqueued = 0

    def enqueue(self, infos) -> None:
        time.sleep(self.seconds)
        self.enqueued += len(infos)


def test_a_commit_longer_than_the_lease_commits(make_manager, make_table):
    queue = SlowQueue(3 * LEASE)
    manager = make_manager(lease_seconds=LEASE, sweep_queue=queue)
    table = make_table()
    txn = manager.begin()
    txn.put(table, {Cell(b"r", b"c"): b"v"})
    commit = txn.commit()
    assert commit is not None and queue.enqueued == 1
    assert manager.transaction_service.get(txn.start_timestamp) == commit
    reader = manager.begin(read_only=True)
    assert reader.get(table, [Cell(b"r", b"c")]) == {Cell(b"r", b"c"): b"v"}


def test_an_open_transaction_idle_for_several_leases_stays_registered(make_manager, make_table):
    manager = make_manager(lease_seconds=LEASE)
    table = make_table()
    txn = manager.begin()
    time.sleep(3 * LEASE)
    entry = manager.registry.get(txn.start_timestamp)
    assert entry is not None and entry.live_at(time.time())
    txn.put(table, {Cell(b"r", b"c"): b"v"})
    assert txn.commit() is not None
    # closed: unregistered, and the keeper does not bring the registration back
    time.sleep(LEASE)
    assert manager.registry.get(txn.start_timestamp) is None
    assert manager._keeper.open_count == 0


def test_the_keeper_never_revives_an_expired_registration(make_manager, make_table):
    """A clock jump past the lease (the process was paused): the registry refuses the refresh, the
    transaction fails instead of committing after sweep may have passed it."""
    clock = FakeClock(time.time())
    manager = make_manager(lease_seconds=LEASE, clock=clock)
    table = make_table()
    txn = manager.begin()
    txn.put(table, {Cell(b"r", b"c"): b"v"})
    clock.now += 10 * LEASE
    time.sleep(LEASE / 2)  # a few keeper ticks
    with pytest.raises(TransactionLockExpiredError):
        txn.commit()
    assert manager.transaction_service.get(txn.start_timestamp) in (None, -1)


def test_a_dropped_transaction_is_no_longer_kept(make_manager):
    import gc

    manager = make_manager(lease_seconds=LEASE)
    txn = manager.begin()
    start = txn.start_timestamp
    del txn
    gc.collect()
    time.sleep(LEASE / 2)
    assert manager._keeper.open_count == 0
    assert manager.registry.get(start) is not None  # expires on its own after the lease


@pytest.mark.parametrize("write_takes, lost", [(2.0, False), (4.5, True)])
def test_a_slow_refresh_counts_unless_it_ended_near_the_old_expiry(kvs, write_takes, lost):
    """Lease 10 s, margin 1 s, refreshed 5 s in: a 2 s write ends 3 s before the old expiry (fine, though
    slower than the margin); a 4.5 s write ends within the margin of it (lost: a sweeper may have passed)."""
    import uuid

    from airflow_atlas.errors import LockNotHeldError
    from airflow_atlas.transactions.registry import OpenTransactionRegistry

    clock = FakeClock(1000.0)  # write_takes seconds pass during each registry write (this kvs object's put wrapped)
    registry = OpenTransactionRegistry(kvs, clock, margin_seconds=1.0, table=f"_open_{uuid.uuid4().hex[:12]}")
    registry.ensure_tables()
    registry.register(77, "w", 10)
    clock.now += 5
    original = kvs.put_wallclock

    def slow_put(*args, **kwargs):
        original(*args, **kwargs)
        clock.now += write_takes

    kvs.put_wallclock = slow_put
    try:
        if lost:
            with pytest.raises(LockNotHeldError, match="margin"):
                registry.refresh(77, 10)
        else:
            assert registry.refresh(77, 10).expires_at == 1015.0
    finally:
        del kvs.put_wallclock
