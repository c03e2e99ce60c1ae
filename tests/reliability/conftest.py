"""Fixtures of the reliability suite (faults, soak, bad input, security).

* ``@pytest.mark.reliability`` tests are the long variants: left out of the default run (CI), selected with
  ``-m reliability`` (any ``-m`` expression naming the marker decides on its own). Every fault has a short
  variant without the marker that the default run executes.
* ``shared_stores``: stores on the session's shared Cassandra node (``cassandra_node``), each in a keyspace
  of its own, dropped (asynchronously) at the end of the test; one whose cell handed out a timestamp (not
  served by the local timestamp servers) fails the test's teardown.
* ``private_cassandra`` (module scope): a SECOND Cassandra node, started by ``scripts/cassandra.sh`` with its
  own node directory and ports (``ATLAS_CASSANDRA_PORT_OFFSET``), that tests may stop and restart. The shared node,
  which other test runs use, is never stopped or restarted by this suite. Two timestamp server instances of its
  own serve its stores (tests/timestamp_servers.py, ``serving``; they live through the node's stops and find it
  again within a second of its restart); after each test the guard (``check_served``) fails a test that left a
  store of the node drawing from its cell.
* soak length: ``--soak-seconds N`` (when this directory is on the command line) or ``ATLAS_SOAK_SECONDS``.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import CASSANDRA_SCRIPT, REPO_ROOT, drop_keyspaces_soon
from tests.timestamp_servers import HOME, SERVED, cell_verdict, check_served, serving

from .helpers import open_store

RELIABILITY = "reliability"


def pytest_addoption(parser):
    parser.addoption(
        "--soak-seconds",
        type=float,
        default=None,
        help="length of the long soak test (reliability marker); default 150, or ATLAS_SOAK_SECONDS",
    )


def pytest_collection_modifyitems(config, items):
    """Leave the long reliability tests out unless a -m expression mentions the marker."""
    if RELIABILITY in (config.getoption("markexpr", "") or ""):
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker(RELIABILITY) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def soak_seconds(pytestconfig) -> float:
    value = pytestconfig.getoption("--soak-seconds", None) or os.environ.get("ATLAS_SOAK_SECONDS") or 150
    return float(value)


# ----- stores on the shared node ---------------------------------------------------------------------
class StoreFactory:
    """``make(config=None, shards=1, user=None, password=None, **url_query) -> (store, url)``: a store in a
    new keyspace of the shared node."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.made: list = []
        self.keyspaces: list[str] = []

    def __call__(self, config=None, shards: int = 1, user: str | None = None, password: str | None = None, **query):
        keyspace = f"atlas_rel_{uuid.uuid4().hex[:12]}"
        self.keyspaces.append(keyspace)
        auth = f"{user}:{password}@" if user and password else (f"{user}@" if user else "")
        options = "&".join(f"{k}={v}" for k, v in {"replication_factor": 1, **query}.items())
        url = f"cassandra://{auth}{self.host}:{self.port}/{keyspace}?{options}"
        store = open_store(url, config=config, shards=shards)
        self.made.append(store)
        return store, url

    def close(self, session) -> None:
        drew = []
        for store in self.made:
            try:
                verdict = cell_verdict(store.kvs)  # the local node's servers serve it (tests/timestamp_servers.py)
            except Exception:  # a store the test closed or broke on purpose: nothing to read
                verdict = None
            if verdict not in (None, SERVED):
                drew.append(f"{store.describe()}: {verdict}")
            try:
                store.close()
            except Exception:
                pass
        drop_keyspaces_soon(session, self.keyspaces, wait_seconds=0.3)  # throwaway: the node finishes them
        assert not drew, f"stores of the shared node drew from their cell instead of the timestamp servers: {drew}"


@pytest.fixture
def shared_stores(cassandra_node, cassandra_session):
    factory = StoreFactory(*cassandra_node)
    yield factory
    factory.close(cassandra_session)


