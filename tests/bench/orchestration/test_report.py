"""bench/orchestration/report.py: the RESULTS.md rows, one per shard count, scenario and group size."""
from __future__ import annotations

from bench.orchestration import report as R


def test_the_report_has_a_row_per_cell():
    doc = {"mode": "quick", "params": {"slots": 2}, "results": {"8/every_pair/default": {
        "shards": 8, "scenario": "every_pair", "variant": "default", "pairs": 16, "task_instances": 68,
        "wall_seconds": 30.0, "engine_seconds": 4.0, "overhead_per_pair_seconds": 3.5, "db_bytes_per_day": 2e6,
        "metadata_rows": 350, "metadata_rows_per_day": 100_800, "log_bytes_per_day": None, "states": ["success"]}}}
    lines = R.report_lines(doc)
    assert any(line.startswith("| 8 | every_pair | default | 16 | 68 | 30.0 |") and "| 350 | 100,800 | - |" in line
               for line in lines)
