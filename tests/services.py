"""The services the tests need, each started (or installed) by a session fixture at its first use: the local
Cassandra node, the Spark standalone master and its workers, and the packages whose binaries the tests run
(Chromium, sshd, Prometheus, Redis, statsd_exporter). ``scripts/test.sh`` starts none of them, so a test
command starts only what its tests ask for.

:meth:`Service.ensure` checks, else starts, under an exclusive file lock of the service (two pytest processes
at once - the two groups of the whole-suite run, or another checkout on this machine - start it once, the other
waits and finds it running); the package installs share one lock (one package manager per machine). A service
that cannot start fails the tests that ask for it with an error naming the service and the log of its start.
"""
from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = REPO_ROOT / "scripts"
LOCK_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "airflow-atlas-services"
"""The locks: machine-wide (the services' addresses are), one file per lock."""
LOG_DIR = REPO_ROOT / "test-artifacts" / "services"
"""Each start's output, one file per service (a start appends)."""
START_TIMEOUT_SECONDS = 1200.0
"""The longest a start may take: a first install of Chromium or the build of statsd_exporter takes minutes."""
PACKAGES_LOCK = "packages"
_LAUNCH_ENV_VARIABLE = "ATLAS_TEST_LAUNCH_ENV"
LAUNCH_ENV: dict[str, str] = (json.loads(os.environ[_LAUNCH_ENV_VARIABLE]) if _LAUNCH_ENV_VARIABLE in os.environ
                              else dict(os.environ))
"""The environment the test run was started with (tests/conftest.py imports this module before it sets the
tests' own variables; a pytest-xdist worker gets its controller's through the variable below): every check and
start runs in it, so a service a fixture starts runs as one started before the run would - without pytest's, the
conftest's or a test's monkeypatched variables (the Spark workers' executors inherit their daemon's
environment)."""
os.environ.setdefault(_LAUNCH_ENV_VARIABLE, json.dumps(LAUNCH_ENV))


@contextmanager
def exclusive(lock: str) -> Iterator[None]:
    """Holds the exclusive lock ``lock`` (a file under :data:`LOCK_DIR`) inside the block."""
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    with open(LOCK_DIR / f"{lock}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield


@dataclass(frozen=True)
class Service:
    """A service some tests need: ``start`` (a command that is itself idempotent) runs unless ``running`` (a
    command) exits 0; an install (no ``running``: its script returns at once when the package is there) then
    has ``binary``, which must exist afterwards."""

    name: str
    """What a failure names."""
    key: str
    """Its log's name (:data:`LOG_DIR`) and, unless ``lock`` says otherwise, its lock's."""
    start: tuple[str, ...]
    running: tuple[str, ...] = ()
    binary: str = ""
    lock: str = ""

    @property
    def log(self) -> Path:
        return LOG_DIR / f"{self.key}.log"

    def ensure(self) -> str:
        """Starts the service unless it runs and returns ``binary`` when it has one, else the start's standard
        output (empty when it ran already). Fails the asking test when the service cannot start."""
        with exclusive(self.lock or self.key):
            if self.running and subprocess.run(self.running, capture_output=True, env=LAUNCH_ENV).returncode == 0:
                return self.binary
            stdout = self._start()
        if self.binary and not os.access(self.binary, os.X_OK):
            self._fail(f"{self.binary} is missing after `{self._command()}`")
        return self.binary or stdout

    def _start(self) -> str:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "a") as log:
            log.write(f"----- {time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()}: {self._command()}\n")
            log.flush()
            try:
                done = subprocess.run(self.start, stdout=subprocess.PIPE, stderr=log, text=True, env=LAUNCH_ENV,
                                      timeout=START_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self._fail(f"`{self._command()}` did not end within {START_TIMEOUT_SECONDS:.0f} s")
            log.write(done.stdout)
        if done.returncode != 0:
            self._fail(f"`{self._command()}` exited {done.returncode}")
        return done.stdout.strip()

    def _command(self) -> str:
        return " ".join(str(Path(part).relative_to(REPO_ROOT)) if part.startswith(str(REPO_ROOT)) else part
                        for part in self.start)

    def _fail(self, what: str) -> None:
        tail = "".join(self.log.read_text(errors="replace").splitlines(keepends=True)[-30:]) if self.log.exists() else ""
        pytest.fail(f"{self.name} is not available: {what} (its log: {self.log}):\n{tail}", pytrace=False)


def _script(name: str, *args: str) -> tuple[str, ...]:
    return (str(SCRIPTS / name), *args)


LOCAL_NODE = Service("the local Cassandra node (127.0.0.1)", "cassandra", _script("cassandra.sh", "start"),
                     running=_script("cassandra.sh", "status"))
SPARK_MASTER = Service("the Spark standalone master and its workers (127.0.0.5)", "spark", _script("spark.sh", "start"),
                       running=_script("spark.sh", "status"))
CHROMIUM = Service("Chromium", "chromium", _script("ensure_chromium.sh"),
                   binary=os.environ.get("ATLAS_CHROMIUM", "/usr/bin/chromium"), lock=PACKAGES_LOCK)
SSHD = Service("sshd (OpenSSH's server)", "sshd", _script("ensure_sshd.sh"),
               binary=os.environ.get("ATLAS_SSHD", "/usr/sbin/sshd"), lock=PACKAGES_LOCK)
PROMETHEUS = Service("Prometheus", "prometheus", _script("ensure_prometheus.sh"),
                     binary=os.environ.get("ATLAS_PROMETHEUS", "/usr/bin/prometheus"), lock=PACKAGES_LOCK)
REDIS = Service("Redis", "redis", _script("ensure_redis.sh"),
                binary=os.environ.get("ATLAS_REDIS_SERVER", "/usr/bin/redis-server"), lock=PACKAGES_LOCK)
STATSD_EXPORTER = Service("the StatsD exporter (statsd_exporter)", "statsd-exporter",
                          _script("ensure_statsd_exporter.sh"), lock=PACKAGES_LOCK)
"""Its binary is the one the script prints (a Debian package, the Go build, or ``$ATLAS_STATSD_EXPORTER``)."""
