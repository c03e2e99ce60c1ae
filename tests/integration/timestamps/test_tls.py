"""The timestamp server over TLS (issue 45): a real ``atlas-sweep timestamps serve --cert-file --key-file`` process
for a store on the local node. A client pinning the CA that signed the server's certificate runs transactions and
``timestamps status`` over TLS; a client pinning another CA, and a plaintext client, fail the draw clearly naming
the server and the TLS problem, never falling back; a missing certificate file fails the start naming it.

Mutual TLS: a real instance started with ``--client-ca-file`` too. A store whose settings name a client certificate
and key that CA signed runs transactions (and ``timestamps status`` with them in the environment); a store without
them, or with another CA's, fails the draw within its retry bound naming the server and the settings to set; a
missing client CA file fails the start naming it and the flag."""
from __future__ import annotations

import json
import time
import uuid

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import StoreAccessError, StoreUnavailableError, is_retriable
from airflow_atlas.kvs.api import Cell
from airflow_atlas.store import AtlasStore
from airflow_atlas.timestamps.record import BOUND_CELL, TIMESTAMP_TABLE, marker_bound, read_record
from airflow_atlas.timestamps.tls import CA_ENV, CERT_ENV, KEY_ENV
from devkit.airflow import free_port
from devkit.timestamps import ServerTls, running_servers
from tests.integration.cli.conftest import Cli
from tests.tls_material import make_material

pytestmark = pytest.mark.cassandra


def url(keyspace: str) -> str:
    return f"cassandra://127.0.0.1:9042/{keyspace}?replication_factor=1"


@pytest.fixture(scope="module")
def tls_served(cassandra_session, tmp_path_factory):
    """One TLS instance for a keyspace of this module (initialised and adopted); yields (url, address, material)."""
    keyspace = f"atlas_t_tls_{uuid.uuid4().hex[:10]}"
    cassandra_session.execute(
        f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    directory = tmp_path_factory.mktemp("timestamps-tls")
    material = make_material(directory / "tls")
    address = f"127.0.0.1:{free_port()}"
    with running_servers(url(keyspace), [address], directory, tls=ServerTls(material.cert, material.key)) as servers:
        assert b"(TLS)" in servers[0].log.read_bytes(), servers[0].log_tail()
        yield url(keyspace), address, material
    cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)


@pytest.fixture(scope="module")
def mutual_served(cassandra_session, tmp_path_factory):
    """One instance requiring client certificates (``--client-ca-file``: its CA signs the server's certificate and
    the client's) for a keyspace of its own; yields (url, address, material)."""
    keyspace = f"atlas_t_mtls_{uuid.uuid4().hex[:10]}"
    cassandra_session.execute(
        f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    directory = tmp_path_factory.mktemp("timestamps-mtls")
    material = make_material(directory / "tls")
    address = f"127.0.0.1:{free_port()}"
    tls = ServerTls(material.cert, material.key, client_ca=material.ca)
    with running_servers(url(keyspace), [address], directory, tls=tls) as servers:
        assert b"(TLS, client certificates required)" in servers[0].log.read_bytes(), servers[0].log_tail()
        yield url(keyspace), address, material
    cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)


@pytest.fixture
def no_ca_in_environment(monkeypatch):
    for name in (CA_ENV, CERT_ENV, KEY_ENV):
        monkeypatch.delenv(name, raising=False)


def test_a_client_pinning_the_ca_runs_transactions_over_tls(tls_served, no_ca_in_environment, tmp_path):
    store_url, address, material = tls_served
    config = StoreConfig(timestamp_servers=(address,), timestamp_tls_ca=str(material.ca))
    with AtlasStore.open(store_url, config) as store:
        store.create_table("t", "THOROUGH")
        for i in range(5):
            store.transactions.run(lambda txn, i=i: txn.put("t", {Cell(f"r{i}".encode(), b"c"): b"v"}))
        assert store.timestamps.served
        record, _ = read_record(store.kvs)
        assert record is not None and record.leader_address == address, record
        assert store.timestamps.current_bound() >= 10
        assert marker_bound(store.kvs.get_lwt(TIMESTAMP_TABLE, [BOUND_CELL], serial=True)[BOUND_CELL]) == 0
    # the CLI over TLS, the CA named by the environment (as a deployment names it to every process)
    status = Cli(store_url, tmp_path).json("timestamps", "status", env={CA_ENV: str(material.ca)})
    assert [s["server"] for s in status["servers"]] == [address] and "error" not in status["servers"][0], status
    assert status["servers"][0]["stores"][0]["role"] == "leader", status


def test_a_client_pinning_another_ca_fails_at_once_naming_the_server(tls_served, no_ca_in_environment, tmp_path):
    store_url, address, _ = tls_served
    other = make_material(tmp_path / "other", name="an impostor's CA")
    config = StoreConfig(timestamp_servers=(address,), timestamp_tls_ca=str(other.ca), timestamp_retry_seconds=20)
    with AtlasStore.open(store_url, config) as store:
        started = time.monotonic()
        with pytest.raises(StoreAccessError) as refused:
            store.timestamps.fresh_timestamp()
        assert time.monotonic() - started < 10, "a certificate problem was retried as if the server were down"
    text = str(refused.value)
    assert f"timestamp server {address}: TLS handshake failed" in text and str(other.ca) in text, text
    assert not is_retriable(refused.value)


