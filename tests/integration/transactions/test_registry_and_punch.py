"""Open-transaction registry (immutable timestamp) and punch table (unreadable timestamp) on real stores."""
from __future__ import annotations

import uuid

import pytest

from airflow_atlas.errors import InvalidInputError, LockNotHeldError
from airflow_atlas.transactions.punch import PunchTable
from airflow_atlas.transactions.registry import OpenTransactionRegistry


@pytest.fixture
def registry(kvs, clock):
    # a table of the test's own: the registry is one row, and the Cassandra keyspace is shared
    r = OpenTransactionRegistry(kvs, clock, margin_seconds=1.0, table=f"_open_{uuid.uuid4().hex[:12]}")
    r.ensure_tables()
    return r


@pytest.fixture
def punch(kvs, clock):
    p = PunchTable(kvs, clock, table=f"_punch_{uuid.uuid4().hex[:12]}")
    p.ensure_tables()
    return p


def test_register_refresh_unregister(registry, clock):
    entry = registry.register(42, "worker-1", 10)
    assert (entry.start_ts, entry.holder, entry.registered_at, entry.expires_at) == (42, "worker-1", clock.now, clock.now + 10)
    assert registry.is_live(42)
    assert registry.get(41) is None and not registry.is_live(43)
    clock.now += 5
    refreshed = registry.refresh(42, 10)
    assert refreshed.expires_at == clock.now + 10 and refreshed.registered_at == entry.registered_at
    clock.now += 9
    assert registry.is_live(42)
    registry.unregister(42)
    assert not registry.is_live(42) and registry.get(42) is None
    with pytest.raises(LockNotHeldError):
        registry.refresh(42, 10)


def test_expired_registration_is_never_revived(registry, clock):
    registry.register(7, "w", 10)
    clock.now += 9.5  # within the 1 s margin of expiry: refresh refuses
    with pytest.raises(LockNotHeldError, match="expired"):
        registry.refresh(7, 10)
    clock.now += 1
    assert not registry.is_live(7)
    with pytest.raises(LockNotHeldError):
        registry.refresh(7, 10)


def test_oldest_open_skips_and_deletes_expired(registry, clock):
    assert registry.oldest_open() is None
    registry.register(300, "c", 100)
    registry.register(100, "a", 5)
    registry.register(200, "b", 100)
    assert registry.oldest_open().start_ts == 100
    assert [e.start_ts for e in registry.open_transactions()] == [100, 200, 300]
    clock.now += 6
    oldest = registry.oldest_open()
    assert (oldest.start_ts, oldest.holder) == (200, "b")
    assert registry.get(100) is None  # deleted lazily
    registry.unregister(200)
    assert registry.oldest_open().start_ts == 300


def test_oldest_open_pages_past_many_expired_entries(registry, clock):
    for ts in range(1000, 1450):
        registry.register(ts, "old", 1)
    registry.register(5000, "live", 100)
    clock.now += 2
    assert registry.oldest_open().start_ts == 5000
    assert registry.open_transactions() == [registry.get(5000)]


def test_immutable_timestamp(registry, clock):
    counter = iter(range(10_000, 20_000))
    fresh = lambda: next(counter)  # noqa: E731
    assert registry.immutable_timestamp(fresh) == 10_000  # nothing open: a fresh timestamp
    registry.register(9_000, "w", 10)
    assert registry.immutable_timestamp(fresh) == 9_000
    clock.now += 11
    assert registry.immutable_timestamp(fresh) == 10_002


def test_immutable_timestamp_takes_the_fresh_timestamp_before_reading(registry):
    """A registration that lands between the fresh draw and the registry read is still covered."""
    order = []

    def fresh():
        order.append("fresh")
        registry.register(500, "late", 10)  # lands after the draw, before the read
        return 600

    assert registry.immutable_timestamp(fresh) == 500
    assert order == ["fresh"]


def test_registry_bad_input(registry):
    with pytest.raises(InvalidInputError):
        registry.register(-1, "w", 10)
    with pytest.raises(InvalidInputError):
        registry.register(1, "", 10)
    with pytest.raises(InvalidInputError):
        registry.register(1, "w", 0)


def test_punch_lookup(punch, clock):
    assert punch.timestamp_at_or_before(int(clock.now * 1000)) is None
    assert punch.unreadable_timestamp(60) == 0
    base_ms = punch.punch(100)
    clock.now += 60
    punch.punch(200)
    clock.now += 60
    punch.punch(300)
    assert punch.timestamp_at_or_before(base_ms - 1) is None
    assert punch.timestamp_at_or_before(base_ms) == 100
    assert punch.timestamp_at_or_before(base_ms + 59_999) == 100
    assert punch.timestamp_at_or_before(base_ms + 60_000) == 200
    assert punch.timestamp_at_or_before(base_ms + 10**9) == 300
    assert punch.latest_punch() == (base_ms + 120_000, 300)
    # unreadable timestamp: what was punched one window ago
    assert punch.unreadable_timestamp(0) == 300
    assert punch.unreadable_timestamp(60) == 200
    assert punch.unreadable_timestamp(90) == 100
    assert punch.unreadable_timestamp(3600) == 0  # no punch that old: CONSERVATIVE sweeps nothing yet


def test_punch_bad_input(punch):
    with pytest.raises(InvalidInputError):
        punch.punch(-5)
    with pytest.raises(InvalidInputError):
        punch.unreadable_timestamp(-1)


def test_punch_lookup_crosses_day_rows(punch, clock):
    from airflow_atlas.transactions.punch import DAY_MILLIS, LOOKBACK_DAYS

    clock.now = (DAY_MILLIS * 20_000 + DAY_MILLIS - 1000) / 1000  # one second before midnight
    late_ms = punch.punch(700)
    clock.now += 3 * 86_400  # three days of silence
    assert punch.timestamp_at_or_before(int(clock.now * 1000)) == 700
    assert punch.unreadable_timestamp(3600) == 700
    assert punch.latest_punch() == (late_ms, 700)
    clock.now += LOOKBACK_DAYS * 86_400  # beyond the look-back: no punch that old is known
    assert punch.unreadable_timestamp(0) == 0
