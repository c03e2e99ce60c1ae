"""LockService on real stores: contention, expiry, takeover, fencing tokens, release by the holder only."""
from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from airflow_atlas.errors import InvalidInputError, LockNotHeldError
from airflow_atlas.locks import Lease, LockService


@pytest.fixture
def locks(kvs, clock):
    service = LockService(kvs, clock=clock)
    service.ensure_tables()
    return service


@pytest.fixture
def name():
    return f"test/{uuid.uuid4().hex[:12]}"


def test_acquire_contend_release(locks, name):
    assert locks.describe(name) is None
    lease = locks.acquire(name, "alice", 10)
    assert isinstance(lease, Lease) and lease.holder == "alice" and lease.token == 1
    assert locks.acquire(name, "bob", 10) is None
    state = locks.describe(name)
    assert (state.holder, state.token, state.expired, state.held) == ("alice", 1, False, True)
    locks.check(lease)
    assert locks.release(lease) is True
    assert locks.release(lease) is False  # already released
    state = locks.describe(name)
    assert state.holder is None and state.expired and state.token == 1  # the token survives release
    with pytest.raises(LockNotHeldError):
        locks.check(lease)
    bob = locks.acquire(name, "bob", 10)
    assert bob is not None and bob.token == 2


def test_expired_lease_is_taken_over_with_a_larger_token(locks, name, clock):
    alice = locks.acquire(name, "alice", 5)
    clock.now += 4.9
    assert locks.acquire(name, "bob", 5) is None
    clock.now += 0.2
    assert locks.describe(name).expired
    with pytest.raises(LockNotHeldError, match="expired"):
        locks.check(alice)
    bob = locks.acquire(name, "bob", 5)
    assert bob.token > alice.token
    # the old holder can neither refresh, check nor release any more
    with pytest.raises(LockNotHeldError, match="bob"):
        locks.refresh(alice, 5)
    with pytest.raises(LockNotHeldError):
        locks.check(alice)
    assert locks.release(alice) is False
    assert locks.describe(name).holder == "bob"


def test_reacquire_by_holder_refreshes_with_new_token(locks, name, clock):
    first = locks.acquire(name, "alice", 5)
    clock.now += 3
    second = locks.acquire(name, "alice", 5)
    assert second.token == first.token + 1
    assert second.expires_at == pytest.approx(clock.now + 5)
    with pytest.raises(LockNotHeldError):
        locks.check(first)  # the superseded lease is fenced off
    locks.check(second)


def test_refresh_extends_and_expired_lease_is_not_revived(locks, name, clock):
    lease = locks.acquire(name, "alice", 5)
    clock.now += 4
    lease = locks.refresh(lease, 5)
    assert lease.expires_at == pytest.approx(clock.now + 5)
    clock.now += 4
    locks.check(lease)  # still valid thanks to the refresh
    clock.now += 2
    with pytest.raises(LockNotHeldError, match="expired"):
        locks.refresh(lease, 5)


def test_release_held_by_releases_only_that_holders_lock_whatever_its_token(locks, name, clock):
    assert locks.release_held_by(name, "alice") is False  # never taken
    first = locks.acquire(name, "alice", 10)
    again = locks.acquire(name, "alice", 10)  # a retried task of the same holder: a new token
    assert again.token != first.token
    assert locks.release_held_by(name, "bob") is False and locks.describe(name).holder == "alice"
    assert locks.release_held_by(name, "alice") is True
    assert not locks.describe(name).held
    assert locks.release_held_by(name, "alice") is False  # idempotent
    locks.acquire(name, "bob", 10)
    assert locks.release_held_by(name, "alice") is False and locks.describe(name).holder == "bob"


def test_fencing_tokens_strictly_increase(locks, name, clock):
    tokens = []
    for i in range(6):
        lease = locks.acquire(name, f"h{i % 2}", 1)
        assert lease is not None
        tokens.append(lease.token)
        if i % 3 == 0:
            locks.release(lease)
        else:
            clock.now += 2  # let it expire: the next acquisition is a takeover
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)


def test_concurrent_acquire_has_one_winner(kvs, name):
    locks = LockService(kvs)
    locks.ensure_tables()
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: locks.acquire(name, f"worker-{i}", 30), range(8)))
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert locks.describe(name).holder == winners[0].holder


def test_list_locks_by_prefix(locks, clock):
    prefix = f"list/{uuid.uuid4().hex[:8]}/"
    a = locks.acquire(prefix + "a", "x", 5)
    locks.acquire(prefix + "b", "y", 50)
    locks.acquire(f"other/{uuid.uuid4().hex[:8]}", "z", 5)
    locks.release(a)
    clock.now += 10
    listed = locks.list_locks(prefix)
    assert [s.name for s in listed] == [prefix + "a", prefix + "b"]
    assert [s.holder for s in listed] == [None, "y"]
    assert [s.expired for s in listed] == [True, False]


def test_bad_input(locks):
    with pytest.raises(InvalidInputError):
        locks.acquire("", "x", 5)
    with pytest.raises(InvalidInputError):
        locks.acquire("n", "", 5)
    with pytest.raises(InvalidInputError):
        locks.acquire("n", "x", 0)
    with pytest.raises(InvalidInputError):
        locks.acquire("n" * 2000, "x", 5)


def test_acquire_waiting_gets_a_lock_freed_before_the_deadline(kvs, name):
    import threading
    import time

    locks = LockService(kvs)
    locks.ensure_tables()
    alice = locks.acquire(name, "alice", 30)
    started = time.monotonic()
    assert locks.acquire_waiting(name, "bob", 30, 0) is None  # 0: one try
    assert locks.acquire_waiting(name, "bob", 30, 0.3) is None  # still held at the deadline
    assert 0.3 <= time.monotonic() - started < 5
    threading.Timer(0.3, lambda: locks.release(alice)).start()
    bob = locks.acquire_waiting(name, "bob", 30, 10)
    assert bob is not None and bob.holder == "bob" and bob.token == alice.token + 1