def test_a_plaintext_client_of_the_tls_server_fails_naming_it_and_tls(tls_served, no_ca_in_environment):
    store_url, address, _ = tls_served
    config = StoreConfig(timestamp_servers=(address,), timestamp_retry_seconds=1)
    with AtlasStore.open(store_url, config) as store, pytest.raises(StoreUnavailableError) as failed:
        store.timestamps.fresh_timestamp()
    text = str(failed.value)
    assert address in text and "timestamp_tls_ca" in text and "plaintext" in text, text


def test_a_missing_certificate_file_fails_the_start_naming_it(tls_served, tmp_path):
    store_url, _, material = tls_served
    missing = tmp_path / "nowhere.pem"
    done = Cli(store_url, tmp_path).run("timestamps", "serve", "--listen", f"127.0.0.1:{free_port()}",
                                        "--cert-file", str(missing), "--key-file", str(material.key), timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert str(missing) in done.stderr and "--cert-file" in done.stderr and "Traceback" not in done.stderr, done.stderr
    alone = Cli(store_url, tmp_path).run("timestamps", "serve", "--cert-file", str(material.cert), timeout=60)
    assert alone.returncode == 2 and "--key-file" in alone.stderr, alone.stderr


# ----- mutual TLS ------------------------------------------------------------------------------------------
def test_a_store_with_a_client_certificate_runs_transactions_over_mutual_tls(mutual_served, no_ca_in_environment,
                                                                             tmp_path):
    store_url, address, material = mutual_served
    config = StoreConfig(timestamp_servers=(address,), timestamp_tls_ca=str(material.ca),
                         timestamp_tls_cert=str(material.client_cert), timestamp_tls_key=str(material.client_key))
    with AtlasStore.open(store_url, config) as store:
        store.create_table("t", "THOROUGH")
        for i in range(5):
            store.transactions.run(lambda txn, i=i: txn.put("t", {Cell(f"r{i}".encode(), b"c"): b"v"}))
        assert store.timestamps.served and store.timestamps.current_bound() >= 10
        record, _ = read_record(store.kvs)
        assert record is not None and record.leader_address == address, record
    # the CLI, the three files named by the environment (as a deployment names them to every process)
    env = {CA_ENV: str(material.ca), CERT_ENV: str(material.client_cert), KEY_ENV: str(material.client_key)}
    status = Cli(store_url, tmp_path).json("timestamps", "status", env=env)
    assert [s["server"] for s in status["servers"]] == [address] and "error" not in status["servers"][0], status
    assert status["servers"][0]["stores"][0]["role"] == "leader", status


def test_a_store_without_a_client_certificate_fails_naming_the_server_and_the_settings(mutual_served,
                                                                                        no_ca_in_environment, tmp_path):
    store_url, address, material = mutual_served
    config = StoreConfig(timestamp_servers=(address,), timestamp_tls_ca=str(material.ca), timestamp_retry_seconds=2)
    with AtlasStore.open(store_url, config) as store:
        started = time.monotonic()
        with pytest.raises(StoreAccessError) as refused:
            store.timestamps.fresh_timestamp()
        assert time.monotonic() - started < 15, "not within the retry bound"
    text = str(refused.value)
    assert f"timestamp server {address} closed the TLS connection" in text and "presents none" in text, text
    assert "timestamp_tls_cert" in text and "timestamp_tls_key" in text and not is_retriable(refused.value), text
    # the CLI: exit 5 (an access error), the cause on stderr, no traceback
    settings = (f"timestamp_servers={address}", f"timestamp_tls_ca={material.ca}", "timestamp_retry_seconds=2")
    done = Cli(store_url, tmp_path, settings).run("workload", "-n", "1", timeout=120)
    assert done.returncode == 5, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "timestamp_tls_cert" in done.stderr and address in done.stderr and "Traceback" not in done.stderr, done.stderr
    shown = Cli(store_url, tmp_path).run("timestamps", "status", "--json", env={CA_ENV: str(material.ca)})
    assert shown.returncode == 3, (shown.stdout, shown.stderr)  # adopted, and no instance answered it
    status = json.loads(shown.stdout)
    assert "Socket closed" in status["servers"][0]["error"] and "presents none" in status["servers"][0]["error"], status


def test_a_store_with_another_cas_client_certificate_fails_naming_it(mutual_served, no_ca_in_environment, tmp_path):
    store_url, address, material = mutual_served
    other = make_material(tmp_path / "other", name="a stranger's CA")
    config = StoreConfig(timestamp_servers=(address,), timestamp_tls_ca=str(material.ca), timestamp_retry_seconds=2,
                         timestamp_tls_cert=str(other.client_cert), timestamp_tls_key=str(other.client_key))
    with AtlasStore.open(store_url, config) as store, pytest.raises(StoreAccessError) as refused:
        store.timestamps.fresh_timestamp()
    text = str(refused.value)
    assert address in text and f"do not trust this client's certificate {other.client_cert}" in text, text


def test_a_missing_client_ca_file_fails_the_start_naming_it(mutual_served, tmp_path):
    store_url, _, material = mutual_served
    missing = tmp_path / "no-client-ca.pem"
    done = Cli(store_url, tmp_path).run("timestamps", "serve", "--listen", f"127.0.0.1:{free_port()}",
                                        "--cert-file", str(material.cert), "--key-file", str(material.key),
                                        "--client-ca-file", str(missing), timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert str(missing) in done.stderr and "--client-ca-file" in done.stderr and "Traceback" not in done.stderr
    alone = Cli(store_url, tmp_path).run("timestamps", "serve", "--client-ca-file", str(material.ca), timeout=60)
    assert alone.returncode == 2 and "--client-ca-file needs --cert-file" in alone.stderr, alone.stderr
