"""Fixtures of the sweep-queue integration tests: a real key-value store of each backend with the three
queue tables and a counter as fresh-timestamp supplier (starting at 10**12, above every start timestamp
the tests write, so queue-row deletes always cover what they delete).

* SQLite: a new store file per test.
* Cassandra: one keyspace for this package (created and dropped here), the queue tables truncated
  before each test.
"""
from __future__ import annotations

import itertools
import uuid

import pytest

from airflow_atlas.sweep.queue.queue_tables import QUEUE_TABLES
from airflow_atlas.sweep.queue.sweep_queue import SweepQueue, ensure_queue_tables
from tests.conftest import drop_keyspaces_soon

FRESH_TS_START = 10**12


def _counter_supplier():
    counter = itertools.count(FRESH_TS_START)
    return lambda: next(counter)


@pytest.fixture(scope="session")
def sweep_queue_cassandra_kvs(cassandra_node, cassandra_session):
    from airflow_atlas.kvs.cassandra import CassandraKeyValueService

    host, port = cassandra_node
    keyspace = f"atlas_sq_{uuid.uuid4().hex[:12]}"
    kvs = CassandraKeyValueService.connect([host], port=port, keyspace=keyspace, create_keyspace=True)
    kvs.set_fresh_timestamp_supplier(_counter_supplier())
    ensure_queue_tables(kvs)
    yield kvs
    kvs.close()
    drop_keyspaces_soon(cassandra_session, [keyspace], wait_seconds=0.3)  # the node finishes it on its own


@pytest.fixture(params=["sqlite", pytest.param("cassandra", marks=pytest.mark.cassandra)])
def kvs(request, tmp_path):
    """A key-value store with empty queue tables."""
    if request.param == "sqlite":
        from airflow_atlas.kvs.sqlite import SqliteKeyValueService

        store = SqliteKeyValueService(tmp_path / "store.db")
        store.set_fresh_timestamp_supplier(_counter_supplier())
        ensure_queue_tables(store)
        yield store
        store.close()
    else:
        store = request.getfixturevalue("sweep_queue_cassandra_kvs")
        for table in QUEUE_TABLES:
            store.truncate_table(table)
        yield store


STRATEGIES = {"t_cons": "CONSERVATIVE", "t_cons2": "CONSERVATIVE", "t_thor": "THOROUGH", "t_none": "NOTHING"}


@pytest.fixture
def queue(kvs):
    """A SweepQueue whose table strategies come from STRATEGIES (no user tables needed)."""
    return SweepQueue(kvs, strategy_of=lambda table: STRATEGIES[table])
