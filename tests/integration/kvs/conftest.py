"""Fixtures of the key-value contract suite: one ``kvs`` fixture, parametrized over both backends.

The Cassandra backend runs on the session's real node and keyspace (tests/conftest.py); the SQLite backend
on a file in the test's temporary directory. Every test makes its own tables (uuid names), so nothing is
shared between tests except the Cassandra keyspace.
"""
from __future__ import annotations

import itertools
import threading
import uuid

import pytest

from airflow_atlas.kvs import SweepStrategy, TableMetadata, WriteMode

# The real timestamp service is written elsewhere; for the store a strictly increasing counter above every
# Atlas timestamp the tests write is exactly what spec 002 needs.
_FRESH = itertools.count(10**12)

CASSANDRA_PAGE_SIZE = 50  # small, so wide-row and scan tests cross page boundaries


def fresh_timestamp() -> int:
    return next(_FRESH)


@pytest.fixture
def fresh():
    """The stores' supplier of fresh timestamps (a test draws one to compare write times with)."""
    return fresh_timestamp


@pytest.fixture(scope="session")
def kvs_keyspace(cassandra_session):
    """This suite's own keyspace. Dropped at the end without waiting for the node to finish: dropping
    dozens of tables takes many seconds on a busy node, which finishes the drop on its own."""
    name = f"atlas_kvs_{uuid.uuid4().hex[:12]}"
    cassandra_session.execute(
        f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}",
        timeout=120,
    )
    yield name
    done = threading.Event()
    try:
        future = cassandra_session.execute_async(f"DROP KEYSPACE IF EXISTS {name}", timeout=120)
        future.add_callbacks(lambda _: done.set(), lambda _: done.set())
    except Exception:  # the node is throwaway; a failed drop must not fail the suite
        return
    done.wait(2.0)


@pytest.fixture(scope="session")
def cassandra_kvs(cassandra_session, kvs_keyspace):
    from airflow_atlas.kvs.cassandra import CassandraKeyValueService

    kvs = CassandraKeyValueService(cassandra_session, kvs_keyspace, page_size=CASSANDRA_PAGE_SIZE, concurrency=64)
    kvs.set_fresh_timestamp_supplier(fresh_timestamp)
    yield kvs
    kvs.close()


@pytest.fixture
def sqlite_kvs(tmp_path):
    from airflow_atlas.kvs.sqlite import SqliteKeyValueService

    kvs = SqliteKeyValueService(str(tmp_path / "atlas.db"))
    kvs.set_fresh_timestamp_supplier(fresh_timestamp)
    yield kvs
    kvs.close()


@pytest.fixture(params=["sqlite", pytest.param("cassandra", marks=pytest.mark.cassandra)])
def kvs(request):
    return request.getfixturevalue(f"{request.param}_kvs")


@pytest.fixture
def make_table(kvs):
    """``make_table(mode=..., strategy=..., **cassandra_options) -> name`` of a new, empty table."""

    def make(mode: WriteMode = WriteMode.LOGICAL, strategy=SweepStrategy.CONSERVATIVE, prefix="t", **options):
        name = f"{prefix}{uuid.uuid4().hex[:16]}"
        kvs.create_table(name, TableMetadata(strategy=strategy, write_mode=mode, cassandra_options=options))
        return name

    return make
