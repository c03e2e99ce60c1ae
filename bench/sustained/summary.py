"""The statistics of ``sustained``, from the sampled lags and backlogs alone (pure: no store, no Airflow;
tests/bench/sustained/test_summary.py): percentiles and the lag summary, the backlog's troughs and whether it stays
bounded, the highest bounded rate, the step of the worst lag and why the rates stop rising."""
from __future__ import annotations

import math
from collections.abc import Sequence

BOUNDED_GROWTH_FRACTION = 0.1
"""A backlog whose troughs grow by more than this fraction of the ingest rate is unbounded."""
WORKLOAD_PROGRESS = 1.1
"""A workload-limited step that reached less than this multiple of the previous step's rate ends the run: the
machine cannot commit faster, so the higher rates would measure the same ingest again."""


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile ``q`` (0..100) of ``values``; None when empty."""
    if not 0 <= q <= 100:
        raise ValueError(f"q must be between 0 and 100, got {q!r}")
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def lag_summary(lags: Sequence[float | None]) -> dict:
    """p50, p99 and max of the sampled lags (seconds); ``unknown``: samples without a lag."""
    known = [x for x in lags if x is not None]
    return {
        "samples": len(lags),
        "unknown": len(lags) - len(known),
        "p50": percentile(known, 50),
        "p99": percentile(known, 99),
        "max": max(known) if known else None,
    }


def troughs(samples: Sequence[tuple[float, int]], interval: float) -> list[tuple[float, int]]:
    """The backlog's minimum per ``interval`` window (``(window start, minimum)``), from ``(t, backlog)``
    samples: the backlog just after each sweep. The last window counts only when at least half full."""
    if not samples or interval <= 0:
        return []
    t0 = samples[0][0]
    windows: dict[int, int] = {}
    for t, backlog in samples:
        k = int((t - t0) // interval)
        windows[k] = min(backlog, windows.get(k, backlog))
    last_t = samples[-1][0]
    out = []
    for k in sorted(windows):
        if t0 + (k + 0.5) * interval > last_t and k > 0:
            continue
        out.append((t0 + k * interval, windows[k]))
    return out


def slope(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(x, y)`` points; None for fewer than two distinct x."""
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    if sxx == 0:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in points) / sxx


def judge_bounded(samples: Sequence[tuple[float, int]], interval: float, ingest_per_second: float) -> dict:
    """Whether the backlog stays bounded: its troughs (:func:`troughs`, the first window - the warm-up -
    left out when there are three or more) grow by at most ``BOUNDED_GROWTH_FRACTION`` of the ingest rate,
    or the last trough is below one interval's ingest. ``bounded`` is None with fewer than two troughs."""
    points = troughs(samples, interval)
    if len(points) >= 3:
        points = points[1:]
    growth = slope(points)
    small = bool(points) and points[-1][1] <= ingest_per_second * interval
    if growth is None:
        bounded = True if small and len(points) >= 1 and points[-1][1] == 0 else None
    else:
        bounded = small or growth <= BOUNDED_GROWTH_FRACTION * ingest_per_second
    return {
        "bounded": bounded,
        "trough_growth_per_second": None if growth is None else round(growth, 3),
        "troughs": [[round(t - samples[0][0], 1), b] for t, b in points],
        "limit_growth_per_second": round(BOUNDED_GROWTH_FRACTION * ingest_per_second, 3),
    }


def highest_bounded(steps: Sequence[dict]) -> dict | None:
    """The step with the highest rate among the bounded steps before the first unbounded one."""
    best = None
    for step in steps:
        if step["backlog"]["bounded"] is False:
            break
        if step["backlog"]["bounded"]:
            best = step
    return best


def worst_lag(steps: Sequence[dict]) -> dict | None:
    """The step with the highest lag p99 of every step the workload reached (issue 46's goal: the lag within 2
    intervals at every rate, bounded or not); None when no step has a lag."""
    measured = [step for step in steps if step["lag_seconds"]["p99"] is not None]
    return max(measured, key=lambda step: step["lag_seconds"]["p99"], default=None)


def stop_reason(steps: Sequence[dict]) -> str | None:
    """Why the rates stop rising after the last of ``steps``: ``"unbounded"`` (every higher rate is unbounded
    too), ``"workload_saturated"`` (the workload fell short of its target and did not commit
    ``WORKLOAD_PROGRESS`` times the previous step's rate), or None to go on."""
    if not steps:
        return None
    last = steps[-1]
    if last["backlog"]["bounded"] is False:
        return "unbounded"
    if len(steps) >= 2 and last.get("workload_limited") and (
            last["achieved_entries_per_second"] < WORKLOAD_PROGRESS * steps[-2]["achieved_entries_per_second"]):
        return "workload_saturated"
    return None
