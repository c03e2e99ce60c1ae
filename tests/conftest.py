"""Session fixtures shared by the whole suite: a real Cassandra node (and the timestamp servers that serve its
stores), the Spark standalone master, Prometheus's binary, a local SparkSession and a temporary Airflow home.
Nothing here is mocked: each service fixture starts its service at its first use when it does not run
(tests/services.py: under a file lock, so both workers of the whole-suite run may ask at once), the Spark fixture
runs local[2], the Airflow fixture migrates a real SQLite metadata database.

The whole suite runs on two pytest-xdist workers (scripts/test.sh: ``-n 2 --dist loadgroup``), each a process
with its own session fixtures, temporary directory (xdist's basetemp per worker) and Airflow home (below);
:func:`pytest_collection_modifyitems` keeps each tier of :data:`XDIST_GROUPS`, and every other module, on one
worker.
"""
from __future__ import annotations

import base64
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.services import LAUNCH_ENV, LOCAL_NODE, PROMETHEUS, REPO_ROOT, SCRIPTS, SPARK_MASTER

CASSANDRA_SCRIPT = SCRIPTS / "cassandra.sh"

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
"""This process's pytest-xdist worker (``gw0``, ``gw1``), "" in a run without workers."""


def _default(name: str, value: str) -> None:
    """$name is ``value`` unless the run was started with it set (a worker inherits the variables this module set
    in the process that started it: its own are set again, from the run's launch environment)."""
    os.environ[name] = LAUNCH_ENV.get(name, value)


# ----- Airflow environment: must be set before anything imports airflow ---------------------------
# A home of this process's own: a worker's Airflow (its SQLite metadata database, its DAG runs) is not the
# other's; a given $ATLAS_TEST_AIRFLOW_HOME gets a directory per worker.
_GIVEN_HOME = LAUNCH_ENV.get("ATLAS_TEST_AIRFLOW_HOME")
_AIRFLOW_HOME = (Path(_GIVEN_HOME, WORKER) if _GIVEN_HOME
                 else Path(tempfile.mkdtemp(prefix=f"atlas-airflow-home-{WORKER + '-' if WORKER else ''}")))
