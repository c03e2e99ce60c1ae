"""The timestamp server's record and adoption: the encoding round-trips, adoption is idempotent and one-way,
the previous release's reading of the marker fails, and this release's cell service refuses an adopted store."""
from __future__ import annotations

import pytest

from airflow_atlas.encoding import fixed_long, from_fixed_long
from airflow_atlas.errors import CorruptTransactionDataError, InvalidInputError
from airflow_atlas.kvs.sqlite import SqliteKeyValueService
from airflow_atlas.timestamps import StoreServedByServerError, TimestampService
from airflow_atlas.timestamps.record import (
    BOUND_CELL,
    RECORD_CELL,
    TIMESTAMP_TABLE,
    ServerRecord,
    adopt,
    is_adopted,
    marker,
    read_record,
)


@pytest.fixture
def kvs(tmp_path):
    service = SqliteKeyValueService(str(tmp_path / "store.db"))
    yield service
    service.close()


def test_the_record_round_trips():
    record = ServerRecord(epoch=3, bound=12_345_678, seq=9, lease_ms=2000, leader="10.0.0.1:9350#abc")
    assert ServerRecord.decode(record.encode()) == record
    assert record.leader_address == "10.0.0.1:9350"
    with pytest.raises(CorruptTransactionDataError):
        ServerRecord.decode(b"\x02" + record.encode()[1:])


def test_adoption_keeps_every_timestamp_the_cell_issued_below_the_server(kvs):
    cell = TimestampService(kvs)
    cell.ensure_tables()
    drawn = cell.fresh_timestamps(7)
    assert not is_adopted(kvs)
    assert adopt(kvs) == drawn[-1]
    assert adopt(kvs) == drawn[-1]  # idempotent
    assert is_adopted(kvs)
    record, _ = read_record(kvs)
    assert record is not None and record.bound == drawn[-1] and record.leader == "" and record.epoch == 0


def test_the_cell_refuses_an_adopted_store(kvs):
    TimestampService(kvs).ensure_tables()
    adopt(kvs)
    with pytest.raises(StoreServedByServerError, match="timestamp server"):
        TimestampService(kvs).fresh_timestamp()
    with pytest.raises(StoreServedByServerError):
        TimestampService(kvs).current_bound()


def test_the_previous_release_cannot_read_the_marker_as_a_bound():
    """The previous release decoded ts/upper with from_fixed_long: the marker is not 8 bytes long."""
    with pytest.raises(InvalidInputError, match="fixed long needs 8 bytes"):
        from_fixed_long(marker(99))


def test_a_crash_between_the_two_steps_of_adoption_is_repaired_on_read(kvs):
    TimestampService(kvs).ensure_tables()
    kvs.check_and_set(TIMESTAMP_TABLE, BOUND_CELL, None, fixed_long(5))
    kvs.check_and_set(TIMESTAMP_TABLE, BOUND_CELL, fixed_long(5), marker(5))  # step 1 only
    assert kvs.get_lwt(TIMESTAMP_TABLE, [RECORD_CELL]) == {}
    record, _ = read_record(kvs)
    assert record is not None and record.bound == 5
