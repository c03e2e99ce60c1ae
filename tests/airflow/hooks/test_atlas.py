"""AtlasHook: connection parsing with real Airflow Connection objects (StoreAddress.from_connection), and real
stores behind env-var connections (embedded file, and Cassandra opened by the engine from the address)."""
from __future__ import annotations

import json

import pytest

from airflow_atlas.airflow.hooks.atlas import AtlasHook, describe_connection, store_url
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.address import StoreAddress


def conn(conn_id="c", **fields):
    from airflow.sdk import Connection

    return Connection.from_json(json.dumps(fields), conn_id=conn_id)


def uri_conn(uri, conn_id="c"):
    from airflow.sdk import Connection

    return Connection.from_uri(uri, conn_id=conn_id)


def test_cassandra_connection_is_read_like_the_provider_does():
    c = conn(
        conn_type="cassandra",
        host="10.0.0.1, 10.0.0.2",
        port=9142,
        schema="atlas",
        login="sweeper",
        password="s3cret-pass",
        extra={
            "ssl_options": {"ca_certs": "/etc/ca.pem"},
            "load_balancing_policy": "DCAwareRoundRobinPolicy",
            "load_balancing_policy_args": {"local_dc": "dc1"},
            "protocol_version": 4,
            "create_keyspace": "true",
            "replication_factor": 3,
        },
    )
    info = describe_connection(c)
    assert info == {
        "conn_id": "c",
        "backend": "cassandra",
        "hosts": ["10.0.0.1", "10.0.0.2"],
        "port": 9142,
        "keyspace": "atlas",
        "authenticated": True,
        "ssl": True,
        "ssl_ca": "/etc/ca.pem",
        "ssl_verify": True,
        "protocol_version": 4,
        "create_keyspace": True,
        "replication_factor": 3,
        "datacenter": "dc1",  # the policy's local_dc: the datacenter the store routes to (and Spark gets)
    }
    assert "s3cret" not in json.dumps(info)
    url = store_url(c)
    assert url.startswith("cassandra://sweeper:s3cret-pass@10.0.0.1,10.0.0.2:9142/atlas?")
    assert "protocol_version=4" in url and "ssl=true" in url and "ssl_ca=%2Fetc%2Fca.pem" in url and "datacenter=dc1" in url


def test_cassandra_defaults_and_uri_form():
    info = describe_connection(uri_conn("cassandra://h1:9042/ks"))
    assert info["hosts"] == ["h1"] and info["keyspace"] == "ks" and info["protocol_version"] == 5
    assert info["authenticated"] is False and info["create_keyspace"] is False and info["datacenter"] is None


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"conn_type": "cassandra", "host": "h1"}, "names no keyspace"),
        ({"conn_type": "cassandra", "schema": "ks"}, "names no host"),
        ({"conn_type": "cassandra", "host": "h", "schema": "Bad-Keyspace"}, "invalid keyspace"),
        ({"conn_type": "cassandra", "host": "h", "schema": "ks", "extra": {"create_keyspace": "maybe"}}, "create_keyspace"),
        ({"conn_type": "atlas_embedded"}, "names no database file"),
        ({"conn_type": "atlas_embedded", "host": "relative/atlas.db"}, "must be absolute"),
        ({"conn_type": "postgres", "host": "h"}, "an Atlas store connection is of type"),
    ],
)
def test_bad_connections_are_rejected_clearly(fields, message):
    with pytest.raises(InvalidInputError, match=message):
        describe_connection(conn(**fields))


def embedded_path(c) -> str | None:
    return StoreAddress.from_connection(c).path


def test_embedded_connection_forms():
    assert embedded_path(conn(conn_type="atlas_embedded", host="/var/atlas.db")) == "/var/atlas.db"
    assert embedded_path(conn(conn_type="atlas_embedded", extra={"path": "/x/y.db"})) == "/x/y.db"
    assert embedded_path(conn(conn_type="atlas_embedded", extra={"extra__atlas_embedded__path": "/ui/form.db"})) == "/ui/form.db"
    assert embedded_path(uri_conn("atlas-embedded:///abs/dir/atlas.db")) == "/abs/dir/atlas.db"
    assert store_url(conn(conn_type="atlas_embedded", host="/var/a b.db")) == "sqlite:////var/a%20b.db"


