"""Measured windows of foreground_impact made up for the tests of its summary and report: every repetition's
p99 and sweep rate per (phase, variant) as :data:`FIGURES` says."""
from __future__ import annotations

from bench.foreground_impact import summary as S
from bench.lib import placement as P

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


def windows(reps: int = 3, per_window: int = 700, placement: str = P.CONFINED) -> list[dict]:
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
