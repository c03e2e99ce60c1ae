"""Smoke test of the benchmark harness: the quick mode of two benchmarks end to end, JSON shape only.

No timing is asserted here (benchmarks are not tests); this only proves that ``python -m bench.run``
works and writes what RESULTS.md, the chart and the README rely on.
"""
from __future__ import annotations

import json

import pytest

from bench import run as bench_run

GOAL_KEYS = {"name", "value", "target", "op", "unit", "met", "note", "binding"}
DOC_KEYS = {
    "benchmark", "schema", "mode", "backend", "started_at", "duration_seconds", "load_before", "load_after",
    "machine", "params", "results", "goals", "runs", "method",
}


def _check_doc(doc: dict, name: str) -> None:
    assert DOC_KEYS <= set(doc), DOC_KEYS - set(doc)
    assert doc["benchmark"] == name and doc["mode"] == "quick"
    for key in ("1m", "5m", "15m", "uptime"):
        assert key in doc["load_before"] and key in doc["load_after"]
    assert doc["machine"]["cores"] and doc["machine"]["cpu_model"] and doc["machine"]["memory_gib"] > 0
    assert doc["goals"], "every benchmark evaluates its goals"
    for g in doc["goals"]:
        assert set(g) == GOAL_KEYS
        assert isinstance(g["value"], (int, float)) and g["met"] in (True, False)
    assert doc["runs"], "the raw repetitions are kept"


@pytest.mark.cassandra
def test_quick_mode_writes_results(tmp_path, cassandra_node):
    code = bench_run.main(["--quick", "--only", "commit_overhead,embedded", "--out", str(tmp_path)])
    assert code == 0

    co = json.loads((tmp_path / "commit_overhead.json").read_text())
    _check_doc(co, "commit_overhead")
    assert co["backend"] == "cassandra"
    assert co["machine"]["cassandra"]["version"]
    assert set(co["results"]) == {"1", "10", "100"}
    for r in co["results"].values():
        assert r["repetitions"] >= 3 and r["median_on_ms"] > 0 and r["median_off_ms"] > 0 and r["ratio"] > 0
    reps = {(r["rep"], r["writes"]) for r in co["runs"]}
    assert len(reps) == 3 * 3

    emb = json.loads((tmp_path / "embedded.json").read_text())
    _check_doc(emb, "embedded")
    assert emb["backend"] == "sqlite"
    tv = emb["results"]["targeted_vs_legacy"]
    for kind in ("pct", "fixed"):
        for r in tv[kind].values():
            assert r["checks_ok"] is True and r["repetitions"] >= 3
            assert r["targeted_seconds"] > 0 and r["legacy_seconds"] > 0
    assert set(tv["independence"]) >= {"targeted_big_over_small_fixed_k", "legacy_big_over_small_fixed_k"}
    dr = emb["results"]["delete_rate"]
    assert set(dr) == {"THOROUGH", "CONSERVATIVE"}
    assert all(r["checks_ok"] is True and r["ratio"] > 0 for r in dr.values())
    assert all(g["binding"] is False for g in emb["goals"])

    results_md = (tmp_path / "RESULTS.md").read_text()
    assert "| benchmark | figure | measured | goal | status |" in results_md
    assert "## 3. Commit overhead" in results_md and "## 6. Embedded store" in results_md
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.cassandra
def test_a_focused_foreground_impact_run_measures_only_what_it_names(tmp_path, cassandra_node):
    """``--phase``, ``--variant``, ``--backlog-writes``, ``--baseline-after-load``, ``--batch-limit`` and
    ``--sweep-tasks`` reach the run: only the steady phase's windows of the two variants, three repetitions each,
    the backlog in transactions of 50 writes, each no-sweep window after a load of its own (what the lowest limit
    sweeps in a window), batches of at most 100 entries, two pairs swept at once by two processes; the result says
    so."""
    code = bench_run.main(["--quick", "--only", "foreground_impact", "--placement", "confined", "--out", str(tmp_path),
                           "--phase", "steady", "--variant", "no_sweep", "--variant", "2000",
                           "--backlog-writes", "50", "--baseline-after-load", "--batch-limit", "100",
                           "--sweep-tasks", "2"])
    assert code == 0
    doc = json.loads((tmp_path / "foreground_impact.json").read_text())
    assert doc["params"]["load_phases"] == ["steady"] and doc["params"]["variants"] == ["no_sweep", "2000"]
    assert doc["params"]["backlog_transaction_writes"] == 50 and doc["params"]["baseline_after_load"] is True
    window = doc["params"]["phase_seconds"]["steady"]
    assert [r["ballast_loaded"] for r in doc["runs"] if r["variant"] == "no_sweep"] == [int(2000 * window)] * 3
    assert all("ballast_loaded" not in r for r in doc["runs"] if r["variant"] != "no_sweep")
    # A batch never splits a transaction: 100 entries, and at most the rest of one of 50 writes (over two shards
    # a transaction's part in one has about 25).
    assert doc["params"]["sweep_batch_limit"] == 100
    assert all(r["sweep"]["entries_read"] <= 149 * r["sweep"]["iterations"] for r in doc["runs"] if r["variant"] != "no_sweep")
    assert sorted((r["phase"], str(r["variant"]), r["rep"]) for r in doc["runs"]) == sorted(
        ("steady", v, rep) for v in ("no_sweep", "2000") for rep in range(3))
    assert doc["params"]["sweep_tasks"] == 2 and doc["params"]["shards"] == 2
    for r in (r for r in doc["runs"] if r["variant"] != "no_sweep"):  # each window: both pairs swept, summed
        assert sorted(c["shard"] for c in r["sweeps"]) == [0, 1] and all(c["entries_read"] > 0 for c in r["sweeps"])
        assert r["sweep"]["entries_read"] == sum(c["entries_read"] for c in r["sweeps"]), r
    placed = doc["results"]["placements"]["confined"]["placement"]
    assert placed["sweep_processes"] == 2 and placed["placement"] == "confined", placed
    if placed["method"].startswith("cgroup"):  # half a core for the two processes together
        assert placed["sweeper_cpu_cores"] == pytest.approx(0.5), placed
    steady = doc["results"]["placements"]["confined"]["phases"]["steady"]["variants"]
    assert set(steady) == {"no_sweep", "2000"} and steady["2000"]["checks_ok"] is True
    assert steady["2000"]["sweep_entries_per_second"] > 0
