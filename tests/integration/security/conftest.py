"""The secured Cassandra node (scripts/cassandra.sh secure ...): password authentication, CassandraAuthorizer,
client-to-node TLS only, JMX with a password. Started by the test command; the session fixture starts it
when it does not answer (idempotent), and reads its CA and administrator credentials from `secure env`.

Each of the two secured clusters (the node, the 3-node cluster) has two timestamp server instances of its own,
started by its fixture once it answers and connecting as the administrator's role with its password over TLS
(the URL in the instances' environment, never on a command line), and serving mutual TLS themselves: a certificate
of a CA of their own that ``$ATLAS_TIMESTAMP_TLS_CA`` names inside the fixture, and every client required to present
a certificate of that CA (``$ATLAS_TIMESTAMP_TLS_CERT`` / ``_KEY`` inside the fixture: TLS everywhere, the servers
authenticating their clients - issue 45): every store
this package initialises on it is adopted and served (tests/timestamp_servers.py, ``serving``); after each test the guard (``check_served``)
fails a test that left a store drawing from its cell. The instances a least-privilege role of its own runs are
tested in test_timestamp_server_role.py."""
from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.conftest import CASSANDRA_SCRIPT
from tests.timestamp_servers import HOME, check_served, serving


@dataclass(frozen=True)
class SecureNode:
    """The secured single node, or the secured cluster (``host`` is then its hosts, comma-separated)."""

    host: str
    ca: Path
    admin_user: str
    admin_password: str
    nodetool_password_file: Path

    def url(self, user: str, password: str, keyspace: str, **query: str) -> str:
        options = {"ssl": "true", "ssl_ca": str(self.ca), **query}
        text = "&".join(f"{k}={v}" for k, v in options.items())
        return f"cassandra://{quote(user, safe='')}:{quote(password, safe='')}@{self.host}/{keyspace}?{text}"

    def admin_url(self, keyspace: str) -> str:
        return self.url(self.admin_user, self.admin_password, keyspace)

    def cql(self, *statements: str) -> None:
        """Runs statements as the administrator (over TLS)."""
        import ssl

        from cassandra.auth import PlainTextAuthProvider
        from cassandra.cluster import Cluster

        context = ssl.create_default_context(cafile=str(self.ca))
        cluster = Cluster(self.host.split(","), auth_provider=PlainTextAuthProvider(self.admin_user, self.admin_password),
                          ssl_context=context, protocol_version=5)
        try:
            session = cluster.connect()
            for statement in statements:
                session.execute(statement, timeout=60)
        finally:
            cluster.shutdown()


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CASSANDRA_SCRIPT), "secure", *args], capture_output=True, text=True, timeout=400)


def _secured(*start: str, hosts_key: str) -> SecureNode:
    started = _script(*start)
    if started.returncode != 0:
        pytest.fail(f"could not start the secured Cassandra {' '.join(start)}:\n{started.stdout}\n{started.stderr}")
    env = dict(line.split("=", 1) for line in _script("env").stdout.split())
    return SecureNode(
        host=env[hosts_key],
        ca=Path(env["ATLAS_SECURE_CA"]),
        admin_user=env["ATLAS_SECURE_ADMIN_USER"],
        admin_password=Path(env["ATLAS_SECURE_ADMIN_PASSWORD_FILE"]).read_text(),
        nodetool_password_file=Path(env["ATLAS_SECURE_NODETOOL_PASSWORD_FILE"]),
    )


def _running(*status: str) -> bool:
    return _script(*status).returncode == 0


# Package scope: the secured node and cluster run only while this package's tests do. Four more JVMs idling
# next to the rest of the suite cost a 2-core machine about a fifth of a core; one this fixture started is
# stopped after the package (one that was already running - a developer's - is left running). Their timestamp
# servers are stopped first.
@pytest.fixture(scope="package")
def secure_node(tmp_path_factory) -> Iterator[SecureNode]:
    was_running = _running("status")
    node = _secured("start", hosts_key="ATLAS_SECURE_HOST")
    try:
        with serving(node.admin_url(HOME), tmp_path_factory.mktemp("secure-node-timestamps"), tls=True):
            yield node
    finally:
        if not was_running:
            _script("stop")


# Module scope (one module uses it): its timestamp servers are named by $ATLAS_TIMESTAMP_SERVERS while that
# module runs, and the secured node's again after it (one variable per process: the two clusters' servers must
# not be named at once).
@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory) -> Iterator[SecureNode]:
    """The secured 3-node cluster (127.0.0.7-9; system_auth on every node)."""
    was_running = _running("cluster", "status")
    cluster = _secured("cluster", "start", hosts_key="ATLAS_SECURE_CLUSTER_HOSTS")
    try:
        with serving(cluster.admin_url(HOME) + "&replication_factor=3",
                     tmp_path_factory.mktemp("secure-cluster-timestamps"), tls=True):
            yield cluster
    finally:
        if not was_running:
            _script("cluster", "stop")


@pytest.fixture(scope="module")
def secure_keyspace(secure_node):
    """A keyspace of this module's own on the secured node (dropped at the end)."""
    name = f"atlas_sec_{uuid.uuid4().hex[:10]}"
    yield name
    try:
        secure_node.cql(f"DROP KEYSPACE IF EXISTS {name}")
    except Exception:  # a slow drop must not fail the session; the node is throwaway
        pass


def grant_sweeper(node: SecureNode, keyspace: str, password: str, cwd: Path, prefix: str = "sweeper") -> str:
    """A new login role with exactly the grants ``atlas-sweep grants --role sweeper`` prints for the store
    (initialised, its tables created); returns the role's name (drop it with ``DROP ROLE``)."""
    from tests.integration.cli.conftest import Cli

    role = f"{prefix}_{uuid.uuid4().hex[:8]}"
    printed = Cli(node.admin_url(keyspace), cwd).json("grants", "--role", "sweeper", "--name", role)["grants"]
    assert {g["permission"] for g in printed} == {"SELECT", "MODIFY"}, printed
    escaped = password.replace("'", "''")
    node.cql(f"CREATE ROLE {role} WITH LOGIN = true AND PASSWORD = '{escaped}'", *(g["cql"].rstrip(";") for g in printed))
    return role


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """After each test's body: no store of the secured clusters drew from its cell (tests/timestamp_servers.py)."""
    result = yield
    check_served(item.nodeid)
    return result
