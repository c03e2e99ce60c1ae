"""Benchmark 6: the embedded store (SQLite) - benchmarks 1 and 2 on the default backend of the demo.

Same method as :mod:`bench.targeted_vs_legacy` and :mod:`bench.delete_rate`, on one SQLite file per
store in a temporary directory. SQLite has no write times and no tombstones: a "ranged tombstone" is an
immediate ``DELETE ... WHERE r = ? AND c = ? AND ts BETWEEN ...`` and the raw rate is that statement
through ``executemany`` in one write transaction.
"""
from __future__ import annotations

import shutil
import tempfile

from bench.delete_rate import run as delete_rate
from bench.lib.machine import machine_info
from bench.lib.results import Stopwatch, result_document
from bench.targeted_vs_legacy import run as targeted_vs_legacy

NAME = "embedded"


def run(*, quick: bool, reps: int, backend: str = "sqlite", tmpdir: str | None = None, name: str = NAME) -> dict:
    watch = Stopwatch()
    own = tmpdir is None
    tmpdir = tmpdir or tempfile.mkdtemp(prefix="atlas-bench-sqlite-")
    try:
        tv = targeted_vs_legacy.run(quick=quick, reps=reps, backend="sqlite", tmpdir=tmpdir, name=f"{name}/targeted_vs_legacy")
        dr = delete_rate.run(quick=quick, reps=reps, backend="sqlite", tmpdir=tmpdir, name=f"{name}/delete_rate")
    finally:
        if own:
            shutil.rmtree(tmpdir, ignore_errors=True)
    for doc in (tv, dr):
        doc.pop("machine", None)
    return result_document(
        name, quick=quick, backend="sqlite", watch=watch, machine=machine_info(None),
        params={"targeted_vs_legacy": tv["params"], "delete_rate": dr["params"], "repetitions": reps},
        results={"targeted_vs_legacy": tv["results"], "delete_rate": dr["results"]},
        # The issue sets its goals for Cassandra; on SQLite the same figures are shown for reference.
        goals=[
            dict(g, name=f"SQLite: {g['name']}", binding=False, note="reference: the goals are set for Cassandra")
            for g in tv["goals"] + dr["goals"]
        ],
        runs={"targeted_vs_legacy": tv["runs"], "delete_rate": dr["runs"]},
        method=__doc__,
    )