_AIRFLOW_HOME.mkdir(parents=True, exist_ok=True)
os.environ["AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
_default("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO_ROOT / "dags")
_default("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
_default("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{_AIRFLOW_HOME}/airflow.db")
_default("AIRFLOW__CORE__EXECUTOR", "LocalExecutor")
# One Fernet key for every Airflow process this process starts, as a deployment needs (docker/airflow.env.example):
# without it each process makes its own and cannot decrypt a Variable another one stored.
_default("AIRFLOW__CORE__FERNET_KEY", base64.urlsafe_b64encode(os.urandom(32)).decode())
_default("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO")
_default("PYSPARK_PYTHON", sys.executable)
_default("PYSPARK_DRIVER_PYTHON", sys.executable)
# Every Spark driver JVM the tests start (local[N] sessions, spark-submit, the Connect servers) compiles with C1
# only and collects with the serial GC: its jobs last seconds, so C2's compilations are CPU spent for nothing on
# a suite that keeps both cores busy. Measured 2026-11-30 on the 2-core VM (machine-wide busy CPU, 2-3 runs
# each): tests/spark/test_spark_jobs.py 75.7 -> 56.6 CPU-s, wall 52.8 -> 46.1 s.
_default("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
# The same flags for the executors on the standalone master, through the spark-defaults.conf every spark-submit and
# local session of the tests reads (spark.executor.extraJavaOptions). Measured 2026-11-30 12:10 UTC on the
# 2-core VM (2 runs each): tests/spark/test_spark_standalone.py 55.5 -> 44.5 CPU-s, wall 40.4 -> 35.3 s.
_default("SPARK_CONF_DIR", str(Path(__file__).resolve().parent / "spark_conf"))

# Every store the tests initialise on the local node is served by the local timestamp servers (tests/timestamp_servers.py).
_default("ATLAS_TIMESTAMP_SERVERS", "127.0.0.1:9350,127.0.0.1:9351")

CASSANDRA_HOST = os.environ.get("ATLAS_TEST_CASSANDRA_HOST", "127.0.0.1")
CASSANDRA_PORT = int(os.environ.get("ATLAS_TEST_CASSANDRA_PORT", "9042"))


def drop_keyspaces_soon(session, keyspaces, wait_seconds: float = 5.0) -> None:
    """Ask the node(s) to drop ``keyspaces`` and wait at most ``wait_seconds`` in all: a drop of a keyspace
    with a dozen tables takes seconds (tens on a loaded cluster), the node finishes it on its own, and a
    test's keyspace names are its own. A failed drop never fails a test."""
    pending = []
    for keyspace in keyspaces:
        done = threading.Event()
        try:
            future = session.execute_async(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
            future.add_callbacks(lambda _, d=done: d.set(), lambda _, d=done: d.set())
            pending.append(done)
        except Exception:
            pass
    deadline = time.monotonic() + wait_seconds
    for done in pending:
        done.wait(max(0.0, deadline - time.monotonic()))


# ----- the workers: what must share one (scripts/test.sh runs the suite with -n 2 --dist loadgroup) ----------------
XDIST_GROUPS: dict[str, str] = {
    # A tier whose session, package or module fixtures start servers on fixed addresses, or cost minutes to start
    # twice: path (below the repository) -> the xdist group that keeps it on one worker (each worker runs its
    # session fixtures itself). docs/TESTING.md, "The whole suite", lists them with their reasons.
    "tests/integration/security": "security",  # the secured node (127.0.0.6) and 3-node cluster (127.0.0.7-9)
    "tests/datacenters": "datacenters",  # the two-datacenter cluster (127.0.0.21-23)
    "tests/deploy": "deploy",  # scripts/deploy.sh once for the package (127.0.0.11)
    "tests/cluster": "cluster",  # the 3-node cluster (127.0.0.2-4); run alone by scripts/test.sh
    "tests/reliability": "reliability",  # a private Cassandra node per module; faults on the shared services
    "tests/browser": "browser",  # Airflow as its own processes and Chromium, per module
    "tests/spark": "spark",  # a Spark Connect server for the session, the twin stores, local[2]
    "tests/lint": "lint",  # mypy's one run in the background (tests/lint/conftest.py)
}


def xdist_group(path: str) -> str:
    """The xdist group of a test in ``path`` (a file below the repository): its tier's (:data:`XDIST_GROUPS`),
    else its module's (``tests/unit/test_grants.py`` -> ``unit/test_grants``): a module's tests run on one
    worker in their order, as in one process, and its module fixtures start once."""
    tier = next((tier for tier in XDIST_GROUPS if path == tier or path.startswith(tier + "/")), None)
    return XDIST_GROUPS[tier] if tier else path.removeprefix("tests/").removesuffix(".py")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which turns each item's group into its scheduling unit
def pytest_collection_modifyitems(config, items):
    """On a worker (the collection happens there), every test gets its :func:`xdist_group` unless it has one."""
    if not hasattr(config, "workerinput"):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(xdist_group(item.path.relative_to(REPO_ROOT).as_posix())))


def _ungrouped(nodeid: str) -> str:
    """A node id without the ``@group`` suffix pytest-xdist gives it under ``--dist loadgroup``."""
    head, at, group = nodeid.rpartition("@")
    return head if at and "]" not in group and "::" not in group else nodeid


_TIER_SECONDS: dict[str, float] = {}
_TEST_SECONDS: dict[str, float] = {}


def _tier(nodeid: str) -> str:
    """``tests/integration/sweep/test_x.py::t`` -> ``tests/integration/sweep``; ``tests/unit/...`` -> ``tests/unit``."""
    parts = nodeid.split("::", 1)[0].split("/")[:-1]
    return "/".join(parts[:3] if parts[1:2] == ["integration"] else parts[:2])


def pytest_runtest_logreport(report):
    """Every test's time: in a run on workers, the first process is told each report too and writes the lists."""
    nodeid = _ungrouped(report.nodeid)
    tier = _tier(nodeid)
    _TIER_SECONDS[tier] = _TIER_SECONDS.get(tier, 0.0) + report.duration
    _TEST_SECONDS[nodeid] = _TEST_SECONDS.get(nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """Where the suite's time goes, per tier (setup + call + teardown of its tests; the budget is 50 minutes
    on 2 cores): the numbers to start from when the suite must get faster."""
    if not _TIER_SECONDS or hasattr(terminalreporter.config, "workerinput"):  # a worker: the first process writes
        return
    terminalreporter.section("time per tier")
    for tier, seconds in sorted(_TIER_SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{seconds:8.1f}s  {tier}")
    # Every test's time (setup + call + teardown), slowest first, per pytest run (named by its --basetemp:
    # scripts/test.sh's whole suite writes suite.tsv and alone.tsv): the whole list, where --durations prints 30.
    basetemp = terminalreporter.config.option.basetemp
    out = REPO_ROOT / "test-artifacts" / "durations" / f"{Path(basetemp).name if basetemp else 'pytest'}.tsv"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = sorted(_TEST_SECONDS.items(), key=lambda kv: -kv[1])
    out.write_text("".join(f"{seconds:.2f}\t{nodeid}\n" for nodeid, seconds in rows))
    terminalreporter.write_line(f"every test's time: {out.relative_to(REPO_ROOT)}")


def pytest_configure(config):
    # Keep test artifacts (screenshots, reports) in one place CI can collect.
    (REPO_ROOT / "test-artifacts").mkdir(exist_ok=True)


@pytest.fixture(scope="session")
def cassandra_node():
    """A running local Cassandra node: started with scripts/cassandra.sh unless one already answers.

    Returns ``(host, port)``. Fails the test (never skips) when the node cannot start.
    """
    LOCAL_NODE.ensure()
    from tests.timestamp_servers import ensure_local_servers

    ensure_local_servers()
    return CASSANDRA_HOST, CASSANDRA_PORT


@pytest.fixture(scope="session")
def spark_master() -> dict[str, str]:
    """The Spark standalone master with two workers (127.0.0.5): started with scripts/spark.sh unless it runs.

    Returns the driver's properties (``scripts/spark.sh conf``) as a dict."""
    SPARK_MASTER.ensure()
    conf = subprocess.run([str(SCRIPTS / "spark.sh"), "conf"], capture_output=True, text=True, timeout=60)
    assert conf.returncode == 0, conf.stderr
    return dict(line.split(" ", 1) for line in conf.stdout.splitlines() if line.strip())


@pytest.fixture(scope="session")
def prometheus_binary() -> str:
    """Prometheus's server binary (Debian's package, installed by scripts/ensure_prometheus.sh when missing)."""
    return PROMETHEUS.ensure()


@pytest.fixture(scope="session")
def cassandra_session(cassandra_node):
    """A raw cassandra-driver session on the node (one Cluster per test process)."""
    from cassandra.cluster import Cluster

    host, port = cassandra_node
    cluster = Cluster([host], port=port, protocol_version=5)
    session = cluster.connect()
    # The suite's DDL (a keyspace per test) goes through this session: on a loaded 2-core machine a schema
    # change can take longer than the driver's 10 s default, which is not what any test is about.
    session.default_timeout = 60
    yield session
    cluster.shutdown()


@pytest.fixture(scope="session")
def cassandra_keyspace(cassandra_session):
    """A keyspace of this test run's own (dropped at the end of the session)."""
    name = f"atlas_test_{uuid.uuid4().hex[:12]}"
    cassandra_session.execute(
        f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
    )
    yield name
    drop_keyspaces_soon(cassandra_session, [name], wait_seconds=0.3)  # the node finishes it on its own


@pytest.fixture
def fresh_keyspace(cassandra_session):
    """A keyspace for one test (for tests that need an empty store)."""
    name = f"atlas_t_{uuid.uuid4().hex[:12]}"
    cassandra_session.execute(
        f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
    )
    yield name
    try:
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=120)
    except Exception:
        pass


@pytest.fixture(scope="session")
def spark():
    """A real local SparkSession on local[2]."""
    import logging

    from pyspark.sql import SparkSession

    logging.getLogger("py4j").setLevel(logging.WARNING)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("airflow-atlas-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.task.maxFailures", "4")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def airflow_home():
    """AIRFLOW_HOME in a temporary directory with a migrated SQLite metadata database."""
    marker = _AIRFLOW_HOME / ".migrated"
    if not marker.exists():
        result = subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"],
            capture_output=True,
            text=True,
            env=os.environ.copy(),
        )
        if result.returncode != 0:
            pytest.fail(f"airflow db migrate failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        marker.touch()
    return _AIRFLOW_HOME


@pytest.fixture(scope="session")
def connect_server_dir(tmp_path_factory):
    """The directory of the Connect server that ``connect_server`` starts (``logs/connect.log``)."""
    return tmp_path_factory.mktemp("spark-connect")


@pytest.fixture(scope="session")
def connect_server(connect_server_dir):
    """The ``sc://`` URL of a real Spark Connect server on loopback: ``$ATLAS_TEST_SPARK_CONNECT`` when set,
    else one started for this session by ``scripts/spark.sh connect-start`` (master ``local[2]``, its own
    directory and a free port) at its first use and stopped at the end of the session (here, not in
    tests/spark, because the security tests use it too: Spark Connect over TLS to the secured node).
    The server's directory (its log) is ``connect_server_dir``."""
    from tests.processes import ConnectServer

    given = os.environ.get("ATLAS_TEST_SPARK_CONNECT")
    if given:
        yield given
        return
    server = ConnectServer(connect_server_dir)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()
