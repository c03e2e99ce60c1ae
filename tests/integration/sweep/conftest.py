"""Fixtures of the sweep safety suite: a ``store`` on the embedded SQLite backend (a new file per test)
and on the real Cassandra node (one keyspace for this whole directory, created once: keyspace and table
creation cost about a second each there, much more on a loaded node), and a ``harness`` (see helpers.py)
around it.

Tests sharing the Cassandra keyspace stay independent: every test makes its own tables (random names), the
harness closes what a test left open and sweeps everything queued before the test starts (``drain``), and
assertions about progress and leaks hold for the whole keyspace anyway.
"""
from __future__ import annotations

import time
import uuid

import pytest

from .helpers import Harness, open_store


def _sqlite_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("atlas") / f"{uuid.uuid4().hex[:8]}.db"
    return open_store(f"sqlite:///{path}")


@pytest.fixture(scope="package")
def cassandra_shared_store(cassandra_node):
    host, port = cassandra_node
    keyspace = f"atlas_sweep_{uuid.uuid4().hex[:12]}"
    store, clock = open_store(f"cassandra://{host}:{port}/{keyspace}")
    yield store, clock
    try:
        # Dropping a keyspace of ~100 tables takes many seconds on a busy node: let the node do it
        # after the suite (the request is sent at once; the node finishes it after we disconnect).
        store.kvs.session.execute_async(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
        time.sleep(0.5)
    except Exception:  # the node is throwaway; a failed drop must not fail the suite
        pass
    store.close()


@pytest.fixture(params=["sqlite", pytest.param("cassandra", marks=pytest.mark.cassandra)])
def backend(request):
    return request.param


@pytest.fixture
def harness(backend, request, tmp_path_factory):
    if backend == "sqlite":
        store, clock = _sqlite_store(tmp_path_factory)
        h = Harness(store, clock, backend)
        yield h
        h.close_all()
        store.close()
    else:
        store, clock = request.getfixturevalue("cassandra_shared_store")
        h = Harness(store, clock, backend)
        h.drain()
        yield h
        h.close_all()


@pytest.fixture
def store(harness):
    return harness.store


@pytest.fixture
def new_harness(backend, request, tmp_path_factory):
    """A factory of harnesses for tests that run several independent histories (hypothesis examples,
    two stores compared): on SQLite each gets a new file; on Cassandra each shares the keyspace
    and starts drained."""
    made = []

    def make(replace: bool = False) -> Harness:
        while replace and made:  # one history at a time: close the previous ones (hypothesis runs hundreds)
            old, own = made.pop()
            old.close_all()
            if own:
                old.store.close()
        if backend == "sqlite":
            store, clock = _sqlite_store(tmp_path_factory)
            h = Harness(store, clock, backend)
            made.append((h, True))
        else:
            store, clock = request.getfixturevalue("cassandra_shared_store")
            h = Harness(store, clock, backend)
            h.drain()
            made.append((h, False))
        return h

    yield make
    for h, own in made:
        h.close_all()
        if own:
            h.store.close()
