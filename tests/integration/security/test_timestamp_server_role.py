"""The timestamp server as a least-privilege role of its own on the secured node (issue 45): ``atlas-sweep grants
--role timestamps`` prints exactly what ``atlas-sweep timestamps serve`` needs on a store (SELECT and MODIFY on
atlas_timestamp, SELECT on the registry and the schema record), and two instances connecting as a role with
those grants only - its password, TLS with the pinned CA, the URL in their environment; serving mutual TLS
themselves - serve the store; a
store the role has no grants on is refused at once, naming the server and the permission (PERMISSION_DENIED:
never retried for the client's retry bound, as a wrong grant is no outage)."""
from __future__ import annotations

import time
import uuid

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import StorePermissionError, is_retriable
from airflow_atlas.kvs.api import Cell
from airflow_atlas.store import AtlasStore
from airflow_atlas.timestamps.client import TimestampClient
from airflow_atlas.timestamps.record import BOUND_CELL, TIMESTAMP_TABLE, marker_bound, read_record
from airflow_atlas.timestamps.tls import ClientTls
from devkit.airflow import free_port
from devkit.timestamps import start_server
from tests.integration.cli.conftest import Cli
from tests.timestamp_servers import HOME, server_tls, tier_tls

pytestmark = pytest.mark.cassandra

PASSWORD = "t1mestamps-" + uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def role_store(secure_node, tmp_path_factory):
    """A store initialised by the administrator and adopted for two addresses of this module's own; a role with
    exactly the grants ``grants --role timestamps`` prints for it. Yields (keyspace, addresses, role, printed)."""
    keyspace = f"atlas_sects_{uuid.uuid4().hex[:10]}"
    cwd = tmp_path_factory.mktemp("secure-timestamps-role")
    addresses = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    admin = Cli(secure_node.admin_url(keyspace), cwd)
    admin.ok("init", "--set", f"timestamp_servers={','.join(addresses)}", timeout=300)
    role = f"timestamps_{uuid.uuid4().hex[:8]}"
    printed = admin.json("grants", "--role", "timestamps", "--name", role)["grants"]
    secure_node.cql(f"CREATE ROLE {role} WITH LOGIN = true AND PASSWORD = '{PASSWORD}'",
                    *(g["cql"].rstrip(";") for g in printed))
    yield keyspace, addresses, role, printed
    secure_node.cql(f"DROP ROLE IF EXISTS {role}", f"DROP KEYSPACE IF EXISTS {keyspace}")


@pytest.fixture(scope="module")
def role_servers(secure_node, role_store, tmp_path_factory):
    """Two instances for the store, connecting as the role (its URL in their environment only), serving mutual TLS
    with the tier's certificate (its CA is the tier's ``$ATLAS_TIMESTAMP_TLS_CA``; the tier's clients present the
    certificate ``$ATLAS_TIMESTAMP_TLS_CERT`` names)."""
    keyspace, addresses, role, _ = role_store
    url = secure_node.url(role, PASSWORD, keyspace, create_keyspace="false")
    logs = tmp_path_factory.mktemp("secure-timestamps-role-logs")
    tls = tier_tls()
    assert tls is not None, "the secured tier's timestamp servers serve TLS"
    servers = []
    try:
        for i, address in enumerate(addresses):
            servers.append(start_server(url, address, logs / f"timestamps-{i}.log", tls=server_tls(tls)))
        yield servers
    finally:
        for server in servers:
            server.stop()


def test_the_timestamp_servers_grants_are_its_record_and_what_opening_a_store_reads(role_store):
    keyspace, _, _, printed = role_store
    assert {(g["permission"], g["resource"]) for g in printed} == {
        ("SELECT", f"TABLE {keyspace}.atlas_metadata"),
        ("SELECT", f"TABLE {keyspace}.atlas_transactions_schema"),
        ("SELECT", f"TABLE {keyspace}.atlas_timestamp"),
        ("MODIFY", f"TABLE {keyspace}.atlas_timestamp"),
    }, printed


def test_instances_running_as_the_role_over_tls_serve_the_store(secure_node, role_store, role_servers):
    keyspace, addresses, _, _ = role_store
    cells = [Cell(f"r{i}".encode(), b"c") for i in range(5)]
    config = StoreConfig(timestamp_servers=tuple(addresses))
    with AtlasStore.open(secure_node.admin_url(keyspace), config) as store:
        store.create_table("t", "THOROUGH")
        for i, cell in enumerate(cells):
            store.transactions.run(lambda txn, c=cell, i=i: txn.put("t", {c: b"v%d" % i}))
        assert store.timestamps.served
        record, _ = read_record(store.kvs)
        assert record is not None and record.leader_address in addresses and record.epoch >= 1, record
        # nothing was drawn from the cell: it holds the marker written at adoption
        assert marker_bound(store.kvs.get_lwt(TIMESTAMP_TABLE, [BOUND_CELL], serial=True)[BOUND_CELL]) == 0
        assert store.timestamps.current_bound() >= 2 * len(cells)
    for server in role_servers:
        assert server.process.poll() is None, server.log_tail()
        assert PASSWORD not in server.log.read_text(errors="replace")


def test_a_store_the_role_has_no_grants_on_is_refused_at_once_naming_the_permission(role_store, role_servers):
    """The tier's own home store is adopted on the same node, but the role holds no grant on it."""
    _, addresses, _, _ = role_store
    tls = tier_tls()
    client = TimestampClient(HOME, addresses, lambda: "", retry_seconds=20,
                             tls=ClientTls(str(tls.ca), str(tls.client_cert), str(tls.client_key)) if tls else None)
    started = time.monotonic()
    with pytest.raises(StorePermissionError) as refused:
        client.fresh_timestamp()
    assert time.monotonic() - started < 10, "a refused grant was retried as if the server were down"
    error = refused.value
    assert error.permission == "SELECT" and error.resource is not None and HOME in error.resource, error
    assert any(address in str(error) for address in addresses) and "grants --role timestamps" in str(error)
    assert PASSWORD not in str(error) and not is_retriable(error)
    client.close()
