"""What git tracks stays source: no file over 1 MB, nothing under a cache directory and no packaged binary
(jar, wheel, archive, shared library), unless listed in ``DATA_ON_PURPOSE`` with the reason it is kept.

The project fetches Cassandra and Spark at run time (Maven, the lock file); a clone must never carry them. A
Cassandra distribution (67 MB of jars under ``scripts/.cache/``) was once committed by accident: a test ran
``scripts/cassandra.sh`` with HOME set to the scripts directory, so the jar cache landed in the checkout.
Sizes are those of the blobs in the index (what a commit would record), not of the working tree's files.
"""
from __future__ import annotations

import subprocess
from pathlib import Path, PurePosixPath

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_BYTES = 1024 * 1024
# Directory names that hold caches, downloads or environments, never source.
CACHE_DIRS = frozenset({".cache", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis",
                        ".m2", ".ivy2", ".gradle", "node_modules", ".venv", "venv"})
# Packaged binaries: a distribution, a build output or a download.
BINARY_SUFFIXES = frozenset({".jar", ".war", ".whl", ".egg", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".zip", ".7z",
                             ".so", ".dylib", ".dll", ".exe", ".class", ".pyc"})
# The allow-list (the only one): path -> why this file is data the repository keeps on purpose.
DATA_ON_PURPOSE: dict[str, str] = {}


def findings(files: dict[str, int], allowed: dict[str, str]) -> list[str]:
    """One line per tracked file (path -> size in bytes) that breaks the rule and is not in ``allowed``."""
    found = []
    for path, size in sorted(files.items()):
        if path in allowed:
            continue
        parts = PurePosixPath(path)
        if caches := CACHE_DIRS.intersection(parts.parts[:-1]):
            found.append(f"{path}: lies in a cache directory ({', '.join(sorted(caches))})")
        elif parts.suffix.lower() in BINARY_SUFFIXES:
            found.append(f"{path}: a packaged binary ({parts.suffix})")
        elif size > MAX_BYTES:
            found.append(f"{path}: {size / MAX_BYTES:.1f} MB, over the 1 MB limit")
    return found


def tracked_files() -> dict[str, int]:
    """Every path in the git index with the size of its blob (``git ls-files --stage`` + ``git cat-file``)."""
    staged = subprocess.run(["git", "ls-files", "--stage", "-z"], cwd=REPO_ROOT, capture_output=True, check=True)
    paths: dict[str, str] = {}
    for entry in staged.stdout.decode().split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            mode, blob, _stage = meta.split()
            if mode != "160000":  # a submodule's commit has no blob here
                paths[path] = blob
    sizes = subprocess.run(["git", "cat-file", "--batch-check=%(objectname) %(objectsize)"], cwd=REPO_ROOT,
                           input="\n".join(paths.values()).encode(), capture_output=True, check=True)
    size_of = dict(line.split() for line in sizes.stdout.decode().splitlines())
    return {path: int(size_of[blob]) for path, blob in paths.items()}


def test_no_cache_binary_or_large_file_is_tracked() -> None:
    files = tracked_files()
    assert "pyproject.toml" in files, "git ls-files did not list the repository's files"
    if found := findings(files, DATA_ON_PURPOSE):
        pytest.fail("tracked files that must not be in the repository (git rm --cached them, or list them in "
                    "DATA_ON_PURPOSE with the reason):\n" + "\n".join(found), pytrace=False)


def test_every_allow_listed_file_is_tracked() -> None:
    """An allow-list entry whose file is gone is stale: remove it."""
    assert sorted(set(DATA_ON_PURPOSE) - set(tracked_files())) == []


def test_the_rule_reports_what_it_should() -> None:
    files = {
        "scripts/.cache/airflow-atlas/cassandra-5.0.7/lib/netty-common-4.1.130.Final.jar": 724_544,
        "scripts/.cache/airflow-atlas/cassandra-5.0.7/lib/.complete": 0,
        "airflow_atlas/__pycache__/errors.cpython-311.pyc": 9_000,
        "dist/airflow_atlas-1.0-py3-none-any.whl": 300_000,
        "bench/results/huge.json": 2 * MAX_BYTES,
        "bench/results/kept.json": 3 * MAX_BYTES,
        "bench/results/sustained.json": MAX_BYTES,  # exactly 1 MB is allowed
        "docs/cache.md": 10,  # a file named like a cache is not a cache directory
        "README.md": 60_000,
    }
    found = findings(files, {"bench/results/kept.json": "a reference result"})
    assert [line.split(":")[0] for line in found] == [
        "airflow_atlas/__pycache__/errors.cpython-311.pyc",
        "bench/results/huge.json",
        "dist/airflow_atlas-1.0-py3-none-any.whl",
        "scripts/.cache/airflow-atlas/cassandra-5.0.7/lib/.complete",
        "scripts/.cache/airflow-atlas/cassandra-5.0.7/lib/netty-common-4.1.130.Final.jar",
    ]
    assert "lies in a cache directory (.cache)" in found[-1]
    assert "2.0 MB, over the 1 MB limit" in found[1]
