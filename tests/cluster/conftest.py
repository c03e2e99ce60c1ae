"""Fixtures of the cluster tests: the local 3-node Cassandra cluster (127.0.0.2-4, ``scripts/cassandra.sh
cluster``); the Spark standalone master with two workers (127.0.0.5) is tests/conftest.py's ``spark_master``.

* ``cassandra_cluster`` (package): starts the cluster unless it runs (the start is idempotent), discards one it
  started after the package, and returns a :class:`LocalCluster`: per-node nodetool, ``node_down(i)`` (a
  context manager that stops node i and always restarts it), flush/compact/repair helpers, store URLs.
* after every test the autouse ``_all_nodes_up`` fixture restarts any node a test left down (checked in-process
  with the CQL handshake), so a failing test never leaves the next one a 2-node cluster. Nothing here ever
  touches the shared node on 127.0.0.1.
* ``cluster_stores``: stores in fresh RF 3 keyspaces of the cluster, closed after the test and dropped when the
  package ends (:meth:`LocalCluster.drop_later`): a keyspace dropped right after a test restarted a node, while
  the node was still taking the hints of its downtime, hit Cassandra's race in ``DROP KEYSPACE`` (``Unknown CF``
  in the node's MigrationStage, which then never agreed on a schema again: the next test's ``CREATE TABLE``
  timed out; a clean-clone run of 2026-11-30 with the tier alone). A cluster the fixture started (fresh)
  is discarded instead (`cassandra.sh cluster discard`: killed, its data deleted), keyspaces and all.
"""
from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.store import AtlasStore
from devkit.cassandra.node import cql_answers
from tests.conftest import CASSANDRA_SCRIPT, drop_keyspaces_soon
from tests.timestamp_servers import check_served, serving

NODES = 3
HOSTS = tuple(f"127.0.0.{i + 1}" for i in range(1, NODES + 1))
START_TIMEOUT = 600
NODETOOL_TIMEOUT = 300

# unreadable window 0 (CONSERVATIVE tables sweepable at once), long transaction leases, quick lock expiry.
CONFIG = dict(
    unreadable_window_seconds=0.0,
    punch_interval_seconds=0.2,
    lock_lease_seconds=10.0,
    transaction_lease_seconds=600.0,
    running_writer_wait_seconds=2.0,
)


def _script(script, *args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=timeout)


@dataclass
class LocalCluster:
    """The 3-node cluster of ``scripts/cassandra.sh cluster``; node i (1-based) is ``HOSTS[i - 1]``."""

    hosts: tuple = HOSTS
    keyspaces: list[str] = field(default_factory=list)
    """The tests' keyspaces, dropped when the package ends (see the module doc)."""

    def drop_later(self, keyspaces) -> None:
        self.keyspaces.extend(keyspaces)

    def run(self, *args: str, timeout: float = NODETOOL_TIMEOUT) -> str:
        done = _script(CASSANDRA_SCRIPT, "cluster", *args, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"cassandra.sh cluster {' '.join(args)} failed:\n{done.stdout}\n{done.stderr[-3000:]}")
        return done.stdout

    def nodetool(self, node: int, *args: str) -> str:
        return self.run("nodetool", str(node), *args)

    def up(self, node: int) -> bool:
        """Node i answers the CQL handshake (what ``cassandra.sh cluster status-node I`` checks), asked
        in-process: the script's check costs a bash and a Python start-up per node, a second or more on a
        loaded machine, after every cluster test."""
        return cql_answers(self.hosts[node - 1], 9042)

    def stop_node(self, node: int) -> None:
        self.run("stop-node", str(node), timeout=180)

    def start_node(self, node: int) -> None:
        """Start node i and wait until every node sees every node Up/Normal."""
        self.run("start-node", str(node), timeout=START_TIMEOUT)

    @contextmanager
    def node_down(self, node: int):
        """Node i stopped (SIGTERM, as a restart or a lost replica) inside the block; restarted after it,
        whatever happens inside."""
        self.stop_node(node)
        try:
            yield
        finally:
            self.start_node(node)

    def logfile(self, node: int) -> Path:
        """Node i's current system.log."""
        return Path(self.run("logfile", str(node), timeout=60).strip())

    def live(self, down: int | None = None) -> list[int]:
        return [i for i in range(1, NODES + 1) if i != down]

    def nodetool_each(self, nodes, *args: str) -> None:
        """``nodetool ARGS`` on each of ``nodes`` at once (each call is its own JVM, seconds to start; the
        nodes are independent), returning when every call is done; the first failure is raised."""
        nodes = list(nodes)
        with ThreadPoolExecutor(max_workers=max(1, len(nodes))) as pool:
            for done in [pool.submit(self.nodetool, node, *args) for node in nodes]:
                done.result()

    def flush(self, keyspace: str, *nodes: int) -> None:
        self.nodetool_each(nodes or self.live(), "flush", keyspace)

    def compact(self, keyspace: str, table: str, *nodes: int) -> None:
        self.nodetool_each(nodes or self.live(), "compact", keyspace, table)

    def repair(self, keyspace: str, node: int = 1, *, full: bool = True) -> str:
        return self.nodetool(node, "repair", *(["--full"] if full else []), keyspace)

    def url(self, keyspace: str, **query) -> str:
        options = "&".join(f"{k}={v}" for k, v in {"replication_factor": NODES, **query}.items())
        return f"cassandra://{','.join(self.hosts)}:9042/{keyspace}?{options}"


