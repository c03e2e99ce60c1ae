"""Smoke test of bench/timestamps.py and bench/transactions.py (issue 45 item 7): each benchmark's ``run`` for a
fraction of a second, 1-2 threads, against the local node, with a real timestamp server process.

No timing is asserted (benchmarks are not tests): only that both variants were measured side by side, that every
step counted draws / transactions / raw statements, and that the result has the shape bench/README.md and
bench/ANALYSIS.md quote (rates, p50/p99 with their interval, sample counts, the ratios with intervals, the goals).
"""
from __future__ import annotations

import pytest

from bench import timestamps as ts_bench
from bench import transactions as tx_bench

DOC_KEYS = {"benchmark", "schema", "mode", "backend", "machine", "params", "results", "goals", "runs", "method"}


def _check_step(step: dict, rate_key: str) -> None:
    assert step[rate_key] > 0 and step["samples"] > 0 and step["in_window_draws"] > 0
    assert step["p50_ms"] > 0 and step["p99_ms"] >= step["p50_ms"]
    low, high = step["p99_ci90_ms"]
    assert low <= high
    assert step["errors"] == 0, step["first_error"]


@pytest.mark.cassandra
def test_timestamps_bench_measures_both_variants_in_one_and_two_processes(cassandra_node):
    doc = ts_bench.run(quick=True, seconds=0.3, shapes=((1, 2), (2, 1)))
    assert DOC_KEYS <= set(doc) and doc["benchmark"] == "timestamps"
    assert doc["machine"]["cassandra"]["paxos_variant"] in ("v1", "v2")
    assert set(doc["machine"]["placement"]) >= {"benchmark", "timestamp_server", "worker_0", "worker_1"}
    assert set(doc["results"]) == {"1x2", "2x1"}
    for entry in doc["results"].values():
        for variant in ts_bench.VARIANTS:
            _check_step(entry[variant], "draws_per_second")
        assert entry["rate_ratio_server_over_cell"] > 0 and len(entry["rate_ratio_ci90"]) == 2
    assert len(doc["results"]["2x1"]["server"]["pids"]) == 2  # two worker processes drew
    assert [r["variant"] for r in doc["runs"]] == ["cell", "server", "server", "cell"]  # alternated step by step
    assert {g["name"] for g in doc["goals"]} == {"server draws/s at 2x16 threads", "server draw p99 at 2x16 threads"}


@pytest.mark.cassandra
def test_transactions_bench_measures_transactions_next_to_raw_cql(cassandra_node):
    doc = tx_bench.run(quick=True, seconds=0.3, threads=(2,))
    assert DOC_KEYS <= set(doc) and doc["benchmark"] == "transactions"
    entry = doc["results"]["2"]
    for variant in tx_bench.VARIANTS:
        _check_step(entry[variant], "per_second")
    for variant in ("cell", "server"):
        assert entry[variant]["statements_per_call"] > tx_bench.READS  # at least the reads, plus the commit's
        assert entry[variant]["statement_rate_over_raw"] > 0
    assert entry["raw_write"]["statements_per_call"] == entry["raw_read"]["statements_per_call"] == 1
    assert entry["raw_mixed_statements_per_second"] > 0 and len(entry["rate_ratio_ci90"]) == 2
    assert len(doc["runs"]) == len(tx_bench.VARIANTS)
