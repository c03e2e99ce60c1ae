"""Session fixtures shared by the whole suite: a real Cassandra node (and the timestamp servers that serve its
stores), the Spark standalone master, Prometheus's binary, a local SparkSession and a temporary Airflow home.
Nothing here is mocked: each service fixture starts its service at its first use when it does not run
(tests/services.py: under a file lock, so both groups of the whole-suite run may ask at once), the Spark fixture
runs local[2], the Airflow fixture migrates a real SQLite metadata database.
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

from tests.groups import mark_groups
from tests.services import LAUNCH_ENV, LOCAL_NODE, PROMETHEUS, REPO_ROOT, SCRIPTS, SPARK_MASTER

CASSANDRA_SCRIPT = SCRIPTS / "cassandra.sh"

# ----- a pytest-xdist worker starts as a pytest of its own would -------------------------------------------------
# It inherits the environment of the controller, which has run this module (its Airflow home and database among
# it): start again from the environment the run was launched with, so each worker sets its own below.
if "PYTEST_XDIST_WORKER" in os.environ:
    _xdist = {name: value for name, value in os.environ.items() if name.startswith("PYTEST_XDIST_")}
    os.environ.clear()
    os.environ.update(LAUNCH_ENV)
    os.environ.update(_xdist)

# ----- Airflow environment: must be set before anything imports airflow ---------------------------
_AIRFLOW_HOME = Path(os.environ.get("ATLAS_TEST_AIRFLOW_HOME") or tempfile.mkdtemp(prefix="atlas-airflow-home-"))
os.environ["AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO_ROOT / "dags")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
os.environ.setdefault("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{_AIRFLOW_HOME}/airflow.db")
os.environ.setdefault("AIRFLOW__CORE__EXECUTOR", "LocalExecutor")
# One Fernet key for every Airflow process of the run, as a deployment needs (docker/airflow.env.example):
# without it each process makes its own and cannot decrypt a Variable another one stored.
os.environ.setdefault("AIRFLOW__CORE__FERNET_KEY", base64.urlsafe_b64encode(os.urandom(32)).decode())
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# Every Spark driver JVM the tests start (local[N] sessions, spark-submit, the Connect servers) compiles with C1
# only and collects with the serial GC: its jobs last seconds, so C2's compilations are CPU spent for nothing on
# a suite that keeps both cores busy. Measured 2026-11-30 on the 2-core VM (machine-wide busy CPU, 2-3 runs
# each): tests/spark/test_spark_jobs.py 75.7 -> 56.6 CPU-s, wall 52.8 -> 46.1 s.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
# The same flags for the executors on the standalone master, through the spark-defaults.conf every spark-submit and
# local session of the tests reads (spark.executor.extraJavaOptions). Measured 2026-11-30 12:10 UTC on the
# 2-core VM (2 runs each): tests/spark/test_spark_standalone.py 55.5 -> 44.5 CPU-s, wall 40.4 -> 35.3 s.
os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).resolve().parent / "spark_conf"))

# Every store the tests initialise on the local node is served by the local timestamp servers (tests/timestamp_servers.py).
os.environ.setdefault("ATLAS_TIMESTAMP_SERVERS", "127.0.0.1:9350,127.0.0.1:9351")

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


_TIER_SECONDS: dict[str, float] = {}
_TEST_SECONDS: dict[str, float] = {}


def _tier(nodeid: str) -> str:
    """``tests/integration/sweep/test_x.py::t`` -> ``tests/integration/sweep``; ``tests/unit/...`` -> ``tests/unit``."""
    parts = nodeid.split("::", 1)[0].split("/")[:-1]
    return "/".join(parts[:3] if parts[1:2] == ["integration"] else parts[:2])


def pytest_runtest_logreport(report):
    tier = _tier(report.nodeid)
    _TIER_SECONDS[tier] = _TIER_SECONDS.get(tier, 0.0) + report.duration
    _TEST_SECONDS[report.nodeid] = _TEST_SECONDS.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """Where the suite's time goes, per tier (setup + call + teardown of its tests; the budget is 50 minutes
    on 2 cores): the numbers to start from when the suite must get faster."""
    if not _TIER_SECONDS:
        return
    terminalreporter.section("time per tier")
    for tier, seconds in sorted(_TIER_SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{seconds:8.1f}s  {tier}")
    # Every test's time (setup + call + teardown), slowest first, per pytest run (named by its --basetemp: the
    # whole suite's groups, then alone): the whole list, where --durations prints the slowest 30.
    basetemp = terminalreporter.config.option.basetemp
    out = REPO_ROOT / "test-artifacts" / "durations" / f"{Path(basetemp).name if basetemp else 'pytest'}.tsv"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = sorted(_TEST_SECONDS.items(), key=lambda kv: -kv[1])
    out.write_text("".join(f"{seconds:.2f}\t{nodeid}\n" for nodeid, seconds in rows))
    terminalreporter.write_line(f"every test's time: {out.relative_to(REPO_ROOT)}")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the marks (and names the group)
def pytest_collection_modifyitems(items):
    """Each test's group (tests/groups.py): one worker runs all of a group under ``--dist loadgroup``."""
    mark_groups(items, REPO_ROOT)


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
