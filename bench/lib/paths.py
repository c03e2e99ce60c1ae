"""Where the benchmarks find the repository, its Cassandra script and the results they write."""
from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CASSANDRA_SCRIPT = REPO_ROOT / "scripts" / "cassandra.sh"
RESULTS_DIR = REPO_ROOT / "bench" / "results"
"""The tracked results: each benchmark's latest ``<name>.json``, RESULTS.md and the charts."""
