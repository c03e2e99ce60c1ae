"""The transactions schema version is a property of the store (issue 16, item 1).

Regression: on a store written with schema version 2, one process started with
``transactions_schema_version=1`` read the empty ``_transactions`` table, rolled back every committed
transaction and deleted its writes (exit 0, "148 aborted writes deleted"). The version is now persisted at
``init`` and read by every process; a setting that disagrees is refused before anything is read or written.
"""
from __future__ import annotations

import uuid

import pytest

from airflow_atlas.cli import main
from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.oracle import Reader, observe
from airflow_atlas.store import AtlasStore
from airflow_atlas.transactions import schema
from airflow_atlas.transactions.encoding import v1_cell, v1_encode_value, v2_cell, v2_encode_value
from airflow_atlas.transactions.service import TRANSACTIONS2_TABLE, TRANSACTIONS_TABLE, TransactionServiceV1
from tests.conftest import CASSANDRA_HOST, CASSANDRA_PORT


@pytest.fixture(params=["sqlite", pytest.param("cassandra", marks=pytest.mark.cassandra)])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'atlas.db'}"
    keyspace = request.getfixturevalue("fresh_keyspace")
    return f"cassandra://{CASSANDRA_HOST}:{CASSANDRA_PORT}/{keyspace}"


def visible_cells(url: str) -> int:
    with AtlasStore.open(url) as store:
        reader = Reader(store.timestamps.fresh_timestamp())
        views = observe(store, [reader]).views.get(reader, {})
        return sum(isinstance(v, bytes) for cells in views.values() for v in cells.values())


def test_a_disagreeing_schema_version_is_refused_and_nothing_is_deleted(store_url, capsys):
    assert main(["--store", store_url, "init", "--shards", "1"]) == 0
    assert main(["--store", store_url, "workload", "-n", "30", "--dead-writer-ratio", "0", "--abort-ratio", "0"]) == 0
    before = visible_cells(store_url)
    assert before > 0
    capsys.readouterr()

    code = main(["--store", store_url, "--set", "transactions_schema_version=1",
                 "--set", "unreadable_window_seconds=0", "sweep"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "transactions_schema_version" in err and "2" in err
    assert visible_cells(store_url) == before

    # The store's own version sweeps normally and keeps every committed value.
    assert main(["--store", store_url, "--set", "unreadable_window_seconds=0", "sweep"]) == 0
    assert visible_cells(store_url) == before


def test_init_persists_the_version_and_every_process_uses_it(store_url):
    v1 = StoreConfig(transactions_schema_version=1)
    with AtlasStore.open(store_url, v1) as store:
        store.initialize()
        assert store.transactions_schema_version == 1
        assert isinstance(store.transaction_service, TransactionServiceV1)
    # A process without the setting follows the store; one that disagrees is refused.
    with AtlasStore.open(store_url) as store:
        assert store.transactions_schema_version == 1
        assert isinstance(store.transaction_service, TransactionServiceV1)
    with AtlasStore.open(store_url, StoreConfig(transactions_schema_version=2)) as store:
        with pytest.raises(InvalidInputError, match="schema version 1"):
            _ = store.transaction_service
        # and init cannot change it either
        with pytest.raises(InvalidInputError, match="schema version 1"):
            store.initialize()


def test_the_recorded_version_is_read_when_paxos_fails(store_url):
    """Every command (a read-only status too) opens with this read: when the serial read fails with "CAS
    operation result is unknown" (issue 32 item 4), the write-once record is read plainly."""
    from tests.faults import PaxosUnknownKvs

    with AtlasStore.open(store_url, StoreConfig(transactions_schema_version=1)) as store:
        store.initialize()
        paxos_fails = PaxosUnknownKvs(store.kvs)
        assert AtlasStore(paxos_fails, store.config).transactions_schema_version == 1
        assert paxos_fails.serial_reads_refused == 1


def _legacy_store(url: str, tables: dict[str, bool]):
    """A store initialised before the marker existed: internal tables without the marker table, and the
    given transactions tables (``True``: holding one committed entry)."""
    store = AtlasStore.open(url)
    store.initialize()
    store.kvs.drop_table(schema.SCHEMA_TABLE)
    for table in (TRANSACTIONS_TABLE, TRANSACTIONS2_TABLE):
        if store.kvs.table_exists(table):
            store.kvs.drop_table(table)
    from airflow_atlas.transactions.service import TRANSACTIONS2_TABLE_METADATA, TRANSACTIONS_TABLE_METADATA

    start = 1000 + uuid.uuid4().int % 1000
    for table, holds in tables.items():
        meta = TRANSACTIONS_TABLE_METADATA if table == TRANSACTIONS_TABLE else TRANSACTIONS2_TABLE_METADATA
        store.kvs.create_table(table, meta)
        if holds:
            cell: Cell = v1_cell(start) if table == TRANSACTIONS_TABLE else v2_cell(start)
            value = v1_encode_value(start + 5) if table == TRANSACTIONS_TABLE else v2_encode_value(start, start + 5)
            store.kvs.put_unless_exists(table, {cell: value})
    store.close()


@pytest.mark.parametrize(
    "tables, expected",
    [
        ({TRANSACTIONS_TABLE: True}, 1),
        ({TRANSACTIONS2_TABLE: True}, 2),
        ({TRANSACTIONS_TABLE: True, TRANSACTIONS2_TABLE: False}, 1),
        ({TRANSACTIONS2_TABLE: False}, 2),
    ],
)
def test_a_store_initialised_before_the_marker_is_inferred_from_its_data(store_url, tables, expected):
    _legacy_store(store_url, tables)
    with AtlasStore.open(store_url) as store:
        assert store.transactions_schema_version == expected
        assert not store.kvs.table_exists(schema.SCHEMA_TABLE)  # reading never creates anything
        other = 2 if expected == 1 else 1
    with AtlasStore.open(store_url, StoreConfig(transactions_schema_version=other)) as store:
        with pytest.raises(InvalidInputError, match="transactions_schema_version"):
            _ = store.transaction_service
    with AtlasStore.open(store_url) as store:
        store.initialize()  # records the inferred version
        assert schema.persisted_version(store.kvs) == expected


def test_a_legacy_store_with_both_tables_holding_data_is_refused(store_url):
    _legacy_store(store_url, {TRANSACTIONS_TABLE: True, TRANSACTIONS2_TABLE: True})
    with AtlasStore.open(store_url) as store:
        with pytest.raises(InvalidInputError, match="both"):
            _ = store.transaction_service
    # An operator who knows which one is right says so at init; it is recorded from then on.
    with AtlasStore.open(store_url, StoreConfig(transactions_schema_version=2)) as store:
        store.initialize()
    with AtlasStore.open(store_url) as store:
        assert store.transactions_schema_version == 2
