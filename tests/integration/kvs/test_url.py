"""StoreAddress.from_url + open_kvs / redact_url: URL parsing, refusals that never echo a password, and real opens."""
from __future__ import annotations

import os
import uuid

import pytest

from airflow_atlas.errors import InvalidInputError, StoreUnavailableError
from airflow_atlas.kvs import Cell, StoreAddress, TableMetadata, Value, redact_url
from airflow_atlas.kvs import open_kvs as open_address

SECRET = "s3cr3t-Pa55"


def open_kvs(url, **opts):
    """The key-value service a URL names: parsed once into a StoreAddress, then opened."""
    return open_address(StoreAddress.from_url(url), **opts)


@pytest.mark.parametrize(
    "url, expected",
    [
        (f"cassandra://atlas:{SECRET}@h1,h2:9042/ks", "cassandra://atlas:***@h1,h2:9042/ks"),
        (f"cassandra://atlas:{SECRET}@h1/ks?ssl=true", "cassandra://atlas:***@h1/ks?ssl=true"),
        ("cassandra://atlas@h1/ks", "cassandra://atlas@h1/ks"),
        ("cassandra://h1/ks", "cassandra://h1/ks"),
        (f"cassandra://u:{SECRET}@h1/ks?password={SECRET}&x=1", "cassandra://u:***@h1/ks?password=***&x=1"),
        ("sqlite:////tmp/a.db", "sqlite:////tmp/a.db"),
        (None, "<not a URL>"),
    ],
)
def test_redact_url(url, expected):
    assert redact_url(url) == expected


BAD_URLS = [
    ("", "required"),
    ("   ", "required"),
    ("memory", "in-memory"),
    ("memory://", "in-memory"),
    ("sqlite://", "sqlite URL needs a database file path"),
    ("sqlite:///", "needs a database file path"),
    ("sqlite:///:memory:", "in-memory"),
    ("sqlite://host/db.sqlite", "no host"),
    ("sqlite:///a.db?journal=wal", "unknown URL option"),
    ("sqlite:///a.db#frag", "fragment"),
    ("mysql://u:p@h/db", "unsupported"),
    (f"atlas:{SECRET}@h1/ks", "no scheme"),
    (f"cassandra://atlas:{SECRET}@/ks", "no host"),
    (f"cassandra://atlas:{SECRET}@h1", "no keyspace"),
    (f"cassandra://atlas:{SECRET}@h1/", "no keyspace"),
    (f"cassandra://atlas:{SECRET}@h1/ks/extra", "exactly one keyspace"),
    (f"cassandra://atlas:{SECRET}@h1/Bad-Keyspace", "invalid keyspace"),
    (f"cassandra://atlas:{SECRET}@h1:port/ks", "not a number"),
    (f"cassandra://atlas:{SECRET}@h1:70000/ks", "outside"),
    (f"cassandra://atlas:{SECRET}@h1:9042,h2:9043/ks", "different ports"),
    (f"cassandra://atlas:{SECRET}@h1,,h2/ks", "not a valid host"),
    (f"cassandra://atlas:{SECRET}@h1;drop/ks", "not a valid host"),
    (f"cassandra://atlas:{SECRET}@[zz::1]/ks", "IPv6"),
    (f"cassandra://:{SECRET}@h1/ks", "without a user name"),
    (f"cassandra://atlas:{SECRET}@h1/ks?replication_factor=two", "integer"),
    (f"cassandra://atlas:{SECRET}@h1/ks?ssl=maybe", "true or false"),
    (f"cassandra://atlas:{SECRET}@h1/ks?ssl_verify=false", "need ssl=true"),
    (f"cassandra://atlas:{SECRET}@h1/ks?consistency=ALL", "unknown URL option"),
    (f"cassandra://atlas:{SECRET}@h1/ks?protocol_version=5&protocol_version=4", "given twice"),
    (f"cassandra://atlas:{SECRET}@h1/ks?protocol_version=9", "protocol_version"),
    (f"cassandra://atlas:{SECRET}@h1/ks?replication_factor=0", "replication_factor"),
    (f"cassandra://atlas:{SECRET}@h1/ks?ssl=true&ssl_ca=/nonexistent/ca.pem", "CA file"),
]


@pytest.mark.parametrize("url, problem", BAD_URLS, ids=[u for u, _ in BAD_URLS])
def test_bad_urls_are_refused_without_echoing_the_password(url, problem):
    with pytest.raises(InvalidInputError, match=problem) as info:
        open_kvs(url)
    assert SECRET not in str(info.value)


def test_sqlite_urls_follow_the_sqlalchemy_convention(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    relative = open_kvs("sqlite:///sub/rel.db")  # three slashes: relative to the current directory
    assert relative.path == str(tmp_path / "sub" / "rel.db")
    absolute_path = tmp_path / "abs" / "x.db"
    absolute = open_kvs(f"sqlite:///{absolute_path}?busy_timeout_ms=5000&synchronous=full")  # four slashes
    assert absolute.path == str(absolute_path) and os.path.isabs(absolute.path)
    assert absolute.backend == relative.backend == "sqlite"
    absolute.create_table("t")
    absolute.put("t", {Cell(b"r", b"c"): b"v"}, 1)
    assert absolute.get_latest("t", [Cell(b"r", b"c")]) == {Cell(b"r", b"c"): Value(1, b"v")}
    spaced = open_kvs(f"sqlite:///{tmp_path}/with%20space.db")
    assert spaced.path == str(tmp_path / "with space.db")
    for kvs in (relative, absolute, spaced):
        kvs.close()


def test_open_kvs_passes_options_to_the_backend(tmp_path):
    open_kvs(f"sqlite:///{tmp_path}/o.db", busy_timeout_ms=1234).close()
    with pytest.raises(InvalidInputError, match="busy_timeout_ms"):  # the backend checked the option it got
        open_kvs(f"sqlite:///{tmp_path}/o.db", busy_timeout_ms=-1)
    with pytest.raises(TypeError):
        open_kvs(f"sqlite:///{tmp_path}/o.db", no_such_option=1)


def test_unreachable_cassandra_url_is_store_unavailable_without_password():
    url = f"cassandra://atlas:{SECRET.replace('-', '%2D')}@127.0.0.1:1/ks?connect_timeout=2&create_keyspace=false"
    with pytest.raises(StoreUnavailableError) as info:
        open_kvs(url)
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)


@pytest.mark.cassandra
def test_cassandra_url_opens_the_keyspace(cassandra_node, kvs_keyspace):
    host, port = cassandra_node
    kvs = open_kvs(
        f"cassandra://{host}:{port}/{kvs_keyspace}?replication_factor=1&protocol_version=5&page_size=10"
    )
    try:
        assert kvs.backend == "cassandra" and kvs.keyspace == kvs_keyspace and kvs.page_size == 10
        name = f"_probe{uuid.uuid4().hex[:8]}"
        kvs.create_table(name, TableMetadata())
        assert name in kvs.list_tables()
        assert kvs_keyspace in kvs.describe()
    finally:
        kvs.close()
