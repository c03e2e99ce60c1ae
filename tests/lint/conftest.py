"""mypy starts when the session's tests are known (``pytest_collection_finish``), in the background, when
``test_mypy_reports_nothing`` is among them: on a fresh clone (no cache) it analyses the Airflow package too,
about half a minute of one core, which then overlaps the tests that run before it (they wait on Cassandra,
Spark and Airflow subprocesses, and leave a core to spare). The test waits for that run's result.

One run per test run: under pytest-xdist every worker collects every test, and two mypy runs on one cache
directory corrupt it (an INTERNAL ERROR in the clean-clone run of 2026-12-04), so the first worker to finish
collecting starts it (an exclusive directory named by the run's id) and writes its exit code and output to
files there, which the worker that runs the test reads.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
MYPY_TEST = "test_mypy_reports_nothing"
RUNS_DIR = Path(tempfile.gettempdir()) / "airflow-atlas-mypy"


RUN_ID = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex
"""The test run's id: pytest-xdist's (its workers share it), else one of this process's own."""


class Mypy:
    """The test run's one ``python -m mypy`` (configuration and files from pyproject.toml), in the background:
    its output and then its exit code in files of ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.output = directory / "output"
        self.code = directory / "code"

    @classmethod
    def start_once(cls) -> Mypy:
        """The run's mypy: started now unless another process of the run has started it."""
        run = cls(RUNS_DIR / RUN_ID)
        RUNS_DIR.mkdir(parents=True, exist_ok=True)
        try:
            run.directory.mkdir()
        except FileExistsError:
            return run  # another worker started it
        subprocess.Popen(  # mypy's output, then its exit code (written last, so its presence means done)
            ["sh", "-c", '"$0" -m mypy >"$1" 2>&1; echo $? >"$2.part"; mv "$2.part" "$2"',
             sys.executable, str(run.output), str(run.code)],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "NO_COLOR": "1"},
            start_new_session=True,  # it outlives the worker that started it, which may end first
        )
        return run

    def result(self, timeout: float) -> tuple[int, str]:
        """(exit code, output) of the run once it ended; (-1, what it wrote so far) past ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.code.exists():
            if time.monotonic() > deadline:
                return -1, f"mypy did not end within {timeout:g}s; its output so far:\n" + self._output()
            time.sleep(0.5)
        code, output = int(self.code.read_text().strip() or -1), self._output()
        shutil.rmtree(self.directory, ignore_errors=True)
        return code, output

    def _output(self) -> str:
        return self.output.read_text() if self.output.exists() else ""


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(item.name == MYPY_TEST and REPO_ROOT / "tests" / "lint" in item.path.parents for item in session.items):
        Mypy.start_once()


@pytest.fixture
def mypy_run() -> Mypy:
    """The run started with the session (started now when this test was not among the collected)."""
    return Mypy.start_once()
