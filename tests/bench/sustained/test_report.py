"""bench/sustained/report.py: the RESULTS.md rows, one per store and step."""
from __future__ import annotations

from bench.sustained import report as R

from .test_summary import step


def test_report_rows_show_every_step():
    doc = {"results": {"sqlite": {"steps": [step(50, True), step(300, False, 400.0)], "dag_runs": {"states": {"success": 5}}}}}
    lines = R.report_lines(doc)
    assert any("| sqlite | 50 | 40.0 | 70.0 | 75.0 | True |" in line for line in lines)
    assert any("| sqlite | 300 | 40.0 | 400.0 | 405.0 | False |" in line for line in lines)
