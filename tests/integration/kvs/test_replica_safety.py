"""Replica safety on the real node: consistency levels routed per operation, and the gc_grace guard.

A keyspace with ``replication_factor`` 2 on the single node is a cluster with one replica of two down:
ALL, QUORUM and LOCAL_QUORUM can never be met there (Cassandra answers Unavailable), ONE can. So a request
that fails there ran at a level above ONE, and one that succeeds ran at ONE - the routing is observed
through Cassandra itself, not through the driver's objects.

Lightweight transactions need a Paxos quorum of the replication factor, so in an RF 2 keyspace on one node
every LWT fails whatever the levels. The sweep test therefore keeps the engine's internal tables (timestamps,
locks, transactions, queue, progress) in an RF 1 keyspace and only the user table in the RF 2 one, through a
key-value service that routes calls by table (the store's real seam); the deletes and the Unavailable errors
are Cassandra's own.
"""
from __future__ import annotations

import itertools
import uuid

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError, StoreUnavailableError, TableNotFoundError
from airflow_atlas.kvs import Cell, SweepStrategy, TableMetadata
from airflow_atlas.kvs.address import StoreAddress
from airflow_atlas.kvs.consistency import GcGraceGuard, Operation
from airflow_atlas.kvs.opening import open_kvs
from airflow_atlas.settings_resolver import with_address
from airflow_atlas.store import AtlasStore

fresh_timestamp = itertools.count(10**12).__next__  # above every Atlas timestamp these tests write

pytestmark = pytest.mark.cassandra

WEAK_SWEEP = (
    "consistency_sweep_delete=ONE&consistency_sentinel=ONE&consistency_abort_delete=ONE"
    "&allow_weak_sweep_consistency=true"
)


@pytest.fixture(scope="module")
def rf2_keyspace(cassandra_session):
    name = f"atlas_rf2_{uuid.uuid4().hex[:12]}"
    cassandra_session.execute(
        f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 2}}",
        timeout=120,
    )
    yield name
    cassandra_session.execute_async(f"DROP KEYSPACE IF EXISTS {name}", timeout=120)


@pytest.fixture
def rf2_url(cassandra_node, rf2_keyspace):
    host, port = cassandra_node

    def url(query: str = "") -> str:
        base = (  # a generous connect timeout: the shared node is slow to accept connections under load
            f"cassandra://{host}:{port}/{rf2_keyspace}?connect_timeout=60&consistency_data_read=ONE&consistency_data_write=ONE"
        )
        return base + ("&" + query if query else "")

    return url


@pytest.fixture
def opened():
    services = []

    def open_(url, settings=None, **kw):
        # as AtlasStore.open does: the URL's replica-safety options over the settings, resolved once
        address = StoreAddress.from_url(url)
        config = with_address(StoreConfig(**(settings or {})), address)
        kvs = open_kvs(address, consistency=config.consistency_policy(), gc_grace_guard=config.gc_grace_guard(), **kw)
        kvs.set_fresh_timestamp_supplier(fresh_timestamp)
        services.append(kvs)
        return kvs

    yield open_
    for kvs in services:
        kvs.close()


def _table(kvs, strategy=SweepStrategy.THOROUGH, **options) -> str:
    name = f"t{uuid.uuid4().hex[:16]}"
    kvs.create_table(name, TableMetadata(strategy=strategy, cassandra_options=options))
    return name


CELL = Cell(b"row", b"col")


def test_every_sweep_delete_runs_at_all_by_default(rf2_url, opened):
    kvs = opened(rf2_url())
    t = _table(kvs)
    kvs.put(t, {CELL: b"v1"}, 10)  # data_write=ONE: succeeds with one replica of two
    kvs.put(t, {CELL: b"v2"}, 20)
    assert kvs.get_all_timestamps(t, [CELL]) == {CELL: [10, 20]}
    calls = {
        "delete_all_timestamps": lambda: kvs.delete_all_timestamps(t, {CELL: (-1, 10)}),
        "add_gc_sentinels": lambda: kvs.add_gc_sentinels(t, [CELL]),
        "add_gc_sentinels_and_delete_all_timestamps": lambda: kvs.add_gc_sentinels_and_delete_all_timestamps(
            t, [CELL], {CELL: (0, 10)}
        ),
        "delete": lambda: kvs.delete(t, [(CELL, 10)]),  # abort_delete
        "delete_rows": lambda: kvs.delete_rows(t, [b"row"]),  # default: the strict level
    }
    for name, call in calls.items():
        with pytest.raises(StoreUnavailableError) as info:
            call()
        text = str(info.value)
        assert name in text and "Cannot achieve consistency level ALL" in text, text
        assert "consistency_*" in text  # says which settings decide it
    assert kvs.get_all_timestamps(t, [CELL]) == {CELL: [10, 20]}  # nothing was deleted


