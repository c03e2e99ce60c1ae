"""mypy starts when the session's tests are known (``pytest_collection_finish``), in the background, when
``test_mypy_reports_nothing`` is among them: on a fresh clone (no cache) it analyses the Airflow package too,
about half a minute of one core, which then overlaps the tests that run before it (they wait on Cassandra,
Spark and Airflow subprocesses, and leave a core to spare). The test waits for that run's result."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
MYPY_TEST = "test_mypy_reports_nothing"


class Mypy:
    """One ``python -m mypy`` run (configuration and files from pyproject.toml) in the background."""

    def __init__(self) -> None:
        self.output: IO[str] = tempfile.TemporaryFile("w+")  # a file: a full pipe would block mypy
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mypy"],
            cwd=REPO_ROOT,
            stdout=self.output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
        )

    def result(self, timeout: float) -> tuple[int, str]:
        """(exit code, output) of the run; a run past ``timeout`` seconds is killed (exit code -9)."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.output.seek(0)
        return code, self.output.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.output.close()


_started: list[Mypy] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(item.name == MYPY_TEST and REPO_ROOT / "tests" / "lint" in item.path.parents for item in session.items):
        _started.append(Mypy())


def pytest_sessionfinish(session: pytest.Session) -> None:
    for run in _started:
        run.stop()


@pytest.fixture
def mypy_run() -> Mypy:
    """The run started with the session (one is started now when this test was not among the collected)."""
    if not _started:
        _started.append(Mypy())
    return _started[0]
