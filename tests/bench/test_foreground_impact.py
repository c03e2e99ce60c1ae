"""bench/foreground_impact.py's summary, goals and report from given measurements (pure: no store, no sweep)."""
from __future__ import annotations

from bench import foreground_impact as F
from bench import foreground_impact_report as R

SHAPE = {"limits": (4_000, 1_000), "fg_rates": {"idle": 0, "steady": 20, "burst": 60, "idle_again": 0}}
#: (phase, variant) -> (p99 ms, sweep entries/s) of every repetition
FIGURES = {
    ("steady", F.NO_SWEEP): (40.0, None), ("steady", F.UNTHROTTLED): (200.0, 15_000.0),
    ("steady", 4_000): (300.0, 4_000.0), ("steady", 1_000): (44.0, 1_000.0), ("steady", F.ADAPTIVE): (48.0, 2_500.0),
    ("burst", F.NO_SWEEP): (80.0, None), ("burst", F.UNTHROTTLED): (400.0, 9_000.0),
    ("burst", 4_000): (360.0, 4_000.0), ("burst", 1_000): (90.0, 1_000.0), ("burst", F.ADAPTIVE): (120.0, 1_500.0),
    ("idle", F.UNTHROTTLED): (None, 20_000.0), ("idle", F.ADAPTIVE): (None, 17_000.0),
    ("idle_again", F.UNTHROTTLED): (None, 20_000.0), ("idle_again", F.ADAPTIVE): (None, 12_000.0),
}


def _runs(reps: int = 3) -> list[dict]:
    runs = []
    for rep in range(reps):
        for (phase, variant), (p99, rate) in FIGURES.items():
            lat = [] if p99 is None else [p99 / 2] * 99 + [p99]
            rec = {"rep": rep, "phase": phase, "variant": variant, "foreground_rate": SHAPE["fg_rates"][phase],
                   "load_avg_1m": 1.0, "cpu": {"machine_busy_cores": 1.0, "cassandra_cores": 0.5}, "window_seconds": 12.0,
                   "foreground_transactions": len(lat), "conflicts": 0, "error_count": 0, "latencies_ms": lat,
                   "p50_ms": None if p99 is None else p99 / 2, "p99_ms": p99}
            if rate is not None:
                rec.update(sweep_entries_per_second=rate, sweep_check=True,
                           sweep={"seconds_paced": 1.0, "pace_entries_per_second": rate, "pace_backoffs": 2,
                                  "pace_reason": "increasing: read p50 1.0 ms <= target 3.0 ms"})
            runs.append(rec)
    return runs


def test_each_phase_is_compared_with_its_own_baselines():
    res = F.summarise(_runs(), SHAPE, 20_000.0)
    steady = res["phases"]["steady"]["variants"]
    assert steady["adaptive"]["p99_vs_no_sweep"] == 48 / 40 and steady["adaptive"]["share_of_unthrottled"] == 2_500 / 15_000
    assert res["phases"]["burst"]["variants"]["4000"]["p99_vs_no_sweep"] == 360 / 80
    idle = res["phases"]["idle"]["variants"]
    assert set(idle) == {"unthrottled", "adaptive"} and idle["adaptive"]["p99_ms"] is None
    assert idle["adaptive"]["share_of_unthrottled"] == 17_000 / 20_000


def test_the_goals_of_issue_24_item_2():
    goals = {g["name"].split(" (")[0]: g for g in F.evaluate_goals(F.summarise(_runs(), SHAPE, 20_000.0), SHAPE["limits"])}
    assert goals["steady: foreground p99 at the default settings / no sweep"]["met"] is True  # 1.2x
    assert goals["burst: foreground p99 at the default settings / no sweep"]["met"] is False  # 1.5x
    assert goals["idle: sweep rate at the default settings / unthrottled"]["met"] is True  # 0.85
    assert goals["idle_again: sweep rate at the default settings / unthrottled"]["met"] is False  # 0.6
    best = next(g for g in goals.values() if g["name"].startswith("steady: sweep rate"))
    assert "(1,000/s, swept 1,000/s)" in best["name"] and best["value"] == 2.5 and best["met"] is True
    assert goals["steady: smoothness, the worst fixed limit's p99 / unthrottled p99"]["value"] == 1.5  # 4,000/s
    assert goals["burst: smoothness, the worst fixed limit's p99 / unthrottled p99"]["met"] is True  # 0.9


def test_no_gentle_fixed_limit_leaves_the_steady_comparison_open():
    runs = [r for r in _runs() if not (r["phase"] == "steady" and r["variant"] == 1_000)]
    goals = F.evaluate_goals(F.summarise(runs, SHAPE, 20_000.0), SHAPE["limits"])
    g = next(g for g in goals if g["name"].startswith("steady: sweep rate"))
    assert g["met"] is None and g["note"] == "no fixed limit kept p99 within the goal"


def test_the_report_shows_every_phase_and_variant(tmp_path):
    doc = {"params": {"load_phases": list(F.PHASES), "phase_seconds": 12.0, "reads_per_transaction": 4,
                      "foreground_cells": 10_000, "foreground_rates_per_second": SHAPE["fg_rates"], "repetitions": 3,
                      "default_settings": {"sweep_latency_target": 1.5, "sweep_max_entries_per_second": 0}},
           "results": F.summarise(_runs(), SHAPE, 20_000.0), "load_before": {}, "load_after": {}, "duration_seconds": 60}
    lines = R.report_lines(doc)
    table = [line for line in lines if line.startswith("| ") and "variant" not in line and "---" not in line]
    assert len(table) == 2 * 2 + 2 * 5  # idle phases: unthrottled, adaptive; busy: no sweep, unthrottled, 2 limits, adaptive
    assert any(line.startswith("| burst (60) | fixed 4,000/s |") for line in table)
    R.write_chart(doc, tmp_path / "fg.png")
    assert (tmp_path / "fg.png").read_bytes()[:4] == b"\x89PNG"