def test_queue_cleanup_and_queue_writes_have_their_own_levels(rf2_url, opened):
    strict = opened(rf2_url())
    t = _table(strict)
    with pytest.raises(StoreUnavailableError, match="EACH_QUORUM"):  # queue_write default EACH_QUORUM
        strict.put(t, {CELL: b"q"}, 5, operation=Operation.QUEUE_WRITE)
    strict.put(t, {CELL: b"q"}, 5)  # data_write=ONE
    with pytest.raises(StoreUnavailableError, match="LOCAL_QUORUM"):
        strict.delete_rows(t, [b"row"], operation=Operation.QUEUE_CLEANUP)
    lowered = opened(rf2_url("consistency_queue_cleanup=ONE&consistency_queue_write=ONE"))
    lowered.put(t, {Cell(b"row2", b"c"): b"q"}, 5, operation=Operation.QUEUE_WRITE)
    lowered.delete_rows(t, [b"row", b"row2"], operation=Operation.QUEUE_CLEANUP)
    with pytest.raises(StoreUnavailableError, match="consistency level ALL"):  # sweep deletes stay at ALL
        lowered.delete_all_timestamps(t, {CELL: (-1, 10)})
    assert lowered.get_all_timestamps(t, [CELL, Cell(b"row2", b"c")]) == {}


def test_weakened_sweep_levels_apply_to_every_sweep_delete(rf2_url, opened):
    kvs = opened(rf2_url(WEAK_SWEEP))
    assert kvs.consistency.sweep_delete == "ONE"
    t = _table(kvs, SweepStrategy.CONSERVATIVE)
    kvs.put(t, {CELL: b"v1"}, 10)
    kvs.put(t, {CELL: b"v2"}, 20)
    kvs.add_gc_sentinels_and_delete_all_timestamps(t, [CELL], {CELL: (0, 19)})
    assert kvs.get_all_timestamps(t, [CELL]) == {CELL: [-1, 20]}
    kvs.delete(t, [(CELL, 20)])
    kvs.delete_all_timestamps(t, {CELL: (-1, 0)})
    assert kvs.get_all_timestamps(t, [CELL]) == {}


def test_operation_names_are_checked(rf2_url, opened):
    kvs = opened(rf2_url())
    t = _table(kvs)
    with pytest.raises(InvalidInputError, match="cannot run as operation 'lwt_commit'"):
        kvs.delete(t, [(CELL, 1)], operation=Operation.LWT_COMMIT)
    with pytest.raises(InvalidInputError, match="unknown operation"):
        kvs.delete_rows(t, [b"r"], operation="cleanup")


def test_url_options_override_the_settings(rf2_url, opened):
    kvs = opened(
        rf2_url("consistency_queue_cleanup=TWO&repair_interval_seconds=3600"),
        settings={"consistency_queue_cleanup": "ONE", "consistency_serial": "LOCAL_SERIAL", "repair_interval_seconds": 60},
    )
    assert kvs.consistency.queue_cleanup == "TWO"  # the URL wins
    assert kvs.consistency.serial == "LOCAL_SERIAL"  # the settings fill in
    assert kvs.gc_grace_guard.repair_interval_seconds == 3600


