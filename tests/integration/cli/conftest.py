"""Helpers of the CLI suite: run the real ``atlas-sweep`` as a subprocess.

The installed console script (``.venv/bin/atlas-sweep``) is used when present, otherwise
``python -m airflow_atlas.cli`` with the repository on PYTHONPATH: both run the same ``main``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

_SCRIPT = REPO_ROOT / ".venv" / "bin" / "atlas-sweep"


def cli_command() -> list[str]:
    if _SCRIPT.exists():
        return [str(_SCRIPT)]
    return [sys.executable, "-m", "airflow_atlas.cli"]


class Cli:
    """Runs ``atlas-sweep`` against one store URL (pass ``store=None`` to leave ``--store`` out)."""

    def __init__(self, url: str | None, cwd: Path, settings: tuple[str, ...] = ()):
        self.url = url
        self.cwd = cwd
        self.settings = settings

    def run(self, *args: str, store: bool = True, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        full = os.environ.copy()
        full.pop("ATLAS_STORE_URL", None)
        full["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + full.get("PYTHONPATH", "")
        full.update(env or {})
        argv = list(args)
        if store and self.url is not None:
            argv += ["--store", self.url]
        for setting in self.settings:
            argv += ["--set", setting]
        return subprocess.run(cli_command() + argv, capture_output=True, text=True, env=full, cwd=self.cwd, timeout=timeout)

    def ok(self, *args: str, **kw) -> subprocess.CompletedProcess:
        result = self.run(*args, **kw)
        assert result.returncode == 0, f"atlas-sweep {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        assert "Traceback" not in result.stderr, result.stderr
        return result

    def json(self, *args: str, **kw) -> dict:
        return json.loads(self.ok(*args, "--json", **kw).stdout)


@pytest.fixture
def sqlite_cli(tmp_path) -> Cli:
    # CONSERVATIVE sweep normally trails by an hour; a zero window lets the test sweep what it just wrote.
    return Cli(f"sqlite:///{tmp_path / 'atlas.db'}", tmp_path, ("unreadable_window_seconds=0",))
