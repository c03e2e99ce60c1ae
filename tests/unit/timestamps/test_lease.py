"""StoreLeadership on the embedded store's LWT cells, with a clock the test moves: taking, renewing, extending,
losing and releasing leadership, and that no instance ever hands out a timestamp at or below one handed out
before (the rule docs/ARCHITECTURE.md argues, "The timestamp server")."""
from __future__ import annotations

import pytest

from airflow_atlas.errors import StoreUnavailableError
from airflow_atlas.kvs.sqlite import SqliteKeyValueService
from airflow_atlas.timestamps.lease import (
    BLOCK,
    NotLeaderError,
    StoreLeadership,
    StoreNotServedError,
    takeover_wait,
)
from airflow_atlas.timestamps.record import BOUND_CELL, TIMESTAMP_TABLE, TIMESTAMP_TABLE_METADATA, adopt, read_record

LEASE = 2.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def kvs(tmp_path):
    service = SqliteKeyValueService(str(tmp_path / "store.db"))
    service.create_table(TIMESTAMP_TABLE, TIMESTAMP_TABLE_METADATA)
    yield service
    service.close()


@pytest.fixture
def clock():
    return Clock()


def instance(kvs, clock, name: str) -> StoreLeadership:
    return StoreLeadership(kvs, f"{name}:9350#{name}", LEASE, now=clock)


def test_a_store_not_adopted_is_refused(kvs, clock):
    with pytest.raises(StoreNotServedError, match="adopt"):
        instance(kvs, clock, "a").issue(1)


def test_the_first_leader_starts_above_the_cells_bound_and_hands_out_in_order(kvs, clock):
    kvs.check_and_set(TIMESTAMP_TABLE, BOUND_CELL, None, (41).to_bytes(8, "big"))
    assert adopt(kvs) == 41
    a = instance(kvs, clock, "a")
    assert a.issue(1) == (42, 1)
    assert a.issue(3) == (43, 1)
    assert a.issue(1)[0] == 46
    record, _ = read_record(kvs)
    assert record is not None and record.leader == "a:9350#a" and record.bound == 41 + BLOCK


def test_a_standby_names_the_leader_and_takes_over_only_after_the_wait(kvs, clock):
    adopt(kvs)
    a, b = instance(kvs, clock, "a"), instance(kvs, clock, "b")
    a.issue(1)
    with pytest.raises(NotLeaderError) as refused:
        b.issue(1)
    assert refused.value.leader == "a:9350"
    b.tick()  # sees the record's (epoch, seq)
    clock.now += takeover_wait(LEASE) - 0.1
    b.tick()
    assert b.state().role == "standby"  # not yet: a's lease may still run
    clock.now += 0.2
    b.tick()
    assert b.state().role == "leader" and b.state().epoch == 2


def test_renewals_keep_a_live_leader_and_the_standby_waits(kvs, clock):
    adopt(kvs)
    a, b = instance(kvs, clock, "a"), instance(kvs, clock, "b")
    a.issue(1)
    for _ in range(20):  # five leases of renewals a quarter lease apart
        b.tick()
        clock.now += LEASE / 4
        a.tick()
    b.tick()
    assert a.state().role == "leader" and b.state().role == "standby"


def test_an_old_leader_resumed_after_a_takeover_hands_out_nothing(kvs, clock):
    """a is "paused" (its clock runs on, it does nothing) while b takes over and serves; when a resumes, its
    lease has run out by its own clock, its renewal fails on the new epoch, and it refuses, naming b."""
    adopt(kvs)
    a, b = instance(kvs, clock, "a"), instance(kvs, clock, "b")
    before = a.issue(5)[0] + 4
    b.tick()
    clock.now += takeover_wait(LEASE) + 0.01
    b.tick()
    after, epoch = b.issue(1)
    assert epoch == 2 and after > before
    with pytest.raises(NotLeaderError) as refused:
        a.issue(1)
    assert refused.value.leader == "b:9350"
    assert b.issue(1)[0] == after + 1


def test_a_leader_that_cannot_renew_stops_serving_when_its_lease_ends(kvs, clock):
    adopt(kvs)
    a = instance(kvs, clock, "a")
    a.issue(1)
    clock.now += LEASE  # the lease has run out: the next request must renew first

    def unavailable(*args, **kwargs):
        raise StoreUnavailableError("the node does not answer")

    kvs.check_and_set = unavailable  # type: ignore[method-assign]
    kvs.get_lwt = unavailable  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailableError):
        a.issue(1)


def test_the_block_is_extended_before_it_runs_out(kvs, clock):
    adopt(kvs)
    a = instance(kvs, clock, "a")
    last = 0
    for _ in range(int(BLOCK * 1.6) // 10_000):
        start, _ = a.issue(10_000)
        assert start == last + 1
        last = start + 9_999
        clock.now += 0.01
        a.tick()
    record, _ = read_record(kvs)
    assert record is not None and record.bound >= last and record.epoch == 1


def test_a_released_store_is_taken_at_once(kvs, clock):
    adopt(kvs)
    a, b = instance(kvs, clock, "a"), instance(kvs, clock, "b")
    top = a.issue(1)[0]
    a.release()
    assert a.state().role == "standby"
    assert b.issue(1)[0] > top  # no wait: the record says nobody leads


def test_a_new_incarnation_at_the_same_address_waits_like_any_standby(kvs, clock):
    adopt(kvs)
    a = instance(kvs, clock, "a")
    a.issue(1)
    again = StoreLeadership(kvs, "a:9350#restarted", LEASE, now=clock)
    with pytest.raises(NotLeaderError):
        again.issue(1)
    clock.now += takeover_wait(LEASE) + 0.01
    again.tick()
    assert again.state().role == "leader"


def test_a_request_of_up_to_a_block_is_served_after_one_extension(kvs, clock):
    adopt(kvs)
    a = instance(kvs, clock, "a")
    first = a.issue(BLOCK // 2 + 1)[0]  # more than half a block: the taken block holds it
    big, _ = a.issue(BLOCK)  # more than is left: one extension makes room
    assert big == first + BLOCK // 2 + 1
    record, _ = read_record(kvs)
    assert record is not None and record.bound >= big + BLOCK - 1 and record.epoch == 1


def test_a_request_larger_than_a_block_extends_the_bound_by_what_it_needs(kvs, clock):
    adopt(kvs)
    a = instance(kvs, clock, "a")
    a.issue(1)
    skip, _ = a.issue(10_000_000)  # a whole coarse partition at once
    assert a.issue(1)[0] == skip + 10_000_000
    record, _ = read_record(kvs)
    assert record is not None and record.bound >= skip + 10_000_000