# ----- the sweep: refuses at ALL with a replica down, progress unchanged --------------------------------------
class _TwoKeyspaces:
    """The store's key-value service: the user table ``table`` in ``data`` (RF 2), everything else in
    ``internal`` (RF 1). Calls are routed by their table argument."""

    def __init__(self, internal, data, table):
        self._internal, self._data, self._table = internal, data, table

    def __getattr__(self, name):
        inner, data = getattr(self._internal, name), getattr(self._data, name)
        if not callable(inner):
            return inner

        def route(*args, **kwargs):
            if name == "set_fresh_timestamp_supplier":
                data(*args, **kwargs)
                return inner(*args, **kwargs)
            first = args[0] if args else None
            if first == self._table or (name == "multi_put" and set(first) == {self._table}):
                return data(*args, **kwargs)
            if name == "multi_put":
                assert self._table not in first, "a commit mixing both keyspaces is not routed"
            return inner(*args, **kwargs)

        return route


def _store(internal_url, data_kvs, table) -> AtlasStore:
    internal = open_kvs(StoreAddress.from_url(internal_url))
    store = AtlasStore(_TwoKeyspaces(internal, data_kvs, table), StoreConfig())
    store.initialize()
    return store


def _close(store: AtlasStore) -> None:
    """What ``store.close()`` does but for the data keyspace, which ``opened`` closes: the transaction manager
    first (its latency publisher would otherwise go on writing to a closed keyspace), then the internal one."""
    if "transactions" in store.__dict__:  # built (a cached property)
        store.transactions.close()
    store.kvs._internal.close()


def test_sweep_at_all_with_a_replica_down_fails_cleanly_and_leaves_progress(cassandra_node, rf2_url, opened):
    host, port = cassandra_node
    internal_url = f"cassandra://{host}:{port}/atlas_rf1_{uuid.uuid4().hex[:12]}?create_keyspace=true&connect_timeout=60"
    table = f"t{uuid.uuid4().hex[:16]}"
    data = opened(rf2_url())
    store = _store(internal_url, data, table)
    try:
        store.create_table(table, SweepStrategy.THOROUGH)
        for value in (b"v1", b"v2", b"v3"):
            store.transactions.run(lambda txn, v=value: txn.put(table, {CELL: v}))
        versions = data.get_all_timestamps(table, [CELL])[CELL]
        assert len(versions) == 3
        shard = store.number_of_shards()
        before = [store.queue.progress.get_progress(s, SweepStrategy.THOROUGH) for s in range(shard)]
        with pytest.raises(StoreUnavailableError, match="Cannot achieve consistency level ALL"):
            for s in range(shard):
                store.sweeper.sweep_shard(s, SweepStrategy.THOROUGH)
        assert [store.queue.progress.get_progress(s, SweepStrategy.THOROUGH) for s in range(shard)] == before
        assert data.get_all_timestamps(table, [CELL])[CELL] == versions  # nothing deleted
        assert not any(lock.held for lock in store.locks.list_locks())  # the lease was released
    finally:
        _close(store)

    weak = opened(rf2_url(WEAK_SWEEP))
    store = _store(internal_url, weak, table)
    try:
        results = [store.sweeper.sweep_shard(s, SweepStrategy.THOROUGH) for s in range(shard)]
        assert all(r.status == "caught_up" for r in results), results
        after = [store.queue.progress.get_progress(s, SweepStrategy.THOROUGH) for s in range(shard)]
        assert all(a > b for a, b in zip(after, before, strict=True) if a != b) and after != before
        assert weak.get_all_timestamps(table, [CELL])[CELL] == versions[-1:]  # older versions swept
    finally:
        store.kvs._internal.session.execute_async(f"DROP KEYSPACE IF EXISTS {internal_url.split('/')[-1].split('?')[0]}")
        _close(store)


# ----- gc_grace guard -----------------------------------------------------------------------------------------
def test_swept_table_below_the_repair_interval_is_refused_before_anything_is_written(cassandra_kvs):
    name = f"g{uuid.uuid4().hex[:16]}"
    for strategy in (SweepStrategy.CONSERVATIVE, SweepStrategy.THOROUGH):
        with pytest.raises(InvalidInputError) as info:
            cassandra_kvs.create_table(name, TableMetadata(strategy=strategy, cassandra_options={"gc_grace_seconds": 0}))
        text = str(info.value)
        assert "gc_grace_seconds=0" in text and "repair_interval_seconds=864000" in text and "resurrection" in text
    assert not cassandra_kvs.table_exists(name)
    with pytest.raises(TableNotFoundError):
        cassandra_kvs.gc_grace_seconds(name)


