"""The Cassandra backend's batch planner (airflow_atlas.kvs.cassandra.batching): pure, no server, no driver.

Items are grouped by replica set and partition (table, key); a batch holds at most ``max_partitions``
partitions and about ``max_bytes``; an item larger than that goes alone; a unit (a cell's sentinel and
ranged tombstone) is never split. The contract suite runs the real writes; the driver request built from a
plan is checked there too (test_cassandra_pre_serialized_batch_values_equal_the_drivers_binding).
"""
from __future__ import annotations

from airflow_atlas.kvs.cassandra.batching import Statement, WriteItem, plan_batches, single


def _plan(items, partitions=10, nbytes=4096, replicas=None):
    return list(plan_batches(items, max_partitions=partitions, max_bytes=nbytes, replicas_of=replicas))


def _items(keys, size=50, table="t", kind="put"):
    return [single(kind, (k, i), table, k, size) for i, k in enumerate(keys)]


def _units(keys, size=100, table="t"):
    return [
        WriteItem((Statement("sentinel", (k, i)), Statement("delete", (k, i))), table, k, size)
        for i, k in enumerate(keys)
    ]


def _shape(plan):
    """Per request: the number of CQL statements in it."""
    return [sum(len(item.statements) for item in batch) for batch in plan]


def test_distinct_partitions_go_ten_per_batch():
    plan = _plan(_items([f"r{i}".encode() for i in range(25)]))
    assert _shape(plan) == [10, 10, 5]
    assert [item.key for batch in plan for item in batch] == [f"r{i}".encode() for i in range(25)]


def test_one_partition_is_capped_by_bytes_not_by_partitions():
    assert _shape(_plan(_items([b"row"] * 45, size=100), nbytes=1000)) == [10, 10, 10, 10, 5]


def test_large_item_goes_alone():
    items = _items([b"a", b"b"]) + [single("put", ("big",), "t", b"c", 10_000)]
    plan = _plan(items)
    assert [len(batch) for batch in plan] == [1, 2]
    assert plan[0][0].statements[0].params == ("big",)
    assert _plan(items[:1]) == [[items[0]]]  # one item: one request of one item


def test_same_row_in_two_tables_counts_as_two_partitions():
    items = []
    for i in range(6):
        key = f"r{i}".encode()
        items += [single("put", (key,), "a", key, 50), single("put", (key,), "b", key, 50)]
    assert _shape(_plan(items)) == [10, 2]


def test_batches_never_mix_replica_sets():
    keys = [f"r{i}".encode() for i in range(8)]
    plan = _plan(_items(keys), replicas=lambda key: int(key[1:]) % 2)
    assert _shape(plan) == [4, 4]
    for batch in plan:
        assert len({int(item.key[1:]) % 2 for item in batch}) == 1


def test_batching_off_sends_every_item_alone():
    items = _items([b"a", b"b", b"c"])
    assert _plan(items, partitions=1) == [[it] for it in items]


def test_a_cells_sentinel_and_tombstone_always_share_a_batch():
    # 7 cells of one row, a byte limit that fits 2.5 units: a batch must never end between a unit's halves.
    plan = _plan(_units([b"row"] * 7), nbytes=250)
    assert _shape(plan) == [4, 4, 4, 2]
    for batch in plan:
        for item in batch:
            assert item.is_unit and [s.prepared for s in item.statements] == ["sentinel", "delete"]
            assert item.statements[0].params == item.statements[1].params  # same cell


def test_a_unit_alone_is_still_one_request():
    units = _units([b"a"])
    for kwargs in ({}, {"partitions": 1}, {"nbytes": 64}):  # one item; batching off; too big
        assert _shape(_plan(units, **kwargs)) == [2]
    assert _shape(_plan(_units([b"a", b"b", b"c"], size=10_000))) == [2, 2, 2]


def test_units_and_plain_statements_of_a_call_share_batches():
    keys = [f"r{i}".encode() for i in range(12)]
    items = _units(keys[:8], size=50) + _items(keys[8:], size=50, kind="sentinel")
    plan = _plan(items)
    assert sum(_shape(plan)) == 8 * 2 + 4
    assert _shape(plan) == [8 * 2 + 2, 2]  # 10 partitions per batch: 8 units + 2 sentinels, then 2 sentinels


def test_the_plan_is_lazy_and_keeps_every_item_once():
    items = _items([f"r{i % 7}".encode() for i in range(100)], size=300)
    plan = plan_batches(items, max_partitions=3, max_bytes=1000)
    assert iter(plan) is plan  # a generator: batches are planned while earlier ones are in flight
    out = [item for batch in plan for item in batch]
    assert sorted(out) == sorted(items)
    for batch in _plan(items, partitions=3, nbytes=1000):
        assert len({item.key for item in batch}) <= 3 and sum(item.size for item in batch) <= 1000