@pytest.fixture(scope="module")
def module_stores(cassandra_node, cassandra_session):
    """Like ``shared_stores``, for module-scoped fixtures."""
    factory = StoreFactory(*cassandra_node)
    yield factory
    factory.close(cassandra_session)


# ----- a private Cassandra node that tests may stop -----------------------------------------------------
def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_offset() -> int:
    for offset in range(300, 3000, 37):
        if all(_port_free(base + offset) for base in (9042, 7000, 7199)):
            return offset
    raise RuntimeError("no free port offset for a private Cassandra node")


@dataclass
class PrivateNode:
    """A Cassandra node of this test session only (own directory and ports)."""

    directory: Path
    offset: int
    host: str = "127.0.0.1"
    log: list = field(default_factory=list)

    @property
    def port(self) -> int:
        return 9042 + self.offset

    def _env(self) -> dict:
        env = os.environ.copy()
        env.update(
            ATLAS_CASSANDRA_DIR=str(self.directory),
            ATLAS_CASSANDRA_PORT_OFFSET=str(self.offset),
            ATLAS_CASSANDRA_HEAP=os.environ.get("ATLAS_TEST_PRIVATE_CASSANDRA_HEAP", "512M"),
        )
        return env

    def _script(self, *args: str, timeout: float = 400) -> subprocess.CompletedProcess:
        started = time.monotonic()
        done = subprocess.run(
            [str(CASSANDRA_SCRIPT), *args], env=self._env(), capture_output=True, text=True, timeout=timeout
        )
        self.log.append((args, round(time.monotonic() - started, 1), done.returncode))
        return done

    def start(self) -> None:
        done = self._script("start")
        if done.returncode != 0:
            raise RuntimeError(f"private Cassandra node did not start:\n{done.stdout}\n{done.stderr}")

    def stop(self) -> None:
        """Graceful stop (SIGTERM, as an operator or a node restart would do)."""
        done = self._script("stop")
        if done.returncode != 0:
            raise RuntimeError(f"private Cassandra node did not stop:\n{done.stdout}\n{done.stderr}")

    def kill(self) -> None:
        """SIGKILL the node (a crashed JVM / lost machine)."""
        pid_file = self.directory / "cassandra.pid"
        pid = int(pid_file.read_text().strip())
        try:
            os.kill(pid, 9)
        except ProcessLookupError:  # gone already (e.g. it exited at a fault)
            pass
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        pid_file.unlink(missing_ok=True)

    def answers(self) -> bool:
        return self._script("status", timeout=60).returncode == 0

    def url(self, keyspace: str, **query) -> str:
        options = "&".join(f"{k}={v}" for k, v in {"replication_factor": 1, **query}.items())
        return f"cassandra://{self.host}:{self.port}/{keyspace}?{options}"


@pytest.fixture(scope="module")
def private_cassandra():
    """A second Cassandra node for the tests of one module, killed and removed after them: a node idling for
    the rest of the run would take a share of a core from every later test, and a node whose directory is
    removed next has nothing to shut down gracefully (a SIGTERM stop waits seconds for the shutdown hooks).
    Its two timestamp server instances (their logs in the node's directory) are stopped before it."""
    directory = Path(tempfile.mkdtemp(prefix="atlas-private-cassandra-"))
    node = PrivateNode(directory=directory, offset=_free_offset())
    node.start()
    try:
        with serving(node.url(HOME), directory / "timestamps"):
            yield node
    finally:
        try:
            if (directory / "cassandra.pid").exists():
                node.kill()
        finally:
            shutil.rmtree(directory, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """After each test's body: no store of the private node drew from its cell (tests/timestamp_servers.py)."""
    result = yield
    check_served(item.nodeid)
    return result


@pytest.fixture
def artifacts_dir() -> Path:
    path = REPO_ROOT / "test-artifacts"
    path.mkdir(exist_ok=True)
    return path
