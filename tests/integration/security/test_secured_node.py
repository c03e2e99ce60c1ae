"""The CLI against a secured node: TLS with a pinned CA and hostname verification, password authentication,
a sweeper role with SELECT and MODIFY only; refused credentials, an untrusted certificate and a missing
permission each fail at once with their own message and exit code 5 (never retried), and nothing leaks
the password."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from tests.conftest import CASSANDRA_SCRIPT
from tests.integration.cli.conftest import Cli

pytestmark = pytest.mark.cassandra

SWEEPER_PASSWORD = "sw33per-" + uuid.uuid4().hex[:8]
NO_SELECT_PASSWORD = "n0select-" + uuid.uuid4().hex[:8]
READ_ONLY_PASSWORD = "r3adonly-" + uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def roles(secure_node, secure_keyspace, tmp_path_factory):
    """The store initialised by the administrator; a sweeper role (SELECT, MODIFY on the keyspace) and a role
    without SELECT."""
    cwd = tmp_path_factory.mktemp("secure-cli")
    admin = Cli(secure_node.admin_url(secure_keyspace), cwd)
    admin.ok("init")
    admin.ok("workload", "--transactions", "5")  # creates the workload's tables (needs CREATE: the admin's job)
    suffix = uuid.uuid4().hex[:8]
    sweeper, no_select, read_only = f"sweeper_{suffix}", f"noselect_{suffix}", f"readonly_{suffix}"
    # the sweeper gets exactly what `atlas-sweep grants` prints: SELECT on the keyspace, MODIFY per table
    printed = admin.json("grants", "--role", "sweeper", "--name", sweeper)["grants"]
    assert {g["permission"] for g in printed} == {"SELECT", "MODIFY"}, printed
    secure_node.cql(
        f"CREATE ROLE {sweeper} WITH LOGIN = true AND PASSWORD = '{SWEEPER_PASSWORD}'",
        *(g["cql"].rstrip(";") for g in printed),
        f"CREATE ROLE {no_select} WITH LOGIN = true AND PASSWORD = '{NO_SELECT_PASSWORD}'",
        f"GRANT MODIFY ON KEYSPACE {secure_keyspace} TO {no_select}",
        f"CREATE ROLE {read_only} WITH LOGIN = true AND PASSWORD = '{READ_ONLY_PASSWORD}'",
        f"GRANT SELECT ON KEYSPACE {secure_keyspace} TO {read_only}",
    )
    yield cwd, sweeper, no_select, read_only
    secure_node.cql(*(f"DROP ROLE IF EXISTS {role}" for role in (sweeper, no_select, read_only)))


def _refused(result: subprocess.CompletedProcess, *, says: str, secret: str) -> None:
    assert result.returncode == 5, f"exit {result.returncode}:\n{result.stdout}\n{result.stderr}"
    assert says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert secret not in result.stdout + result.stderr


def test_sweeper_role_sweeps_and_verifies_over_tls(secure_node, secure_keyspace, roles):
    cwd, sweeper, *_ = roles
    cli = Cli(secure_node.url(sweeper, SWEEPER_PASSWORD, secure_keyspace), cwd, ("unreadable_window_seconds=0",))
    cli.ok("workload", "--transactions", "30")
    swept = cli.json("sweep")
    assert sum(p["cells_tombstoned"] for p in swept["results"]) > 0, swept
    assert not swept["failures"], swept
    cli.ok("verify")
    status = cli.json("status")
    assert all(p["progress"] >= 0 for p in status["shards"]), status
    everything = str(swept) + str(status)
    assert SWEEPER_PASSWORD not in everything


def test_sweeper_cannot_create_tables_or_init(secure_node, secure_keyspace, roles):
    cwd, sweeper, *_ = roles
    cli = Cli(secure_node.url(sweeper, SWEEPER_PASSWORD, secure_keyspace), cwd)
    _refused(cli.run("workload", "--transactions", "1", "--table", "new_table:THOROUGH"),
             says="no CREATE permission", secret=SWEEPER_PASSWORD)
    _refused(cli.run("init"), says="permission", secret=SWEEPER_PASSWORD)


def test_wrong_password_is_refused_once_with_exit_5(secure_node, secure_keyspace, roles):
    cwd, sweeper, *_ = roles
    wrong = "wr0ng-" + uuid.uuid4().hex[:8]
    result = Cli(secure_node.url(sweeper, wrong, secure_keyspace), cwd).run("status")
    _refused(result, says="refused the credentials", secret=wrong)


def test_missing_permission_names_it_and_writes_nothing(secure_node, secure_keyspace, roles):
    cwd, sweeper, no_select, read_only = roles
    before = Cli(secure_node.url(sweeper, SWEEPER_PASSWORD, secure_keyspace), cwd).json("status")
    result = Cli(secure_node.url(no_select, NO_SELECT_PASSWORD, secure_keyspace), cwd,
                 ("unreadable_window_seconds=0",)).run("sweep")
    _refused(result, says="no SELECT permission on <table", secret=NO_SELECT_PASSWORD)
    # SELECT without MODIFY: the sweep fails on its first write (its timestamps come from the timestamp server,
    # which needs no grant of the sweeper's: the run's record or its lock, before any delete)
    reader = Cli(secure_node.url(read_only, READ_ONLY_PASSWORD, secure_keyspace), cwd, ("unreadable_window_seconds=0",))
    _refused(reader.run("sweep"), says="no MODIFY permission on <table", secret=READ_ONLY_PASSWORD)
    after = Cli(secure_node.url(sweeper, SWEEPER_PASSWORD, secure_keyspace), cwd).json("status")
    assert [p["progress"] for p in after["shards"]] == [p["progress"] for p in before["shards"]]
    assert after["totals"] == before["totals"]
    assert all(p["lock_holder"] is None for p in after["shards"]), after["shards"]


def test_untrusted_certificate_is_a_tls_error(secure_node, secure_keyspace, roles, tmp_path):
    cwd, sweeper, *_ = roles
    # ssl=true without ssl_ca: the system's CAs do not trust the local CA
    url = f"cassandra://{sweeper}:{SWEEPER_PASSWORD}@{secure_node.host}/{secure_keyspace}?ssl=true"
    _refused(Cli(url, cwd).run("status"), says="TLS handshake failed", secret=SWEEPER_PASSWORD)
    # a CA of its own that did not sign the node's certificate
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_text(_self_signed_pem(tmp_path))
    url = secure_node.url(sweeper, SWEEPER_PASSWORD, secure_keyspace).replace(str(secure_node.ca), str(other_ca))
    _refused(Cli(url, cwd).run("status"), says="TLS handshake failed", secret=SWEEPER_PASSWORD)


def test_hostname_is_verified(secure_node, secure_keyspace, roles):
    """The node's certificate names 127.0.0.6: reached through another address (a TCP forwarder on
    127.0.0.10), the same trusted certificate is refused."""
    cwd, sweeper, *_ = roles
    with _forwarder("127.0.0.10", (secure_node.host, 9042)):
        url = secure_node.url(sweeper, SWEEPER_PASSWORD, secure_keyspace).replace(f"@{secure_node.host}/", "@127.0.0.10/")
        result = Cli(url, cwd).run("status", timeout=60)
    _refused(result, says="TLS handshake failed", secret=SWEEPER_PASSWORD)
    assert "127.0.0.10" in result.stderr


def test_plain_text_to_a_tls_only_node_says_to_use_tls(secure_node, secure_keyspace, roles):
    cwd, sweeper, *_ = roles
    url = f"cassandra://{sweeper}:{SWEEPER_PASSWORD}@{secure_node.host}/{secure_keyspace}"
    result = Cli(url, cwd).run("status")
    assert result.returncode in (3, 5), result.stderr
    assert "ssl=true" in result.stderr, result.stderr
    assert SWEEPER_PASSWORD not in result.stdout + result.stderr


def test_nodetool_needs_the_jmx_password(secure_node):
    ok = subprocess.run([str(CASSANDRA_SCRIPT), "secure", "nodetool", "status"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and f"UN  {secure_node.host}" in ok.stdout, ok.stdout + ok.stderr
    # the same JMX port without credentials is refused
    # the user's own HOME (the jar cache is ~/.cache/airflow-atlas): a HOME inside the checkout once made the
    # script fetch Cassandra into scripts/.cache, and a commit picked the jars up
    bare_env = {"PATH": "/usr/bin:/bin", "ATLAS_CASSANDRA_JMX_PORT": "7206", "HOME": str(Path.home())}
    if "ATLAS_CACHE_DIR" in os.environ:
        bare_env["ATLAS_CACHE_DIR"] = os.environ["ATLAS_CACHE_DIR"]
    bare = subprocess.run([str(CASSANDRA_SCRIPT), "nodetool", "status"], capture_output=True, text=True, timeout=120,
                          env=bare_env)
    assert bare.returncode != 0
    assert "Authentication failed" in bare.stdout + bare.stderr or "Credentials required" in bare.stdout + bare.stderr, bare.stderr[-2000:]


@contextlib.contextmanager
def _forwarder(address: str, target: tuple[str, int]):
    """A TCP forwarder on ``address``:9042 to ``target`` for the duration of the block (loopback only)."""
    server = socket.create_server((address, 9042))
    server.settimeout(0.2)
    stop = threading.Event()

    def pipe(a: socket.socket, b: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := a.recv(65536):
                b.sendall(chunk)
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def serve() -> None:
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(target, timeout=10)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        server.close()
        thread.join(timeout=5)


def _self_signed_pem(tmp_path) -> str:
    """A CA certificate that signed nothing of the node's (made with keytool, like the node's own CA)."""
    store = tmp_path / "other.p12"
    subprocess.run(["keytool", "-genkeypair", "-alias", "other", "-keyalg", "RSA", "-keysize", "2048", "-dname",
                    "CN=another CA", "-ext", "bc:c", "-keystore", str(store), "-storetype", "PKCS12",
                    "-storepass", "changeit"], check=True, capture_output=True, timeout=60)
    return subprocess.run(["keytool", "-exportcert", "-rfc", "-alias", "other", "-keystore", str(store), "-storepass",
                           "changeit"], check=True, capture_output=True, text=True, timeout=60).stdout


def test_the_sweeper_role_reads_the_nodes_pressure_and_the_applications_publications(secure_node, secure_keyspace,
                                                                                    roles):
    """Under least privilege: with exactly the grants `grants` prints, the sweeper role reads the node's thread
    pools (system_views, for the node-pressure guard), and publishes and reads the application's publications
    in atlas_app_latency (its transactions are an application's too)."""
    import time

    from airflow_atlas.store import AtlasStore
    from airflow_atlas.transactions.latency_table import read_publications

    _, sweeper, *_ = roles
    url = secure_node.url(sweeper, SWEEPER_PASSWORD, secure_keyspace, create_keyspace="false")
    with AtlasStore.open(url) as store:
        (node,) = store.kvs.node_pressure()
        assert {p.name for p in node.pools} >= {"MutationStage", "ReadStage", "CompactionExecutor"}, node
        before = time.time()
        store.transactions.run_read_only(lambda txn: None)
        store.transactions.close()  # publishes what is left
        assert store.transactions.latency is not None and store.transactions.latency.failures == 0
        assert [p for p in read_publications(store.kvs, before - 1, time.time() + 1)
                if p.client == store.transactions.latency.client], "the sweeper role could not publish"
