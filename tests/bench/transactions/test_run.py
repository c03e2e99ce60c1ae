"""Smoke test of bench/transactions/run.py (issue 45 item 7): its ``run`` for a fraction of a second, 2 threads,
against the local node, with a real timestamp server process.

No timing is asserted (benchmarks are not tests): only that every variant was measured side by side, that every
step counted transactions / raw statements, and that the result has the shape bench/README.md and
bench/ANALYSIS.md quote (rates, p50/p99 with their interval, sample counts, the ratios with intervals).
"""
from __future__ import annotations

import pytest

from bench.transactions import run as tx_bench

from ..steps import DOC_KEYS, check_step


@pytest.mark.cassandra
def test_transactions_bench_measures_transactions_next_to_raw_cql(cassandra_node):
    doc = tx_bench.run(quick=True, seconds=0.3, threads=(2,))
    assert DOC_KEYS <= set(doc) and doc["benchmark"] == "transactions"
    entry = doc["results"]["2"]
    for variant in tx_bench.VARIANTS:
        check_step(entry[variant], "per_second")
    for variant in ("cell", "server"):
        assert entry[variant]["statements_per_call"] > tx_bench.READS  # at least the reads, plus the commit's
        assert entry[variant]["statement_rate_over_raw"] > 0
    assert entry["raw_write"]["statements_per_call"] == entry["raw_read"]["statements_per_call"] == 1
    assert entry["raw_mixed_statements_per_second"] > 0 and len(entry["rate_ratio_ci90"]) == 2
    assert len(doc["runs"]) == len(tx_bench.VARIANTS)
