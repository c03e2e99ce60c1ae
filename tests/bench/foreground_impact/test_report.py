"""bench/foreground_impact/report.py: the RESULTS.md section and the chart, from given measurements and from the
tracked result."""
from __future__ import annotations

import json

from bench.foreground_impact import report as R
from bench.foreground_impact import summary as S
from bench.lib import placement as P
from bench.lib.paths import RESULTS_DIR

from .measured import LIMITS, RATES, windows


def test_the_report_shows_every_placement_phase_and_variant_with_intervals(tmp_path):
    results = {"calibration_entries_per_second": 20_000.0, "default_variant": S.DEFAULT, "placements": {
        P.CONFINED: {"placement": {"placement": P.CONFINED, "method": "cgroup v1 cpu.cfs_quota_us 50000"},
                     "phases": S.summarise(windows(), LIMITS, RATES)},
        P.SHARED: {"placement": {"placement": P.SHARED, "method": "none"},
                   "phases": S.summarise(windows(placement=P.SHARED), LIMITS, RATES)}}}
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

def test_the_committed_result_renders(tmp_path):
    """The tracked result (bench/results/foreground_impact.json: per placement) renders and charts."""
    doc = json.loads((RESULTS_DIR / "foreground_impact.json").read_text())
    assert "placements" in doc["results"]
    lines = R.report_lines(doc)
    assert lines[0] == R.SECTION and any(line.startswith("| confined | steady") for line in lines), lines
    R.write_chart(doc, tmp_path / "doc.png")
    assert (tmp_path / "doc.png").read_bytes()[:4] == b"\x89PNG"
