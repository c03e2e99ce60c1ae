"""Before the sweeper rolls back a writer it found no commit entry for, it makes sure it looked in the right
place (issue 16, item 1): the other schema's table is consulted, and a batch that is nearly all writers
without an entry is refused (the rollback guard), with nothing rolled back or deleted."""
from __future__ import annotations

import dataclasses

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import RollbackRefusedError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.kvs.tables import SweepStrategy
from airflow_atlas.oracle import Reader, observe
from airflow_atlas.store import AtlasStore
from airflow_atlas.sweep.commits import RollbackGuard, resolve_commits
from airflow_atlas.transactions.service import TransactionServiceV1, make_transaction_service
from airflow_atlas.workload import dead_writer
from tests.conftest import CASSANDRA_HOST, CASSANDRA_PORT

THOROUGH = SweepStrategy.THOROUGH
CONFIG = StoreConfig(unreadable_window_seconds=0)


@pytest.fixture(params=["sqlite", pytest.param("cassandra", marks=pytest.mark.cassandra)])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'atlas.db'}"
    return f"cassandra://{CASSANDRA_HOST}:{CASSANDRA_PORT}/{request.getfixturevalue('fresh_keyspace')}"


def _store(url, **settings) -> AtlasStore:
    store = AtlasStore.open(url, dataclasses.replace(CONFIG, **settings))
    store.initialize(shards=1)
    store.create_table("t", THOROUGH)
    return store


def _committed(store, n: int, offset: int = 0) -> None:
    for i in range(n):
        store.transactions.run(lambda txn, i=i: txn.put("t", {Cell(b"c%d" % (offset + i), b"v"): b"committed"}))


def _dead(store, n: int) -> list[int]:
    return [dead_writer(store, {"t": {Cell(b"d%d" % i, b"v"): b"dead"}}) for i in range(n)]


def _visible(store) -> dict:
    reader = Reader(store.timestamps.fresh_timestamp())
    return observe(store, [reader]).views[reader]["t"]


def test_a_batch_of_writers_without_entries_is_refused_and_nothing_changes(url):
    with _store(url, rollback_guard_min_transactions=5, rollback_guard_max_fraction=0.5) as store:
        _committed(store, 3)
        dead = _dead(store, 6)
        before = _visible(store)
        with pytest.raises(RollbackRefusedError, match=r"6 of the 9 transactions.*rollback_guard_max_fraction"):
            store.sweeper.sweep_shard(0, THOROUGH)
        assert store.transaction_service.get_many(dead) == {}, "nothing may be rolled back"
        assert store.queue.progress.get_progress(0, THOROUGH) == -1
        assert _visible(store) == before


def test_dead_writers_below_the_guard_are_rolled_back_as_always(url):
    with _store(url, rollback_guard_min_transactions=5, rollback_guard_max_fraction=0.5) as store:
        _committed(store, 6)
        dead = _dead(store, 4)  # fewer than the minimum
        result = store.sweeper.sweep_shard(0, THOROUGH)
        assert result.status == "caught_up" and result.counts.transactions_aborted == 4
        assert set(store.transaction_service.get_many(dead).values()) == {-1}


def test_raising_the_guard_lets_an_operator_roll_back_a_mass_crash(url):
    with _store(url, rollback_guard_min_transactions=5, rollback_guard_max_fraction=0.5) as store:
        dead = _dead(store, 6)
    with AtlasStore.open(url, dataclasses.replace(CONFIG, rollback_guard_max_fraction=1.0)) as store:
        result = store.sweeper.sweep_shard(0, THOROUGH)
        assert result.counts.transactions_aborted == 6 and result.counts.aborted_writes_deleted == 6
        assert set(store.transaction_service.get_many(dead).values()) == {-1}


def test_a_writer_with_an_entry_in_the_other_schema_table_is_never_rolled_back(url):
    """The issue-16 loss seen from the sweeper: the writer committed in the v1 table, the store uses v2."""
    with _store(url) as store:
        dead = _dead(store, 1)[0]
        v1 = make_transaction_service(store.kvs, 1)  # a misconfigured process of the old code
        v1.put_unless_exists(dead, dead + 1)
        with pytest.raises(RollbackRefusedError, match="_transactions"):
            store.sweeper.sweep_shard(0, THOROUGH)
        assert store.transaction_service.get(dead) is None
        assert store.kvs.get_all_timestamps("t", [Cell(b"d0", b"v")]) == {Cell(b"d0", b"v"): [dead]}, "write kept"


def test_the_old_loss_is_refused_even_by_a_service_reading_the_wrong_table(url):
    """Even a sweep reading ``_transactions`` on a v2 store (what the old code did) rolls nothing back:
    the committed entries are found in ``_transactions2``."""
    with _store(url) as store:
        _committed(store, 5)
        starts = sorted({w.start_ts for w in store.queue.reader.read_batch(0, THOROUGH, -1, 2**62, 1000).entries})
        assert len(starts) == 5
        wrong = TransactionServiceV1(store.kvs)
        wrong.ensure_tables()
        with pytest.raises(RollbackRefusedError, match="_transactions2"):
            resolve_commits(wrong, starts, guard=RollbackGuard(100, 1.0))
        assert wrong.get_many(starts) == {}


def test_guard_arithmetic():
    guard = RollbackGuard(min_transactions=3, max_fraction=0.5)
    guard.check([1, 2], 2, "_t")  # below the minimum
    guard.check([1, 2, 3], 6, "_t")  # not more than half
    with pytest.raises(RollbackRefusedError):
        guard.check([1, 2, 3], 5, "_t")
    RollbackGuard(3, 1.0).check([1, 2, 3], 3, "_t")  # 1 disables


def test_a_reader_does_not_roll_back_a_writer_committed_in_the_other_table(url):
    with _store(url) as store:
        dead = _dead(store, 1)[0]
        make_transaction_service(store.kvs, 1).put_unless_exists(dead, dead + 1)
        with pytest.raises(RollbackRefusedError, match="other transactions schema version"):
            store.transactions.run(lambda txn: txn.get("t", [Cell(b"d0", b"v")]), retries=0)
        assert store.transaction_service.get(dead) is None