@pytest.fixture(scope="package")
def cassandra_cluster() -> Iterator[LocalCluster]:
    """Starts the cluster unless it runs; one this fixture started is discarded after the package (three
    Cassandra JVMs idling beside the rest of the suite slowed every later tier of a 2-core machine, and the
    two-datacenter and secured clusters start three more), one already running (a developer's) is left.

    A cluster this fixture starts starts fresh (``--fresh``: no data of an earlier run), so the tests'
    keyspaces need no dropping when it discards them: the drops took most of a minute on three nodes. On a
    cluster that was running they are dropped after the last test."""
    was_running = _script(CASSANDRA_SCRIPT, "cluster", "status", timeout=120).returncode == 0
    fresh = () if was_running else ("--fresh",)
    done = _script(CASSANDRA_SCRIPT, "cluster", "start", *fresh, timeout=START_TIMEOUT)
    if done.returncode != 0:
        pytest.fail(f"could not start the local Cassandra cluster:\n{done.stdout}\n{done.stderr[-4000:]}")
    cluster = LocalCluster()
    yield cluster
    if not was_running:  # killed, not drained (a drain flushed every table: 20-30 s): its data is of no use
        _script(CASSANDRA_SCRIPT, "cluster", "discard", timeout=300)
        return
    if cluster.keyspaces:  # after the last test: no restart or hint delivery under way, none waits for them
        from cassandra.cluster import Cluster

        driver = Cluster(list(HOSTS), port=9042, protocol_version=5)
        try:
            drop_keyspaces_soon(driver.connect(), cluster.keyspaces, wait_seconds=60.0)
        except Exception as exc:  # a failed drop never fails the tier
            print(f"[cluster] could not drop the tests' keyspaces: {exc}")
        finally:
            driver.shutdown()


@pytest.fixture(autouse=True)
def _all_nodes_up(request):
    yield
    if "cassandra_cluster" not in request.fixturenames:
        return
    cluster: LocalCluster = request.getfixturevalue("cassandra_cluster")
    for node in range(1, NODES + 1):
        if not cluster.up(node):
            cluster.start_node(node)


class ClusterStores:
    """``make(config=None, shards=1, **url_query) -> store`` in a new RF 3 keyspace of the cluster."""

    def __init__(self, cluster: LocalCluster):
        self.cluster = cluster
        self.made: list = []
        self.keyspaces: list[str] = []

    def __call__(self, config: dict | None = None, shards: int = 1, **query) -> AtlasStore:
        keyspace = f"atlas_cl_{uuid.uuid4().hex[:12]}"
        self.keyspaces.append(keyspace)
        store = AtlasStore.open(self.cluster.url(keyspace, **query), config=StoreConfig(**{**CONFIG, **(config or {})}))
        self.made.append(store)
        store.initialize(shards=shards)
        return store

    def close(self) -> None:
        for store in self.made:
            try:
                store.close()
            except Exception:
                pass
        self.cluster.drop_later(self.keyspaces)


@pytest.fixture
def cluster_stores(cassandra_cluster):
    stores = ClusterStores(cassandra_cluster)
    yield stores
    stores.close()


@pytest.fixture(scope="package", autouse=True)
def _cluster_timestamp_servers(cassandra_cluster, tmp_path_factory):
    """Two timestamp server instances for the cluster (home store RF 3): every store this package initialises on
    it is served by them (tests/timestamp_servers.py)."""
    with serving(cassandra_cluster.url("atlas_timestamps_home", replication_factor=3),
                 tmp_path_factory.mktemp("cluster-timestamps")):
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """After each test's body: no store of the cluster drew from its cell (tests/timestamp_servers.py)."""
    result = yield
    check_served(item.nodeid)
    return result
