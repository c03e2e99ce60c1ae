"""A store served by real timestamp server processes on the local node: transactions, sweep and verify draw only
from the server (the cell keeps its marker); the server refuses what it must (a second instance on one address,
an embedded store, a store never adopted), and a client with no server to reach fails naming it."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError, StoreUnavailableError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.store import AtlasStore
from airflow_atlas.timestamps.record import BOUND_CELL, TIMESTAMP_TABLE, marker_bound, read_record
from airflow_atlas.verify import run_verify
from devkit.airflow import free_port
from devkit.timestamps import ServerProcessError, running_servers, start_server
from tests.timestamp_servers import without_local_servers

pytestmark = pytest.mark.cassandra


def url(keyspace: str) -> str:
    return f"cassandra://127.0.0.1:9042/{keyspace}?replication_factor=1"


@pytest.fixture
def served(fresh_keyspace, tmp_path):
    """Two instances for a fresh keyspace (initialised and adopted); yields (url, addresses, processes)."""
    addresses = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    with running_servers(url(fresh_keyspace), addresses, tmp_path) as servers:
        yield url(fresh_keyspace), addresses, servers


def test_transactions_sweep_and_verify_draw_only_from_the_server(served):
    store_url, addresses, _ = served
    config = StoreConfig(unreadable_window_seconds=0)
    with AtlasStore.open(store_url, config) as store:
        assert marker_bound(store.kvs.get_lwt(TIMESTAMP_TABLE, [BOUND_CELL]).get(BOUND_CELL)) is not None
        store.create_table("t", "CONSERVATIVE")
        store.create_table("u", "THOROUGH")
        cells = [Cell(f"r{i}".encode(), b"c") for i in range(20)]

        def write(n: int) -> None:
            for k in range(10):
                store.transactions.run(lambda txn, k=k: txn.put("t" if n % 2 else "u",
                                                                {cells[(n + k) % 20]: f"{n}-{k}".encode()}))

        threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert store.timestamps.served
        record, _ = read_record(store.kvs)
        assert record is not None and record.leader_address in addresses and record.epoch >= 1
        issued = store.timestamps.current_bound()
        for shard in range(store.number_of_shards()):
            for strategy in ("CONSERVATIVE", "THOROUGH"):
                store.sweeper.sweep_shard(shard, strategy, max_iterations=20, max_entries_per_second=0)
        assert run_verify(store).ok
        assert store.timestamps.current_bound() > issued
        # the cell was never drawn from: it still holds the marker written at adoption
        assert marker_bound(store.kvs.get_lwt(TIMESTAMP_TABLE, [BOUND_CELL], serial=True)[BOUND_CELL]) == 0


def test_a_second_instance_on_the_same_address_is_refused(served, tmp_path):
    store_url, addresses, _ = served
    with pytest.raises(ServerProcessError, match="cannot listen on"):
        start_server(store_url, addresses[0], tmp_path / "again.log")


def test_a_store_never_adopted_is_refused_with_a_clear_error(served, cassandra_session):
    store_url, addresses, _ = served
    other = f"atlas_t_plain_{os.getpid()}"
    cassandra_session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {other} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
    )
    try:
        # Deliberately a store on its cell (the one kind the suite keeps, for this refusal): initialised with no
        # timestamp servers named, so it is never adopted, and the server must refuse to serve it. It draws
        # nothing from its cell here, and the keyspace is dropped at the end.
        with without_local_servers(), AtlasStore.open(url(other)) as plain:
            plain.initialize()
        from airflow_atlas.timestamps.client import TimestampClient

        client = TimestampClient(other, addresses, lambda: "", retry_seconds=5)
        with pytest.raises(InvalidInputError, match="not served by a timestamp server"):
            client.fresh_timestamp()
    finally:
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {other}", timeout=120)


def test_a_served_store_with_no_server_running_fails_naming_the_addresses(fresh_keyspace):
    nobody = f"127.0.0.1:{free_port()}"
    config = StoreConfig(timestamp_servers=(nobody,), timestamp_retry_seconds=1)
    with AtlasStore.open(url(fresh_keyspace), config) as store:
        store.initialize()  # adopts it: from now on only a server hands out its timestamps
        with pytest.raises(StoreUnavailableError, match=nobody):
            store.timestamps.fresh_timestamp()


def test_the_embedded_store_needs_no_server(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "airflow_atlas.cli", "--store", f"sqlite:///{tmp_path}/s.db", "init"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    refused = subprocess.run(
        [sys.executable, "-m", "airflow_atlas.cli", "--store", f"sqlite:///{tmp_path}/s.db", "timestamps", "serve"],
        capture_output=True, text=True, timeout=60,
    )
    assert refused.returncode == 2 and "needs no timestamp server" in refused.stderr


def test_a_store_of_another_cluster_is_refused(served):
    """A server never serves a store of another cluster (a keyspace of that name here is another store); it
    answers "not this store's server", so the client, finding no server of its own, fails naming that answer."""
    store_url, addresses, _ = served
    from airflow_atlas.timestamps.client import TimestampClient

    keyspace = store_url.rsplit("/", 1)[1].split("?")[0]
    client = TimestampClient(keyspace, addresses, lambda: "", retry_seconds=2, cluster="some-other-cluster")
    with pytest.raises(StoreUnavailableError, match="serves the Cassandra cluster 'airflow-atlas-local'"):
        client.fresh_timestamp()
    client.close()

