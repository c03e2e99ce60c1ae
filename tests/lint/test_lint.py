"""The linters, run as a reviewer runs them: ``ruff check`` and ``mypy`` with the configuration in
pyproject.toml (``[tool.ruff]``, ``[tool.mypy]``), from the test environment (both are pinned in the
``test`` extra and requirements.lock). A finding fails the test run, and so CI; the failure message lists
the findings. The last two tests show that each linter, run this way, does report a finding.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lint.conftest import Mypy

REPO_ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = REPO_ROOT / "pyproject.toml"
# ruff covers the tests, benchmarks and scripts (the demo) too; mypy checks what ships and runs (its `files`
# in pyproject.toml; not scripts/: its cassandra/ directory would shadow the driver package for mypy).
RUFF_PATHS = ("airflow_atlas", "dags", "spark_jobs", "tests", "bench", "scripts")
# mypy on a fresh clone (no cache) analyses the Airflow package too: ~40 s of CPU (1-2 min when the machine is busy).
TIMEOUT_S = 900


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m <linter> ...`` with this interpreter, so mypy sees exactly the test environment's packages."""
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**os.environ, "NO_COLOR": "1"},
    )


def _report(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit code {result.returncode}\n{result.stdout}{result.stderr}"


def test_ruff_reports_nothing() -> None:
    result = _run("ruff", "check", "--output-format", "concise", *RUFF_PATHS)
    if result.returncode != 0:
        pytest.fail(f"ruff check: {_report(result)}", pytrace=False)


def test_mypy_reports_nothing(mypy_run: Mypy) -> None:
    """mypy over its ``files``: the run tests/lint/conftest.py started in the background with the session."""
    code, output = mypy_run.result(TIMEOUT_S)
    if code != 0 or "Success: no issues found" not in output:
        pytest.fail(f"mypy: exit code {code}\n{output}", pytrace=False)


def test_ruff_reports_a_finding(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef pairs(a: list[int], b: list[int]) -> list[tuple[int, int]]:\n"
                   "    return list(zip(a, b))\n")
    result = _run("ruff", "check", "--no-cache", "--output-format", "json", "--config", str(PYPROJECT), str(bad))
    assert result.returncode == 1, _report(result)
    assert sorted(finding["code"] for finding in json.loads(result.stdout)) == ["B905", "F401"], _report(result)


def test_mypy_reports_a_finding(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def half(n: int) -> int:\n    return n / 2\n")
    result = _run("mypy", "--config-file", str(PYPROJECT), "--cache-dir", os.devnull, str(bad))
    assert result.returncode == 1, _report(result)
    assert "[return-value]" in result.stdout, _report(result)