def test_switching_a_low_grace_table_to_a_swept_strategy_is_refused(cassandra_kvs):
    name = f"g{uuid.uuid4().hex[:16]}"
    cassandra_kvs.create_table(
        name, TableMetadata(strategy=SweepStrategy.NOTHING, cassandra_options={"gc_grace_seconds": 3600})
    )
    assert cassandra_kvs.gc_grace_seconds(name) == 3600
    with pytest.raises(InvalidInputError, match="gc_grace_seconds=3600"):
        cassandra_kvs.set_sweep_strategy(name, SweepStrategy.THOROUGH)
    with pytest.raises(InvalidInputError, match="gc_grace_seconds=3600"):  # re-creating is the same switch
        cassandra_kvs.create_table(name, TableMetadata(strategy=SweepStrategy.CONSERVATIVE))
    assert cassandra_kvs.get_metadata(name).strategy is SweepStrategy.NOTHING
    # Raising the grace period (ALTER through create_table) makes it sweepable.
    cassandra_kvs.create_table(
        name, TableMetadata(strategy=SweepStrategy.CONSERVATIVE, cassandra_options={"gc_grace_seconds": 864_000})
    )
    assert cassandra_kvs.gc_grace_seconds(name) == 864_000
    assert cassandra_kvs.get_metadata(name).strategy is SweepStrategy.CONSERVATIVE
    # Lowering it again on a swept table is refused too.
    with pytest.raises(InvalidInputError, match="gc_grace_seconds=60"):
        cassandra_kvs.create_table(
            name, TableMetadata(strategy=SweepStrategy.CONSERVATIVE, cassandra_options={"gc_grace_seconds": 60})
        )
    assert cassandra_kvs.gc_grace_seconds(name) == 864_000


def test_the_guard_follows_its_settings(cassandra_session, kvs_keyspace):
    from airflow_atlas.kvs.cassandra import CassandraKeyValueService

    relaxed = CassandraKeyValueService(
        cassandra_session, kvs_keyspace, gc_grace_guard=GcGraceGuard(repair_interval_seconds=3600)
    )
    strict = CassandraKeyValueService(
        cassandra_session, kvs_keyspace, gc_grace_guard=GcGraceGuard(repair_interval_seconds=2 * 864_000)
    )
    forced = CassandraKeyValueService(
        cassandra_session, kvs_keyspace, gc_grace_guard=GcGraceGuard(allow_gc_grace_below_repair_interval=True)
    )
    a = f"g{uuid.uuid4().hex[:16]}"
    relaxed.create_table(a, TableMetadata(strategy=SweepStrategy.THOROUGH, cassandra_options={"gc_grace_seconds": 3600}))
    assert relaxed.gc_grace_seconds(a) == 3600
    # Without the option a new table gets Cassandra's default (864000), below a 20-day repair interval.
    with pytest.raises(InvalidInputError, match="gc_grace_seconds=864000"):
        strict.create_table(f"g{uuid.uuid4().hex[:16]}", TableMetadata(strategy=SweepStrategy.THOROUGH))
    b = f"g{uuid.uuid4().hex[:16]}"
    forced.create_table(b, TableMetadata(strategy=SweepStrategy.CONSERVATIVE, cassandra_options={"gc_grace_seconds": 0}))
    assert forced.gc_grace_seconds(b) == 0


def test_internal_tables_keep_their_own_options(cassandra_node):
    host, port = cassandra_node
    keyspace = f"atlas_gc_{uuid.uuid4().hex[:12]}"
    store = AtlasStore.open(f"cassandra://{host}:{port}/{keyspace}?create_keyspace=true")
    try:
        store.initialize()
        assert store.kvs.gc_grace_seconds("_open_transactions") == 0  # deliberate (registry.py)
        assert store.kvs.gc_grace_seconds("_app_latency") == 0  # deliberate: TTL'd only (latency_table.py)
        assert store.kvs.gc_grace_seconds("_sweep_cells") == 864_000
    finally:
        store.kvs.session.execute_async(f"DROP KEYSPACE IF EXISTS {keyspace}")
        store.close()
