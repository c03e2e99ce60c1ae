"""The open-transaction registry's rows on a served store (transactions/registry.py): registrations spread over
the stripes, readers see every row whoever wrote - a striping writer, one that does not stripe, a registration
made before the store was served - and the immutable timestamp is the oldest live one over all of them."""
from __future__ import annotations

import pytest

from airflow_atlas.kvs.sqlite import SqliteKeyValueService
from airflow_atlas.transactions.registry import (
    OPEN_TRANSACTIONS_TABLE,
    STRIPES,
    OpenTransactionRegistry,
    stripe_of,
    stripe_row,
)


class Clock:
    now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def kvs(tmp_path):
    service = SqliteKeyValueService(str(tmp_path / "store.db"))
    OpenTransactionRegistry(service).ensure_tables()
    yield service
    service.close()


def rows_used(kvs) -> set[bytes]:
    return {stripe_row(k) for k in range(STRIPES) if kvs.get_wallclock_row(OPEN_TRANSACTIONS_TABLE, stripe_row(k))}


def test_consecutive_start_timestamps_spread_over_every_stripe():
    assert {stripe_of(ts) for ts in range(1_000, 1_000 + 20 * STRIPES)} == set(range(STRIPES))


def test_a_striping_writer_spreads_and_every_reader_sees_the_oldest(kvs):
    clock = Clock()
    striped = OpenTransactionRegistry(kvs, clock, striped=lambda: True)
    plain = OpenTransactionRegistry(kvs, clock)
    for ts in range(500, 564):
        striped.register(ts, "app", 60)
    assert len(rows_used(kvs)) > STRIPES // 2
    for reader in (striped, plain):
        assert reader.oldest_open().start_ts == 500
        assert [e.start_ts for e in reader.open_transactions(limit=5)] == [500, 501, 502, 503, 504]
        assert reader.immutable_timestamp(lambda: 10_000) == 500
        assert reader.is_live(530) and reader.get(563).holder == "app"
    striped.unregister(500)
    assert plain.oldest_open().start_ts == 501


def test_a_registration_made_before_striping_is_found_refreshed_and_removed(kvs):
    clock = Clock()
    before = OpenTransactionRegistry(kvs, clock)  # the store was not served yet: row "open"
    before.register(77, "old", 60)
    after = OpenTransactionRegistry(kvs, clock, striped=lambda: True)
    assert after.get(77).holder == "old" and after.oldest_open().start_ts == 77
    after.refresh(77, 120)
    assert after.get(77).expires_at == pytest.approx(clock.now + 120)
    after.unregister(77)
    assert after.get(77) is None and after.oldest_open() is None and not rows_used(kvs)


def test_expired_entries_are_skipped_and_deleted_in_every_row(kvs):
    clock = Clock()
    registry = OpenTransactionRegistry(kvs, clock, striped=lambda: True)
    for ts in range(100, 140):
        registry.register(ts, "app", 5 if ts < 130 else 600)
    clock.now += 10
    assert registry.oldest_open().start_ts == 130
    assert [e.start_ts for e in registry.open_transactions()] == list(range(130, 140))
    assert all(registry.get(ts) is None for ts in range(100, 130))
