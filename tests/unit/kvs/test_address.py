"""StoreAddress (airflow_atlas/kvs/address.py): parsed once from a URL or a connection, written back whole for
Spark, never showing its password; bad input refused naming the option. Pure logic: no store is opened.

The connections are duck-typed stand-ins with the attributes of ``airflow.sdk.Connection`` (the engine reads
only those); tests/airflow/hooks/test_atlas.py reads real Airflow Connection objects."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.address import StoreAddress

SECRET = "s3cr3t/Pa@55?#"  # needs percent-encoding, and holds what a URL parser splits at


@dataclass
class Conn:
    conn_type: str
    host: str | None = None
    port: int | None = None
    schema: str | None = None
    login: str | None = None
    password: str | None = None
    extra_dejson: dict[str, Any] = field(default_factory=dict)
    conn_id: str = "c"


ROUND_TRIPS = [
    "sqlite:///relative/atlas.db",
    "sqlite:////var/lib/atlas/a%20b.db?busy_timeout_ms=5000&synchronous=FULL",
    "cassandra://h1/ks",
    "cassandra://user@h1,h2:9142/ks?page_size=10",
    "cassandra://user:s3cr3t%2FPa%4055%3F%23@h1/ks?protocol_version=4&create_keyspace=false&replication_factor=3"
    "&datacenter=dc1&ssl=true&ssl_ca=%2Fetc%2Fca.pem&ssl_verify=false&connect_timeout=2.5&request_timeout=30.0"
    "&concurrency=8&page_size=100",
    "cassandra://[::1]:9042/ks?consistency_sweep_delete=QUORUM&allow_weak_sweep_consistency=true",
]


@pytest.mark.parametrize("url", ROUND_TRIPS)
def test_from_url_to_url_round_trip(url):
    address = StoreAddress.from_url(url)
    assert StoreAddress.from_url(address.to_url()) == address
    assert address.to_url() == url  # written as given: the option order is the one to_url uses


def test_options_are_typed_and_settings_kept_apart():
    a = StoreAddress.from_url(ROUND_TRIPS[4])
    assert (a.backend, a.hosts, a.port, a.keyspace, a.username, a.password) == ("cassandra", ("h1",), None, "ks", "user", SECRET)
    assert (a.protocol_version, a.create_keyspace, a.replication_factor, a.ssl, a.ssl_verify) == (4, False, 3, True, False)
    assert (a.connect_timeout, a.concurrency, a.settings) == (2.5, 8, ())
    b = StoreAddress.from_url(ROUND_TRIPS[5])
    assert b.hosts == ("::1",) and b.settings == (("consistency_sweep_delete", "QUORUM"), ("allow_weak_sweep_consistency", "true"))
    assert b.settings_source == "the store URL" and b.without_settings().to_url() == "cassandra://[::1]:9042/ks"


def test_the_password_is_never_shown():
    a = StoreAddress.from_url(ROUND_TRIPS[4])
    for text in (repr(a), str(a), a.redacted(), repr([a]), str(a.describe())):
        assert "s3cr3t" not in text and "Pa" not in text.replace("Pa@", ""), text
    assert a.redacted().startswith("cassandra://user:***@h1/ks?")
    assert SECRET in a.to_url() or "s3cr3t%2FPa%4055%3F%23" in a.to_url()  # Spark's copy is whole
    assert "s3cr3t" not in a.scrub(f"failed to reach {a.to_url()} with {SECRET}")


def test_a_connection_is_the_same_address_as_the_url_of_the_same_options():
    c = Conn("cassandra", host="h1, h2", port=9142, schema="ks", login="user", password=SECRET,
             extra_dejson={"ssl_options": {"ca_certs": "/etc/ca.pem"}, "protocol_version": 4,
                           "load_balancing_policy": "DCAwareRoundRobinPolicy",
                           "load_balancing_policy_args": {"local_dc": "dc1"},
                           "create_keyspace": "true", "replication_factor": 3, "page_size": "100"})
    from_connection = StoreAddress.from_connection(c)
    url = ("cassandra://user:s3cr3t%2FPa%4055%3F%23@h1,h2:9142/ks?protocol_version=4&create_keyspace=true"
           "&replication_factor=3&datacenter=dc1&ssl=true&ssl_ca=/etc/ca.pem&page_size=100")
    assert from_connection == StoreAddress.from_url(url)
    assert StoreAddress.from_url(from_connection.to_url()) == from_connection
    # the defaults of a connection are written out (what Spark gets), the same as the URL of those options
    bare = StoreAddress.from_connection(Conn("cassandra", host="h1", schema="ks"))
    assert bare == StoreAddress.from_url("cassandra://h1:9042/ks?protocol_version=5&create_keyspace=false&replication_factor=1")
    embedded = StoreAddress.from_connection(Conn("atlas_embedded", host="/var/a b.db"))
    assert embedded == StoreAddress.from_url("sqlite:////var/a%20b.db") and embedded.to_url() == "sqlite:////var/a%20b.db"


def test_connection_settings_are_the_extras_named_by_the_connection():
    c = Conn("cassandra", host="h1", schema="ks",
             extra_dejson={"consistency_sweep_delete": "quorum", "extra__cassandra__repair_interval_seconds": 3600})
    a = StoreAddress.from_connection(c)
    assert dict(a.settings) == {"consistency_sweep_delete": "quorum", "repair_interval_seconds": 3600}
    assert a.settings_source == "connection 'c' extras"
    again = StoreAddress.from_url(a.to_url())  # JSON values come back as their text
    assert again.to_url() == a.to_url() and dict(again.settings)["repair_interval_seconds"] == "3600"
    assert again == StoreAddress.from_connection(Conn("cassandra", host="h1", schema="ks", extra_dejson={
        "consistency_sweep_delete": "quorum", "repair_interval_seconds": "3600"}))  # the source is not compared
    assert "consistency" not in a.without_settings().to_url()


BAD_URLS = [
    ("", "required"),
    ("sqlite:///a.db?journal=wal", "unknown URL option 'journal'"),
    ("sqlite:///a.db?consistency_sweep_delete=ALL", "unknown URL option 'consistency_sweep_delete'"),
    (f"cassandra://u:{SECRET}@h1/ks?replication_factor=two", "URL option replication_factor must be an integer"),
    (f"cassandra://u:{SECRET}@h1/ks?ssl=maybe", "URL option ssl must be true or false"),
    (f"cassandra://u:{SECRET}@h1/ks?connect_timeout=-1", "URL option connect_timeout must be a positive"),
    (f"cassandra://u:{SECRET}@h1/ks?ssl_ca=/ca.pem", "need ssl=true"),
    (f"cassandra://u:{SECRET}@h1/ks?page_size=1&page_size=2", "given twice"),
    (f"cassandra://u:{SECRET}@h1:99999/ks", "outside 1-65535"),
]


@pytest.mark.parametrize("url, problem", BAD_URLS)
def test_bad_urls_name_the_option_and_never_the_password(url, problem):
    with pytest.raises(InvalidInputError, match=problem) as info:
        StoreAddress.from_url(url)
    assert "s3cr3t" not in str(info.value)


@pytest.mark.parametrize(
    "conn, problem",
    [
        (Conn("cassandra", host="h1", schema="ks", extra_dejson={"replication_factor": "x"}),
         "connection 'c': extra replication_factor must be an integer"),
        (Conn("cassandra", host="h1", schema="ks", extra_dejson={"ssl_verify": False}),
         "connection 'c': extras ssl_ca / ssl_verify / ssl_options need ssl true"),
        (Conn("cassandra", host="h1", schema="ks", extra_dejson={"ssl_ca": "relative.pem", "ssl": True}),
         "extra ssl_ca must be the absolute path"),
        (Conn("cassandra", host="h1", schema="ks", extra_dejson={"ssl_options": "yes"}), "ssl_options must be a JSON object"),
        (Conn("cassandra", host="h1;drop", schema="ks"), "connection 'c': host 'h1;drop' is not a valid host"),
        (Conn("cassandra", host="h1", schema="ks", port=70000), "connection 'c': port 70000 is outside"),
        (Conn("cassandra", schema="ks"), "names no host"),
        (Conn("atlas_embedded", host="rel.db"), "must be absolute"),
        (Conn("postgres", host="h"), "an Atlas store connection is of type"),
    ],
)
def test_bad_connections_name_the_connection_and_the_extra(conn, problem):
    conn.password = SECRET
    with pytest.raises(InvalidInputError, match=problem) as info:
        StoreAddress.from_connection(conn)
    assert "s3cr3t" not in str(info.value)
