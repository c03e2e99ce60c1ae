"""bench/foreground_impact/sweeper.py: one window's sweep processes combined into what the store met (pure)."""
from __future__ import annotations

from bench.foreground_impact import sweeper as F


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
