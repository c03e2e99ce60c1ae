"""Fixtures of the transaction-layer suite: a real store per backend (SQLite file, Cassandra node).

``kvs`` is parametrized over both backends. SQLite gets a new file per test. Cassandra shares one keyspace
of this suite's own for the session (tests use unique table names, lock names and timestamps from the shared
timestamp service), except ``clean_kvs``, which gets a new keyspace for tests that need empty internal
tables (the registry and the punch table are single rows). ``kvs_url`` lets child processes open the same
store. ``clock`` is a :class:`FakeClock` for the services that take one (locks, registry, punch table).
"""
from __future__ import annotations

import threading
import uuid

import pytest

from airflow_atlas.kvs.tables import SweepStrategy, TableMetadata, WriteMode
from airflow_atlas.transactions.manager import TransactionConfig, TransactionManager
from tests.conftest import CASSANDRA_HOST, CASSANDRA_PORT

BACKENDS = ["sqlite", pytest.param("cassandra", marks=pytest.mark.cassandra)]


def _cassandra_kvs(keyspace: str):
    from airflow_atlas.kvs.cassandra import CassandraKeyValueService

    return CassandraKeyValueService.connect([CASSANDRA_HOST], port=CASSANDRA_PORT, keyspace=keyspace)


def _new_keyspace(session) -> str:
    name = f"atlas_txn_{uuid.uuid4().hex[:12]}"
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    return name


def _drop_keyspace(session, name: str) -> None:
    """Ask the node to drop the keyspace without waiting long for it: dropping dozens of tables takes
    seconds on a busy node, and the node finishes the drop on its own."""
    done = threading.Event()
    try:
        future = session.execute_async(f"DROP KEYSPACE IF EXISTS {name}", timeout=120)
        future.add_callbacks(lambda _: done.set(), lambda _: done.set())
    except Exception:  # the node is throwaway; a failed drop must not fail the suite
        return
    done.wait(2.0)


@pytest.fixture(scope="session")
def txn_keyspace(cassandra_session):
    name = _new_keyspace(cassandra_session)
    yield name
    _drop_keyspace(cassandra_session, name)


@pytest.fixture(scope="session")
def cassandra_txn_kvs(txn_keyspace):
    kvs = _cassandra_kvs(txn_keyspace)
    yield kvs
    kvs.close()


@pytest.fixture
def sqlite_txn_kvs(tmp_path):
    from airflow_atlas.kvs.sqlite import SqliteKeyValueService

    kvs = SqliteKeyValueService(str(tmp_path / "atlas.db"))
    yield kvs
    kvs.close()


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def kvs(backend, request):
    return request.getfixturevalue(f"{backend}_txn_kvs")


@pytest.fixture
def kvs_url(backend, request, tmp_path) -> str:
    """URL of the store ``kvs`` points at, for child processes."""
    if backend == "sqlite":
        request.getfixturevalue("sqlite_txn_kvs")
        return f"sqlite:///{tmp_path / 'atlas.db'}"
    keyspace = request.getfixturevalue("txn_keyspace")
    return f"cassandra://{CASSANDRA_HOST}:{CASSANDRA_PORT}/{keyspace}"


@pytest.fixture
def clean_kvs(backend, request):
    """A store with no internal tables yet (new SQLite file / new Cassandra keyspace)."""
    if backend == "sqlite":
        yield request.getfixturevalue("sqlite_txn_kvs")
        return
    session = request.getfixturevalue("cassandra_session")
    keyspace = _new_keyspace(session)
    kvs = _cassandra_kvs(keyspace)
    yield kvs
    kvs.close()
    _drop_keyspace(session, keyspace)


@pytest.fixture
def make_table(kvs):
    """``make_table(strategy) -> name`` of a new LOGICAL user table."""

    def make(strategy: SweepStrategy = SweepStrategy.CONSERVATIVE, mode: WriteMode = WriteMode.LOGICAL) -> str:
        name = f"t{uuid.uuid4().hex[:16]}"
        kvs.create_table(name, TableMetadata(strategy=strategy, write_mode=mode))
        return name

    return make


FAST = TransactionConfig(
    lease_seconds=30.0,
    punch_interval_seconds=0.0,
    running_writer_wait_seconds=0.5,
    retry_backoff_seconds=0.005,
)


@pytest.fixture
def make_manager(kvs):
    """``make_manager(**config overrides, sweep_queue=..., scrub_queue=..., clock=..., margin=...)``."""

    def make(*, sweep_queue=None, scrub_queue=None, clock=None, margin=0.2, holder="test", **overrides):
        import dataclasses
        import time

        config = dataclasses.replace(FAST, **overrides)
        return TransactionManager.create(
            kvs,
            config=config,
            sweep_queue=sweep_queue,
            scrub_queue=scrub_queue,
            clock=clock or time.time,
            holder=holder,
            registry_margin_seconds=margin,
        )

    return make


@pytest.fixture
def manager(make_manager):
    return make_manager()


class FakeClock:
    """A clock the test moves by hand (``clock.now += 5``): the ``clock`` callable of the lock service, the
    registry, the punch table and the transaction manager. Seconds since the epoch."""

    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
