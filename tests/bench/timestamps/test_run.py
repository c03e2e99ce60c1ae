"""Smoke test of bench/timestamps/run.py (issue 45 item 7): its ``run`` for a fraction of a second, 1-2 threads,
against the local node, with a real timestamp server process.

No timing is asserted (benchmarks are not tests): only that both variants were measured side by side, that every
step counted draws, and that the result has the shape bench/README.md and bench/ANALYSIS.md quote (rates, p50/p99
with their interval, sample counts, the ratios with intervals, the goals).
"""
from __future__ import annotations

import pytest

from bench.timestamps import run as ts_bench

from ..steps import DOC_KEYS, check_step


@pytest.mark.cassandra
def test_timestamps_bench_measures_both_variants_in_one_and_two_processes(cassandra_node):
    doc = ts_bench.run(quick=True, seconds=0.3, shapes=((1, 2), (2, 1)))
    assert DOC_KEYS <= set(doc) and doc["benchmark"] == "timestamps"
    assert doc["machine"]["cassandra"]["paxos_variant"] in ("v1", "v2")
    assert set(doc["machine"]["placement"]) >= {"benchmark", "timestamp_server", "worker_0", "worker_1"}
    assert set(doc["results"]) == {"1x2", "2x1"}
    for entry in doc["results"].values():
        for variant in ts_bench.VARIANTS:
            check_step(entry[variant], "draws_per_second")
        assert entry["rate_ratio_server_over_cell"] > 0 and len(entry["rate_ratio_ci90"]) == 2
    assert len(doc["results"]["2x1"]["server"]["pids"]) == 2  # two worker processes drew
    assert [r["variant"] for r in doc["runs"]] == ["cell", "server", "server", "cell"]  # alternated step by step
    assert {g["name"] for g in doc["goals"]} == {"server draws/s at 2x16 threads", "server draw p99 at 2x16 threads"}
