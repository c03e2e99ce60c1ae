"""A Spark Connect server of a test's own (``scripts/spark.sh connect-start`` with its own directory, address
and port), which the test may stop and start again. The Airflow processes tests start are
devkit/airflow.py's (shared with the benchmarks)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from devkit.airflow import free_port
from tests.conftest import REPO_ROOT


class ConnectServer:
    """A Spark Connect server of a test's own: ``scripts/spark.sh connect-start`` with its own directory
    (``logs/connect.log``), loopback address ``host`` and a free port; ``local[2]``, 768 MiB."""

    def __init__(self, directory: Path, host: str = "127.0.0.1"):
        self.host = host
        self.port = free_port(host)
        self.directory = directory
        self.env = {**os.environ, "ATLAS_SPARK_DIR": str(directory), "ATLAS_SPARK_CONNECT_HOST": host,
                    "ATLAS_SPARK_CONNECT_PORT": str(self.port), "ATLAS_SPARK_CONNECT_MASTER": "local[2]",
                    "ATLAS_SPARK_CONNECT_MEMORY": "768m"}
        self.script = str(REPO_ROOT / "scripts" / "spark.sh")

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}"

    def _do(self, command: str, timeout: float) -> None:
        done = subprocess.run([self.script, command], env=self.env, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            pytest.fail(f"scripts/spark.sh {command} failed:\n{done.stderr[-3000:]}")

    def start(self) -> None:
        self._do("connect-start", 400)

    def stop(self) -> None:
        self._do("connect-stop", 120)

    def kill(self) -> None:
        """SIGKILL the server (a crash: no graceful shutdown); ``start`` starts a new one."""
        pid = int((self.directory / "connect.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
        pytest.fail(f"the Connect server (pid {pid}) did not exit after SIGKILL")
