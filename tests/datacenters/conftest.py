"""Fixtures of the two-datacenter drills: the cluster of ``scripts/cassandra.sh dc`` (dc1: 127.0.0.21-22,
dc2: 127.0.0.23; JMX 7221-7223; GossipingPropertyFileSnitch), started for this package only.

* ``two_datacenters`` (package): starts the cluster unless it runs; one this fixture started is discarded after
  the package (killed, its data deleted; three more JVMs idling next to the rest of the suite would cost a
  2-core machine), one that was already running (a developer's) is left running. Returns a
  :class:`TwoDatacenters`: per-node nodetool, ``datacenter_down(name)`` (stops the datacenter's nodes with the
  script, always restarts them), store URLs local to either datacenter.
* ``dc_keyspace``: a fresh keyspace replicated ``{'dc1': 2, 'dc2': 1}`` (NetworkTopologyStrategy), dropped
  after the test on a cluster that was running (a developer's); a cluster the fixture started starts fresh
  (``--fresh``), so its keyspaces need no drop (each drop waited for schema agreement: up to half a minute
  after an outage drill on a loaded machine); ``stores_in(keyspace)`` opens an :class:`AtlasStore` on it
  local to dc1 or dc2.
* ``dc_timestamp_servers`` (package, autouse): two timestamp server instances of the package's own for the
  cluster, local to dc1, started for a home keyspace replicated in both datacenters (tests/timestamp_servers.py,
  ``serving``): every store the drills initialise is adopted and served by them; after each test the guard
  (``check_served``) fails a test that left a store drawing from its cell.
"""
from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.store import AtlasStore
from devkit.cassandra.node import cql_answers
from devkit.timestamps import ServerProcess
from tests.conftest import CASSANDRA_SCRIPT
from tests.timestamp_servers import HOME, check_served, serving

NODES = {"dc1": (1, 2), "dc2": (3,)}
HOSTS = {1: "127.0.0.21", 2: "127.0.0.22", 3: "127.0.0.23"}
REPLICATION = {"dc1": 2, "dc2": 1}
START_TIMEOUT = 600

# unreadable window 0 (CONSERVATIVE tables sweepable at once), long transaction leases, quick lock expiry.
CONFIG = dict(
    unreadable_window_seconds=0.0,
    punch_interval_seconds=0.2,
    lock_lease_seconds=10.0,
    transaction_lease_seconds=600.0,
    running_writer_wait_seconds=2.0,
)


