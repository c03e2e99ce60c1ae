"""How the Cassandra backend packs multi-cell LOGICAL writes into UNLOGGED batches (no server needed).

The packing is pure: statements are grouped by replica set and partition; a batch holds at most
``batch_partitions`` partitions and about ``batch_bytes``; a statement larger than that goes alone, and a
batch of one statement is sent as the plain statement. The contract suite runs the real writes.
"""
from __future__ import annotations

from cassandra import ConsistencyLevel
from cassandra.query import BatchStatement

from airflow_atlas.kvs.cassandra import CassandraKeyValueService


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
    svc._write_cl = ConsistencyLevel.LOCAL_QUORUM
    svc._replica_group = lambda: (replicas or (lambda key: None))
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
    out = list(_service()._batches(_items(ps, [f"r{i}".encode() for i in range(25)])))
    assert _shape(out) == [10, 10, 5]
    assert all(s.batch_type.name == "UNLOGGED" for s, _ in out if isinstance(s, BatchStatement))
    assert all(s.is_idempotent for s, _ in out)


def test_one_partition_is_capped_by_bytes_not_by_partitions(monkeypatch):
    _bound_calls(monkeypatch)
    ps = _Prepared("t")
    out = list(_service(nbytes=1000)._batches(_items(ps, [b"row"] * 45, size=100)))
    assert _shape(out) == [10, 10, 10, 10, 5]


def test_large_statement_goes_alone_and_single_batches_are_plain(monkeypatch):
    _bound_calls(monkeypatch)
    ps = _Prepared("t")
    items = _items(ps, [b"a", b"b"], size=50) + [(ps, ("big",), b"c", 10_000)]
    out = list(_service()._batches(items))
    plain = [(s, p) for s, p in out if not isinstance(s, BatchStatement)]
    assert plain == [(ps, ("big",))]
    assert sorted(_shape(out)) == [1, 2]
    # One item: sent as the statement itself.
    assert list(_service()._batches(items[:1])) == [(ps, items[0][1])]


def test_same_row_in_two_tables_counts_as_two_partitions(monkeypatch):
    _bound_calls(monkeypatch)
    a, b = _Prepared("a"), _Prepared("b")
    items = []
    for i in range(6):
        key = f"r{i}".encode()
        items += [(a, (key, "a"), key, 50), (b, (key, "b"), key, 50)]
    assert _shape(list(_service()._batches(items))) == [10, 2]


def test_batches_never_mix_replica_sets(monkeypatch):
    calls = _bound_calls(monkeypatch)
    ps = _Prepared("t")
    keys = [f"r{i}".encode() for i in range(8)]
    out = list(_service(replicas=lambda key: int(key[1:]) % 2)._batches(_items(ps, keys)))
    assert _shape(out) == [4, 4]
    groups = {int(params[0][1:]) % 2 for (_s, params) in calls[:4]}
    assert len(groups) == 1


def test_batching_off_sends_every_statement_alone():
    ps = _Prepared("t")
    items = _items(ps, [b"a", b"b", b"c"])
    assert list(_service(partitions=1)._batches(items)) == [(ps, it[1]) for it in items]
