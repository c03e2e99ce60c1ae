"""bench/foreground_impact.py's windows, its summary and goals (bench/foreground_summary.py) and its report, from
given measurements (pure: no store, no sweep); the placement of a sweep process (bench/placement.py) on a real
child process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import foreground_impact as F
from bench import foreground_impact_report as R
from bench import foreground_summary as S
from bench import placement as P

LIMITS = (1_000, 250)
RATES = {"idle": 0, "steady": 20, "burst": 40, "arrival": 20, "idle_again": 0}
#: (phase, variant) -> (p99 ms, sweep entries/s) of every repetition
FIGURES = {
    ("steady", S.NO_SWEEP): (40.0, None), ("steady", S.UNTHROTTLED): (200.0, 15_000.0),
    ("steady", 1_000): (60.0, 1_000.0), ("steady", 250): (44.0, 250.0), ("steady", S.DEFAULT): (48.0, 600.0),
    ("burst", S.NO_SWEEP): (80.0, None), ("burst", S.UNTHROTTLED): (400.0, 9_000.0),
    ("burst", 1_000): (160.0, 1_000.0), ("burst", 250): (88.0, 250.0), ("burst", S.DEFAULT): (96.0, 300.0),
    ("arrival", S.NO_SWEEP): (40.0, None), ("arrival", S.UNTHROTTLED): (220.0, 15_000.0),
    ("arrival", S.DEFAULT): (56.0, 2_000.0),
    ("idle", S.UNTHROTTLED): (None, 20_000.0), ("idle", S.DEFAULT): (None, 18_000.0),
    ("idle_again", S.UNTHROTTLED): (None, 20_000.0), ("idle_again", S.DEFAULT): (None, 12_000.0),
}


def _runs(reps: int = 3, per_window: int = 700, placement: str = P.CONFINED) -> list[dict]:
    """Windows of ``per_window`` latencies each: 98% at half the p99, 2% at the p99 (so the pooled p99 is it)."""
    runs = []
    for rep in range(reps):
        for (phase, variant), (p99, rate) in FIGURES.items():
            lat = [] if p99 is None else [p99 / 2] * (per_window - per_window // 50) + [p99] * (per_window // 50)
            rec = {"placement": placement, "rep": rep, "phase": phase, "variant": variant,
                   "foreground_rate": RATES[phase], "load_avg_1m": 1.0, "window_seconds": 10.0,
                   "cpu": {"machine_busy_cores": 1.0, "cassandra_cores": 0.5},
                   "foreground_transactions": len(lat), "conflicts": 0, "error_count": 0, "latencies_ms": lat}
            if rate is not None:
                rec.update(sweep_entries_per_second=rate, sweep_check=True,
                           sweep={"entries_read": rate * 10.0, "seconds_paced": 1.0, "pace_entries_per_second": rate,
                                  "pace_backoffs": 2, "pace_reason": "running: p99 within target"})
            runs.append(rec)
    return runs


def test_busy_windows_are_as_long_as_2000_pooled_transactions_need():
    full, quick = F._shape(quick=False), F._shape(quick=True)
    assert F.window_seconds(full, "steady", 3) == 37  # 2,000 x 1.1 / (20/s x 3)
    assert F.window_seconds(full, "burst", 3) == 19
    assert F.window_seconds(full, "arrival", 3) == 37 + F.ARRIVAL_DELAY_SECONDS  # counted after the arrival
    assert F.window_seconds(full, "idle", 3) == F.PHASE_SECONDS_FULL
    assert F.window_seconds(full, "steady", 10) == F.PHASE_SECONDS_FULL  # never shorter than the idle windows
    assert F.window_seconds(quick, "steady", 3) == quick["phase_seconds"]  # a smoke run, "too few samples"
    assert F.window_seconds(quick, "arrival", 3) == quick["phase_seconds"] + F.ARRIVAL_DELAY_SECONDS


def test_the_arrival_runs_the_steady_rate_between_the_burst_and_idle_again():
    assert S.PHASES == ("idle", "steady", "burst", "arrival", "idle_again") and "arrival" in S.BUSY
    assert F.with_rates({"phase_seconds": 12.0}, 10)["fg_rates"] == {
        "idle": 0, "steady": 10, "burst": 20, "arrival": 10, "idle_again": 0}


def test_each_phase_measures_its_variants_and_the_default_in_every_one():
    assert S.default_variant() == S.DEFAULT == "default"
    assert S.variants("steady", (2_000,)) == [S.NO_SWEEP, S.UNTHROTTLED, 2_000, S.DEFAULT]
    assert S.variants("burst", LIMITS) == [S.NO_SWEEP, S.UNTHROTTLED, 1_000, 250, S.DEFAULT]
    assert S.variants("arrival", LIMITS) == [S.NO_SWEEP, S.UNTHROTTLED, S.DEFAULT]  # a fixed rate has no arrival
    assert S.variants("idle", LIMITS) == S.variants("idle_again", LIMITS) == [S.UNTHROTTLED, S.DEFAULT]


def test_pooled_p99_ratios_have_a_confidence_interval_and_each_phase_its_own_baselines():
    phases = S.summarise(_runs(), LIMITS, RATES)
    default = phases["steady"]["variants"]["default"]
    assert default["foreground_transactions"] == 2_100 and default["p99_ms"] == 48.0
    assert default["p99_vs_no_sweep"] == 48 / 40
    lo, hi = default["p99_ratio_ci"]
    assert lo <= 48 / 40 <= hi and hi < 1.5
    assert phases["burst"]["variants"]["1000"]["p99_vs_no_sweep"] == 160 / 80
    assert default["sweep_entries_per_second"] == 600.0 and default["share_of_unthrottled"] == 600 / 15_000
    arrival = phases["arrival"]["variants"]
    assert set(arrival) == {"no_sweep", "unthrottled", "default"} and arrival["default"]["p99_vs_no_sweep"] == 56 / 40
    assert arrival["default"]["share_of_unthrottled"] == 2_000 / 15_000  # against the arrival's own unthrottled
    idle = phases["idle"]["variants"]
    assert set(idle) == {"unthrottled", "default"} and idle["default"]["p99_ms"] is None
    assert "p99_vs_no_sweep" not in idle["default"] and idle["default"]["share_of_unthrottled"] == 18_000 / 20_000


def test_fewer_than_1000_transactions_give_no_p99_but_say_too_few_samples():
    phases = S.summarise(_runs(reps=1, per_window=900), LIMITS, RATES)
    row = phases["steady"]["variants"]["default"]
    assert row["p99_ms"] is None and row["p99_vs_no_sweep"] is None and row["p99_ratio_ci"] is None
    assert row["p99_note"] == "too few samples (900 < 1,000)"
    assert row["p50_ms"] == 24.0  # a median needs no thousand
    goals = {g["name"]: g for g in S.evaluate_goals(phases, LIMITS)}
    steady = goals["steady: application p99 / no sweep (default)"]
    assert steady["met"] is None and steady["note"] == "too few samples (900 < 1,000)"


def test_the_interval_is_wide_when_the_tail_is_a_few_transactions_and_narrow_when_it_is_many():
    base = sorted([10.0] * 1_900 + [20.0] * 100)  # 5% slow: its p99 firmly 20
    few = sorted([10.0] * 1_985 + [30.0] * 15)  # p99 lands on the edge of the slow 0.75%
    many = sorted([10.0] * 1_900 + [30.0] * 100)  # 5% slow: p99 firmly 30
    lo_few, hi_few = S.p99_ratio_ci(few, base)
    lo_many, hi_many = S.p99_ratio_ci(many, base)
    assert lo_few <= 0.5 + 1e-9 and hi_few >= 1.5  # from 10/20 to 30/20: the data cannot tell
    assert (lo_many, hi_many) == (1.5, 1.5)
    assert S.p99_ratio_ci(many, base) == (lo_many, hi_many)  # seeded: the same data, the same interval
    with pytest.raises(ValueError):
        S.p99_ratio_ci([], base)


def test_the_goals_are_judged_at_the_default_in_every_phase():
    phases = S.summarise(_runs(), LIMITS, RATES)
    goals = {g["name"]: g for g in S.evaluate_goals(phases, LIMITS, placement="confined")}
    assert len(goals) == 2 + 3 * 2 + 1 and all(g["binding"] for g in goals.values())
    assert goals["steady: application p99 / no sweep (default, confined)"]["met"] is True  # 1.2x
    assert goals["steady: upper 90% bound of that ratio (default, confined)"]["met"] is True
    assert goals["burst: application p99 / no sweep (default, confined)"]["met"] is True  # 1.2x
    arrival = goals["arrival: application p99 / no sweep (default, confined)"]
    assert arrival["value"] == 56 / 40 and arrival["met"] is False  # 1.4x: the arrival came late to the pace
    assert goals["idle: sweep rate / unthrottled (default, confined)"]["met"] is True  # 0.9
    assert goals["idle_again: sweep rate / unthrottled (default, confined)"]["met"] is False  # 0.6
    best = next(g for k, g in goals.items() if k.startswith("steady: sweep rate"))
    assert "250/s, swept 250/s" in best["name"] and best["value"] == 600 / 250 and best["met"] is True


def test_with_no_fixed_limit_gentle_enough_the_rate_goal_says_so():
    runs = [r for r in _runs() if r["variant"] != 250]  # 1,000/s costs 1.5x: no fixed limit meets the p99 goal
    goals = S.evaluate_goals(S.summarise(runs, LIMITS, RATES), LIMITS)
    rate = goals[-1]
    assert rate["name"].startswith("steady: sweep rate") and rate["met"] is None
    assert rate["note"] == "no fixed limit kept p99 within the goal"


def test_the_report_shows_every_placement_phase_and_variant_with_intervals(tmp_path):
    results = {"calibration_entries_per_second": 20_000.0, "default_variant": S.DEFAULT, "placements": {
        P.CONFINED: {"placement": {"placement": P.CONFINED, "method": "cgroup v1 cpu.cfs_quota_us 50000"},
                     "phases": S.summarise(_runs(), LIMITS, RATES)},
        P.SHARED: {"placement": {"placement": P.SHARED, "method": "none"},
                   "phases": S.summarise(_runs(placement=P.SHARED), LIMITS, RATES)}}}
    doc = {"params": {"load_phases": list(S.PHASES), "phase_seconds": {"idle": 12, "steady": 37, "burst": 19,
                                                                         "arrival": 40, "idle_again": 12},
                      "repetitions": 3, "min_samples_for_p99": 1_000, "bootstrap_resamples": 1_000,
                      "arrival_delay_seconds": 3.0},
           "results": results, "load_before": {}, "load_after": {}, "duration_seconds": 60}
    lines = R.report_lines(doc)
    assert any("arrival 40, idle_again 12 (the arrival's foreground from 3 s in)" in line for line in lines)
    table = [line for line in lines if line.startswith("| ") and "variant" not in line and "---" not in line]
    assert len(table) == 2 * (2 * 2 + 2 * 5 + 3)  # per placement: idle phases 2 variants, steady and burst 5, arrival 3
    row = next(line for line in table if line.startswith("| confined | steady (20) | **default (application pace)** |"))
    assert "| 1.20 [" in row and "| 600 (2) |" in row  # the ratio with its interval; the pace (back-offs)
    assert any(line.startswith("| confined | arrival (20) | **default (application pace)** | 2,100 |") for line in table)
    assert "cgroup v1 cpu.cfs_quota_us 50000" in "\n".join(lines)
    R.write_chart(doc, tmp_path / "fg.png")
    assert (tmp_path / "fg.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("path, placements, row", [
    # issue 31's full run (2026-11-29): per placement
    ("bench/results/foreground_impact.json", True, "| confined | steady"),
    # an issue-24 document: one placement
    ("bench/results/issue24/foreground_impact.backoff-reached.json", False, "| steady"),
])
def test_the_committed_documents_render(path, placements, row, tmp_path):
    doc = json.loads((Path(__file__).resolve().parents[2] / path).read_text())
    assert ("placements" in doc["results"]) is placements
    lines = R.report_lines(doc)
    assert lines[0] == R.SECTION and any(line.startswith(row) for line in lines), lines
    R.write_chart(doc, tmp_path / "doc.png")
    assert (tmp_path / "doc.png").read_bytes()[:4] == b"\x89PNG"


def test_a_confined_sweep_process_gets_half_a_core_and_the_placement_is_recorded():
    burn = "import time\nt, w = time.process_time(), time.time()\nwhile time.time() - w < 1.5: pass\nprint(time.process_time() - t)"
    proc = subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE, text=True)
    record = P.confine(proc.pid, P.CONFINED)
    used = float(proc.communicate(timeout=30)[0])
    P.release(record)
    assert record["placement"] == P.CONFINED and record["method"]
    if record["method"].startswith("cgroup"):
        assert record["sweeper_cpu_cores"] == P.SWEEPER_CPU_CORES
        assert used <= 1.5 * P.SWEEPER_CPU_CORES * 1.3, (used, record)  # a quota of half a core (with slack)
        assert not Path(record["cgroup"]).exists()
    assert P.confine(proc.pid, P.SHARED)["sweeper_cpu_cores"] is None
    with pytest.raises(ValueError, match="unknown placement"):
        P.confine(proc.pid, "pinned")


def _child(shard: int, status: str, started: float, ended: float, entries: int, pace: float | None) -> dict:
    return {"shard": shard, "status": status, "started": started, "ended": ended, "entries_read": entries,
            "cells_tombstoned": entries, "iterations": entries // 250, "pace_backoffs": 0, "seconds_paced": ended - started,
            "pace_entries_per_second": pace, "pace_reason": f"fixed {shard}", "max_entries_per_second": 250}


def test_the_sweep_processes_of_one_window_combine_into_what_the_store_met():
    one = _child(0, "window_over", 10.0, 84.0, 18_500, 250.0)
    assert F.combined([one]) is one
    both = F.combined([one, _child(1, "caught_up", 10.2, 80.0, 17_000, 250.0)])
    assert both["shard"] == [0, 1] and (both["started"], both["ended"]) == (10.0, 84.0)
    assert both["entries_read"] == 35_500 and both["iterations"] == 74 + 68 and both["pace_entries_per_second"] == 500.0
    assert both["status"] == "window_over" and both["pace_reason"] == "fixed 0" and both["seconds_paced"] == 74.0
    unknown_pace = F.combined([_child(0, "caught_up", 0, 1, 5, None), _child(1, "caught_up", 0, 2, 5, 250.0)])
    assert unknown_pace["status"] == "caught_up" and unknown_pace["pace_entries_per_second"] is None
    assert F.combined([one, _child(1, "failed", 10.2, 11.0, 0, 250.0)])["status"] == "failed"


def test_a_windows_sweep_processes_share_the_confined_cpu():
    quota = {"placement": P.CONFINED, "method": "cgroup v2 cpu.max 25000 100000", "sweeper_cpu_cores": 0.25}
    both = P.window_record([{**quota, "cgroup": "/a"}, {**quota, "cgroup": "/b"}])
    assert both == {**quota, "sweeper_cpu_cores": 0.5, "sweep_processes": 2}  # two quotas add up
    pinned = {"placement": P.CONFINED, "method": "taskset: core 1 only (no writable cgroup)", "sweeper_cpu_cores": 1.0}
    assert P.window_record([pinned, pinned])["sweeper_cpu_cores"] == 1.0  # both on the one core
    shared = P.confine(os.getpid(), P.SHARED)
    assert P.window_record([shared, shared]) == {**shared, "sweep_processes": 2}


def test_the_steady_rate_is_half_the_highest_rate_carried():
    ms = 0.001
    assert F.steady_rate({10: 60 * ms, 20: 70 * ms, 40: 110 * ms, 80: None}) == 20  # 40 carried, 80 fell behind
    assert F.steady_rate({10: 63 * ms, 20: 44 * ms, 40: None}) == 10  # this machine on 2026-11-29
    assert F.steady_rate({10: 60 * ms, 20: 70 * ms, 40: 130 * ms}) == 10  # 40 over 2x the lowest rate's p99
    assert F.steady_rate({10: 30 * ms, 20: 30 * ms, 40: 40 * ms, 80: 50 * ms}) == 40  # a fast machine
    assert F.steady_rate({10: None}) == F.MIN_STEADY == F.steady_rate({})
    assert F.highest_carried({10: 60 * ms, 20: None, 40: 61 * ms}) == 10  # a rate after one not carried never counts


def test_the_capacity_probe_runs_the_foreground_without_sweep_on_a_real_store(tmp_path):
    """probe_capacity on the embedded store (the full mode probes the node): each rate's p99, in order, stopping
    at the first rate not carried."""
    from airflow_atlas.kvs.tables import SweepStrategy
    from bench import common as C

    store = C.open_store(f"sqlite:///{tmp_path}/probe.db")
    try:
        store.create_table(F.FG_TABLE, SweepStrategy.CONSERVATIVE)
        C.load_committed_base(store, [F.FG_TABLE], 200)
        probes = F.probe_capacity(store, [C.cell(i) for i in range(200)], rates=(5, 10), seconds=1.0,
                                   warmup_seconds=0.5)
    finally:
        store.close()
    assert list(probes) == [5, 10], probes  # the embedded store carries both
    assert all(p is not None and 0 < p < 1.0 for p in probes.values()), probes