def _script(*args: str, timeout: float = START_TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([str(CASSANDRA_SCRIPT), "dc", *args], capture_output=True, text=True, timeout=timeout)


@dataclass
class TwoDatacenters:
    """The cluster of ``scripts/cassandra.sh dc``; node i is ``HOSTS[i]``, in the datacenter ``NODES`` says.
    ``owned``: started (fresh) by this package's fixture, which discards it after the package."""

    owned: bool = False

    def run(self, *args: str, timeout: float = 300) -> str:
        done = _script(*args, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"cassandra.sh dc {' '.join(args)} failed:\n{done.stdout}\n{done.stderr[-3000:]}")
        return done.stdout

    def nodetool(self, node: int, *args: str) -> str:
        return self.run("nodetool", str(node), *args)

    def up(self, node: int) -> bool:
        return cql_answers(HOSTS[node], 9042)

    @contextmanager
    def datacenter_down(self, datacenter: str) -> Iterator[None]:
        """Every node of ``datacenter`` stopped (SIGTERM) inside the block, restarted after it whatever
        happens inside (``start-node`` waits until every node sees every node Up/Normal)."""
        for node in NODES[datacenter]:
            self.run("stop-node", str(node), timeout=180)
        try:
            yield
        finally:
            for node in NODES[datacenter]:
                self.run("start-node", str(node), timeout=START_TIMEOUT)

    def url(self, keyspace: str, datacenter: str) -> str:
        hosts = ",".join(HOSTS[n] for n in NODES[datacenter])
        return f"cassandra://{hosts}:9042/{keyspace}?datacenter={datacenter}"

    def store(self, keyspace: str, datacenter: str, config: dict | None = None, **query: str) -> AtlasStore:
        url = self.url(keyspace, datacenter) + "".join(f"&{k}={v}" for k, v in query.items())
        return AtlasStore.open(url, config=StoreConfig(**{**CONFIG, **(config or {})}))


@pytest.fixture(scope="package")
def two_datacenters() -> Iterator[TwoDatacenters]:
    was_running = _script("status", timeout=120).returncode == 0
    started = _script("start", *(() if was_running else ("--fresh",)))
    if started.returncode != 0:
        pytest.fail(f"could not start the two-datacenter cluster:\n{started.stdout}\n{started.stderr[-4000:]}")
    cluster = TwoDatacenters(owned=not was_running)
    yield cluster
    if not was_running:  # killed, not drained: its data is of no use (the next start is fresh)
        _script("discard", timeout=300)


@pytest.fixture(autouse=True)
def _every_datacenter_up(request):
    """A failing drill never leaves the next one a datacenter down."""
    yield
    if "two_datacenters" not in request.fixturenames:
        return
    cluster: TwoDatacenters = request.getfixturevalue("two_datacenters")
    for node in HOSTS:
        if not cluster.up(node):
            cluster.run("start-node", str(node), timeout=START_TIMEOUT)


@pytest.fixture(scope="package")
def dc_session(two_datacenters):
    """A raw driver session (schema, keyspace drops). Its DDL waits until every node holds the new schema
    (up to 2 minutes): a keyspace dropped while the node of dc2 still pulls the schema after a restart left
    that node unable to merge schema again ("Unknown CF"), seen on a loaded 2-core machine. Its coordinators
    are dc1's nodes only, which no drill stops: on a loaded CI machine the dc2 node, restarted a moment ago
    by the outage drill, left a DROP and the next CREATE it coordinated unanswered for 2 minutes each."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    coordinators = [HOSTS[n] for n in NODES["dc1"]]
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy(coordinators), request_timeout=120)
    cluster = Cluster(coordinators, port=9042, protocol_version=5, max_schema_agreement_wait=120,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    session = cluster.connect()
    yield session
    cluster.shutdown()


@pytest.fixture
def dc_keyspace(two_datacenters, dc_session) -> Iterator[str]:
    keyspace = f"atlas_dc_{uuid.uuid4().hex[:12]}"
    create_keyspace(dc_session, keyspace)
    yield keyspace
    if two_datacenters.owned:  # discarded after the package, its data with it
        return
    try:
        dc_session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")  # waits for schema agreement (above)
    except Exception:  # a failed drop never fails a test
        pass


@pytest.fixture
def stores_in(two_datacenters):
    """``stores_in(keyspace, datacenter, config=None, **url_query)`` -> a store local to ``datacenter``,
    closed after the test."""
    made: list[AtlasStore] = []

    def make(keyspace: str, datacenter: str, config: dict | None = None, **query: str) -> AtlasStore:
        store = two_datacenters.store(keyspace, datacenter, config, **query)
        made.append(store)
        return store

    yield make
    for store in made:
        try:
            store.close()
        except Exception:
            pass


def create_keyspace(session, keyspace: str) -> None:
    """``keyspace`` replicated ``REPLICATION`` (NetworkTopologyStrategy) unless it exists."""
    replication = ", ".join(f"'{dc}': {rf}" for dc, rf in REPLICATION.items())
    session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = "
        f"{{'class': 'NetworkTopologyStrategy', {replication}}}",
        timeout=120,
    )


@dataclass
class DatacenterServers:
    """The package's timestamp server instances and the URL of the store they were started for."""

    home_url: str
    processes: list[ServerProcess]

    @property
    def addresses(self) -> list[str]:
        return [p.address for p in self.processes]


@pytest.fixture(scope="package", autouse=True)
def dc_timestamp_servers(two_datacenters, dc_session, tmp_path_factory) -> Iterator[DatacenterServers]:
    """Two instances for the cluster (local to dc1; their home keyspace replicated in both datacenters, so their
    record's check-and-sets run at SERIAL: LOCAL_SERIAL is refused on it)."""
    create_keyspace(dc_session, HOME)
    home_url = two_datacenters.url(HOME, "dc1") + "&create_keyspace=false"
    with serving(home_url, tmp_path_factory.mktemp("dc-timestamps")) as processes:
        yield DatacenterServers(home_url, processes)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """After each drill's body: no store of the cluster drew from its cell (tests/timestamp_servers.py)."""
    result = yield
    check_served(item.nodeid)
    return result
