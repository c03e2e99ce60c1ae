"""Opening a session on the real node: a node that times out is tried again with a new Cluster, anything
else fails at once (airflow_atlas/kvs/cassandra/connection.py).

The timeout is a real one: a loopback TCP server that accepts connections and never answers, which is what
the driver sees from a node stalled in a GC pause or a compaction burst. Nothing is mocked: the factories
build real driver Clusters.
"""
from __future__ import annotations

import socket
import threading
import time

import pytest

from airflow_atlas.errors import StoreUnavailableError
from airflow_atlas.kvs import Cell, SweepStrategy, TableMetadata, Value
from airflow_atlas.kvs.cassandra import CassandraKeyValueService
from airflow_atlas.kvs.cassandra.connection import open_session, timed_out

pytestmark = pytest.mark.cassandra


@pytest.fixture
def silent_port():
    """A loopback port whose server accepts every connection and never sends a byte."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(conn)  # held open, never answered

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(5)
    for conn in accepted:
        conn.close()
    server.close()


@pytest.fixture
def closed_port():
    """A loopback port nothing listens on (connections are refused)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def _cluster(port: int, timeout: float = 0.5):
    from cassandra.cluster import Cluster

    return Cluster(["127.0.0.1"], port=port, protocol_version=5, connect_timeout=timeout, control_connection_timeout=timeout)


class CountingFactory:
    """A cluster factory that returns the Clusters of ``ports`` in turn (the last one from then on) and keeps
    what it built; ``node`` is the real node's port."""

    def __init__(self, *ports: int, node: int | None = None):
        self.ports = list(ports)
        self.node = node
        self.built: list = []

    def __call__(self):
        port = self.ports[min(len(self.built), len(self.ports) - 1)]
        # A silent port times out at once; the real node (``node``) gets the driver's default timeouts: on a
        # loaded 2-core machine its control connection's schema read can take longer than half a second.
        cluster = _cluster(port, timeout=10 if port == self.node else 0.5)
        self.built.append(cluster)
        return cluster


def test_a_node_that_times_out_is_tried_again_with_a_new_cluster(cassandra_node, fresh_keyspace, silent_port):
    _, node_port = cassandra_node
    factory = CountingFactory(silent_port, node_port, node=node_port)
    kvs = CassandraKeyValueService(factory, fresh_keyspace)
    try:
        assert len(factory.built) == 2
        first, second = factory.built
        assert first.is_shutdown  # the timed-out Cluster is not leaked
        assert kvs.cluster is second and not second.is_shutdown
        kvs.create_table("t", TableMetadata(strategy=SweepStrategy.THOROUGH))
        kvs.put("t", {Cell(b"row", b"col"): b"v"}, 5)
        assert kvs.get("t", {Cell(b"row", b"col"): 6}) == {Cell(b"row", b"col"): Value(5, b"v")}
    finally:
        kvs.close()


def test_a_refused_connection_fails_at_once(closed_port):
    factory = CountingFactory(closed_port)
    with pytest.raises(StoreUnavailableError) as failure:
        CassandraKeyValueService(factory, "atlas_never_opened")
    assert len(factory.built) == 1  # no second attempt: waiting does not make a refusal succeed
    assert factory.built[0].is_shutdown
    assert "connect" in str(failure.value)


def test_the_last_timeout_is_raised_after_every_attempt(silent_port):
    factory = CountingFactory(silent_port)
    started = time.monotonic()
    with pytest.raises(Exception) as failure:
        open_session(factory, attempts=3, pause=0.05)
    assert len(factory.built) == 3 and all(c.is_shutdown for c in factory.built)
    assert timed_out(failure.value)
    assert time.monotonic() - started < 30  # three short attempts, not the driver's defaults


def test_our_own_clusters_give_the_control_connection_the_connect_timeout(cassandra_node, fresh_keyspace):
    host, port = cassandra_node
    kvs = CassandraKeyValueService.connect([host], keyspace=fresh_keyspace, port=port, connect_timeout=7.5, create_keyspace=False)
    try:
        assert kvs.cluster.connect_timeout == 7.5
        assert kvs.cluster.control_connection_timeout == 7.5  # the driver's default is 2 s
    finally:
        kvs.close()


def test_attempts_must_be_positive():
    with pytest.raises(ValueError, match="attempts"):
        open_session(lambda: None, attempts=0)
