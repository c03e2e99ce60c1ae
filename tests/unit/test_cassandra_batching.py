"""How the Cassandra backend packs multi-cell LOGICAL writes into UNLOGGED batches (no server needed).

The packing is pure: statements are grouped by replica set and partition; a batch holds at most
``batch_partitions`` partitions and about ``batch_bytes``; a statement larger than that goes alone, and a
batch of one statement is sent as the plain statement. The contract suite runs the real writes.
"""
from __future__ import annotations

from types import SimpleNamespace

from cassandra import ConsistencyLevel
from cassandra.query import BatchStatement

from airflow_atlas.kvs.cassandra import CassandraKeyValueService

LQ = ConsistencyLevel.LOCAL_QUORUM


class _Prepared:
    """Stands in for a PreparedStatement: BatchStatement.add binds it."""

    def __init__(self, name: str):
        self.name = name
        self.keyspace = None
        self.routing_key = None

    def bind(self, params):
        return _Bound(self, params)


class _Bound:
    def __init__(self, ps, params):
        self.prepared_statement = ps
        self.values = list(params)
        self.keyspace = None
        self.routing_key = None


def _service(partitions=10, nbytes=4096, replicas=None):
    svc = object.__new__(CassandraKeyValueService)
    svc._batch_partitions = partitions
    svc._batch_bytes = nbytes
    svc._replica_group = lambda: (replicas or (lambda key: None))
    svc._s = lambda: SimpleNamespace(cluster=SimpleNamespace(column_encryption_policy=None))
    svc.keyspace = "ks"
    return svc


def _items(ps, keys, size=50):
    return [(ps, (k, i), k, size) for i, k in enumerate(keys)]


def _shape(out):
    """Per yielded statement: the number of statements in it (1 = plain statement)."""
    return [len(s._statements_and_parameters) if isinstance(s, BatchStatement) else 1 for s, _ in out]


def _bound_calls(monkeypatch):
    calls = []

    def add(self, statement, parameters=None):
        calls.append((statement, parameters))
        self._statements_and_parameters.append((True, b"id", list(parameters or ())))

    monkeypatch.setattr(BatchStatement, "add", add)
    return calls


def test_distinct_partitions_go_ten_per_batch(monkeypatch):
    _bound_calls(monkeypatch)
    ps = _Prepared("t")
    out = list(_service()._batches(_items(ps, [f"r{i}".encode() for i in range(25)]), LQ))
    assert _shape(out) == [10, 10, 5]
    assert all(s.batch_type.name == "UNLOGGED" for s, _ in out if isinstance(s, BatchStatement))
    assert all(s.is_idempotent for s, _ in out)


def test_one_partition_is_capped_by_bytes_not_by_partitions(monkeypatch):
    _bound_calls(monkeypatch)
    ps = _Prepared("t")
    out = list(_service(nbytes=1000)._batches(_items(ps, [b"row"] * 45, size=100), LQ))
    assert _shape(out) == [10, 10, 10, 10, 5]


def test_large_statement_goes_alone_and_single_batches_are_plain(monkeypatch):
    _bound_calls(monkeypatch)
    ps = _Prepared("t")
    items = _items(ps, [b"a", b"b"], size=50) + [(ps, ("big",), b"c", 10_000)]
    out = list(_service()._batches(items, LQ))
    plain = [(s, p) for s, p in out if not isinstance(s, BatchStatement)]
    assert plain == [(ps, ("big",))]
    assert sorted(_shape(out)) == [1, 2]
    # One item: sent as the statement itself.
    assert list(_service()._batches(items[:1], LQ)) == [(ps, items[0][1])]


def test_same_row_in_two_tables_counts_as_two_partitions(monkeypatch):
    _bound_calls(monkeypatch)
    a, b = _Prepared("a"), _Prepared("b")
    items = []
    for i in range(6):
        key = f"r{i}".encode()
        items += [(a, (key, "a"), key, 50), (b, (key, "b"), key, 50)]
    assert _shape(list(_service()._batches(items, LQ))) == [10, 2]


def test_batches_never_mix_replica_sets(monkeypatch):
    calls = _bound_calls(monkeypatch)
    ps = _Prepared("t")
    keys = [f"r{i}".encode() for i in range(8)]
    out = list(_service(replicas=lambda key: int(key[1:]) % 2)._batches(_items(ps, keys), LQ))
    assert _shape(out) == [4, 4]
    groups = {int(params[0][1:]) % 2 for (_s, params) in calls[:4]}
    assert len(groups) == 1


def test_batching_off_sends_every_statement_alone():
    ps = _Prepared("t")
    items = _items(ps, [b"a", b"b", b"c"])
    assert list(_service(partitions=1)._batches(items, LQ)) == [(ps, it[1]) for it in items]


def _units(sentinel, delete, keys, size=100):
    """Sentinel + ranged delete of one cell: an item whose statement is None and whose params are pairs."""
    return [(None, ((sentinel, (k, i)), (delete, (k, i))), k, size) for i, k in enumerate(keys)]


def test_a_cells_sentinel_and_tombstone_always_share_a_batch(monkeypatch):
    calls = _bound_calls(monkeypatch)
    sentinel, delete = _Prepared("sentinel"), _Prepared("delete")
    # 7 cells of one row, a byte limit that fits 2.5 units: a batch must never end between a unit's halves.
    out = list(_service(nbytes=250)._batches(_units(sentinel, delete, [b"row"] * 7), LQ))
    assert _shape(out) == [4, 4, 4, 2]
    assert all(isinstance(s, BatchStatement) for s, _ in out)
    pairs = [calls[i : i + 2] for i in range(0, len(calls), 2)]
    assert [(a[0].name, b[0].name) for a, b in pairs] == [("sentinel", "delete")] * 7
    assert all(a[1] == b[1] for a, b in pairs)  # same cell


def test_a_unit_alone_is_still_one_batch(monkeypatch):
    _bound_calls(monkeypatch)
    sentinel, delete = _Prepared("sentinel"), _Prepared("delete")
    units = _units(sentinel, delete, [b"a"])
    for svc in (_service(), _service(partitions=1), _service(nbytes=64)):  # one item; batching off; too big
        out = list(svc._batches(units, LQ))
        assert _shape(out) == [2]
    big = _units(sentinel, delete, [b"a", b"b", b"c"], size=10_000)
    assert _shape(list(_service()._batches(big, LQ))) == [2, 2, 2]


def test_units_and_plain_statements_of_a_call_share_batches(monkeypatch):
    _bound_calls(monkeypatch)
    sentinel, delete = _Prepared("sentinel"), _Prepared("delete")
    keys = [f"r{i}".encode() for i in range(12)]
    items = _units(sentinel, delete, keys[:8], size=50) + _items(sentinel, keys[8:], size=50)
    out = list(_service()._batches(items, LQ))
    assert sum(_shape(out)) == 8 * 2 + 4
    assert _shape(out) == [8 * 2 + 2, 2]  # 10 partitions per batch: 8 units + 2 sentinels, then 2 sentinels
