"""Transaction services v1 (_transactions) and v2 (_transactions2, tickets) on real stores."""
from __future__ import annotations

import pytest

from airflow_atlas.errors import InvalidInputError, KeyAlreadyExistsError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.timestamps import TimestampService
from airflow_atlas.transactions import encoding as enc
from airflow_atlas.transactions.encoding import ABORTED, PARTITIONING_QUANTUM, ROWS_PER_QUANTUM
from airflow_atlas.transactions.service import (
    TransactionServiceV1,
    TransactionServiceV2,
    make_transaction_service,
)


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def version(request) -> int:
    return request.param


@pytest.fixture
def service(kvs, version):
    return make_transaction_service(kvs, version)


@pytest.fixture
def starts(kvs):
    """Fresh, unused start timestamps (the Cassandra keyspace is shared by the suite)."""
    ts = TimestampService(kvs)
    ts.ensure_tables()
    return lambda n: list(ts.fresh_timestamps(n))


def test_factory(kvs):
    assert isinstance(make_transaction_service(kvs, 1), TransactionServiceV1)
    assert isinstance(make_transaction_service(kvs, 2), TransactionServiceV2)
    with pytest.raises(InvalidInputError):
        make_transaction_service(kvs, 3)


def test_put_unless_exists_and_get(service, starts):
    committed, aborted, running = starts(3)
    service.put_unless_exists(committed, committed + 5)
    service.put_unless_exists(aborted, ABORTED)
    assert service.get(committed) == committed + 5
    assert service.get(aborted) == ABORTED
    assert service.get(running) is None
    with pytest.raises(KeyAlreadyExistsError):
        service.put_unless_exists(committed, ABORTED)
    with pytest.raises(KeyAlreadyExistsError):
        service.put_unless_exists(aborted, aborted + 1)
    assert service.get(committed) == committed + 5
    assert service.get(aborted) == ABORTED


def test_get_many(service, starts):
    ts = starts(40)
    expected = {}
    for i, s in enumerate(ts):
        if i % 4 == 0:
            continue  # running: no entry
        commit = ABORTED if i % 4 == 1 else s + i
        service.put_unless_exists(s, commit)
        expected[s] = commit
    assert service.get_many(ts) == expected
    assert service.get_many([]) == {}
    # a new service object (cold cache) reads the same from the store, serial or not
    cold = make_transaction_service(service._kvs, 1 if isinstance(service, TransactionServiceV1) else 2)
    assert cold.get_many(ts) == expected
    assert cold.get_many(ts, serial=True) == expected


def test_results_are_cached_but_absent_ones_are_not(kvs, version, starts):
    service = make_transaction_service(kvs, version, cache_size=3)
    a, b, c, d = starts(4)
    for s in (a, b, c):
        service.put_unless_exists(s, s + 1)
    assert service.cached_entries == 3
    assert service.get(d) is None
    other = make_transaction_service(kvs, version)
    other.put_unless_exists(d, ABORTED)
    assert service.get(d) == ABORTED  # the earlier miss was not cached
    assert service.cached_entries == 3  # bounded


def test_get_many_reads_the_store_once(kvs, starts):
    """Batched: one get_lwt call for a whole set of timestamps, never one per timestamp."""
    service = make_transaction_service(kvs, 2, cache_size=0)
    ts = starts(50)
    for s in ts:
        service.put_unless_exists(s, s + 2)
    calls = []
    real = kvs.get_lwt

    def counting(table, cells, serial=False):
        cells = list(cells)
        calls.append(len(cells))
        return real(table, cells, serial=serial)

    kvs.get_lwt = counting
    try:
        assert service.get_many(ts) == {s: s + 2 for s in ts}
    finally:
        del kvs.get_lwt
    assert calls == [50]


def test_v2_stores_tickets_encoding(kvs, starts):
    service = make_transaction_service(kvs, 2)
    committed, aborted = starts(2)
    service.put_unless_exists(committed, committed + 3)
    service.put_unless_exists(aborted, ABORTED)
    raw = kvs.get_lwt("_transactions2", [enc.v2_cell(committed), enc.v2_cell(aborted)], serial=True)
    assert raw[enc.v2_cell(committed)] == bytes.fromhex("03")
    assert raw[enc.v2_cell(aborted)] == b""


def test_v2_timestamps_sharing_a_row(kvs, starts):
    """Timestamps NP apart share a row and differ by column; all survive put-unless-exists."""
    service = make_transaction_service(kvs, 2)
    block = starts(5 * ROWS_PER_QUANTUM)
    base = block[0]
    same_row = [base + k * ROWS_PER_QUANTUM for k in range(5)]
    assert base // PARTITIONING_QUANTUM == same_row[-1] // PARTITIONING_QUANTUM
    assert len({enc.v2_cell(s).row for s in same_row}) == 1
    for i, s in enumerate(same_row):
        service.put_unless_exists(s, ABORTED if i == 2 else s + i + 1)
    cold = make_transaction_service(kvs, 2)
    assert cold.get_many(same_row) == {s: (ABORTED if i == 2 else s + i + 1) for i, s in enumerate(same_row)}
    row = kvs.get_lwt_row("_transactions2", enc.v2_cell(base).row, serial=True)
    assert {enc.v2_start_of(Cell(enc.v2_cell(base).row, col)) for col in row} >= set(same_row)


def test_v1_stores_the_spec_bytes(clean_kvs):
    service = make_transaction_service(clean_kvs, 1)
    for start, commit in [(20, 33), (28, 42), (37, -1), (3141592, 3141595)]:
        service.put_unless_exists(start, commit)
    raw = clean_kvs.get_lwt("_transactions", [enc.v1_cell(s) for s in (20, 28, 37, 3141592)])
    assert {c.row.hex(): (c.col, v.hex()) for c, v in raw.items()} == {
        "14": (b"t", "21"),
        "1c": (b"t", "2a"),
        "25": (b"t", "ff80ffffffffffffffff"),
        "e02fefd8": (b"t", "e02fefdb"),
    }


def test_bad_input(service):
    with pytest.raises(InvalidInputError):
        service.put_unless_exists(-3, 5)
    with pytest.raises(InvalidInputError):
        service.put_unless_exists(10, 9)
    with pytest.raises(InvalidInputError):
        service.get_many(["x"])


@pytest.mark.cassandra
def test_v2_live_schema_on_cassandra(cassandra_txn_kvs, txn_keyspace, cassandra_session):
    from airflow_atlas.kvs.cassandra import physical_table_name

    make_transaction_service(cassandra_txn_kvs, 2)
    row = cassandra_session.execute(
        "SELECT bloom_filter_fp_chance, min_index_interval, max_index_interval, compression "
        "FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (txn_keyspace, physical_table_name("_transactions2")),
    ).one()
    assert row is not None
    assert row.bloom_filter_fp_chance == pytest.approx(0.0001)
    assert row.min_index_interval == 1
    assert row.max_index_interval == 1
    assert row.compression["chunk_length_in_kb"] == "64"