@pytest.mark.airflow
def test_hook_opens_the_embedded_store_from_an_env_connection(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_CONN_ATLAS_HOOK_EMB", json.dumps({"conn_type": "atlas_embedded", "host": str(tmp_path / "a.db")}))
    with AtlasHook("atlas_hook_emb") as hook:
        store = hook.get_store()
        store.initialize(shards=3)
        assert store.kvs.backend == "sqlite" and store.number_of_shards() == 3
        assert hook.get_conn() is store
        assert hook.describe()["path"] == str(tmp_path / "a.db")
    ok, message = AtlasHook("atlas_hook_emb").test_connection()
    assert ok and "3 shard(s)" in message
    ok, message = AtlasHook("atlas_hook_missing").test_connection()
    assert not ok


def _sockets_to(host: str, port: int) -> list:
    """Duplicates of this process's TCP sockets connected to ``host:port`` (read from ``/proc/self/fd`` with
    public socket calls, not through the driver's private attributes)."""
    import os
    import socket

    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            dup = os.dup(int(name))
        except OSError:
            continue
        try:
            sock = socket.socket(fileno=dup)
        except OSError:
            os.close(dup)
            continue
        try:
            peer = sock.getpeername() if sock.type == socket.SOCK_STREAM else None
        except OSError:
            peer = None
        if peer is not None and peer[:2] == (socket.gethostbyname(host), int(port)):
            found.append(sock)
        else:
            sock.close()
    return found


@pytest.mark.airflow
@pytest.mark.cassandra
def test_hook_opens_cassandra_from_the_connections_address(monkeypatch, cassandra_node, fresh_keyspace):
    import warnings

    host, port = cassandra_node
    monkeypatch.setenv(
        "AIRFLOW_CONN_ATLAS_HOOK_CAS",
        json.dumps({"conn_type": "cassandra", "host": host, "port": port, "schema": fresh_keyspace,
                    "extra": {"load_balancing_policy": "TokenAwarePolicy"}}),
    )
    before = set()
    for s in _sockets_to(host, port):
        before.add(s.getsockname())
        s.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # no legacy driver parameter on the way
        with AtlasHook("atlas_hook_cas") as hook:
            store = hook.get_store()
            store.initialize(shards=2)
            assert store.kvs.backend == "cassandra" and store.kvs.keyspace == fresh_keyspace
            assert store.number_of_shards() == 2
            cluster = store.kvs.cluster
            assert cluster.protocol_version == 5
            assert type(cluster.load_balancing_policy).__name__ == "TokenAwarePolicy"
            # The Cluster gets TCP_NODELAY (Nagle made a 100-write commit ~2x slower).
            import socket

            assert (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1) in cluster.sockopts
            # The Cluster's open connections, seen through this process's fds (those the fixtures opened before
            # are not the hook's).
            live = [s for s in _sockets_to(host, port) if s.getsockname() not in before]
            assert live and all(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0 for s in live)
            for s in live:
                s.close()  # our duplicates only
        assert cluster.is_shutdown  # closing the hook shuts the Cluster down


@pytest.mark.airflow
@pytest.mark.cassandra
def test_hook_with_a_missing_keyspace_says_so(monkeypatch, cassandra_node):
    host, port = cassandra_node
    monkeypatch.setenv("AIRFLOW_CONN_ATLAS_HOOK_NOKS", json.dumps({"conn_type": "cassandra", "host": host, "port": port, "schema": "no_such_ks_here"}))
    ok, message = AtlasHook("atlas_hook_noks").test_connection()
    assert not ok and "no_such_ks_here" in message
