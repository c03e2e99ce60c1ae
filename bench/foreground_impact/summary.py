"""The statistics and goals of ``foreground_impact``, from the measured windows alone (pure: no store, no sweep;
tests/bench/foreground_impact/test_summary.py).

* Every figure of a (placement, load phase, variant) is computed on the application's latencies **pooled over
  the repetitions** (each repetition measures every variant once, in a rotated order, so slow minutes of the
  machine spread over all of them).
* A p99 needs at least :data:`MIN_SAMPLES_FOR_P99` latencies (of fewer, the nearest-rank p99 is one of the
  slowest handful: noise); below that the row says ``too few samples`` and gives no p99 and no ratio.
* ``p99_vs_no_sweep`` is the pooled p99 over the same placement and phase's ``no_sweep`` pooled p99, with a
  bootstrap :data:`CI_LEVEL` confidence interval (``p99_ratio_ci``: both pools resampled independently,
  :data:`RESAMPLES` times, seeded: the same data give the same interval).
* The goals (:func:`evaluate_goals`) are judged at the ``default`` variant (the shipped settings) on the
  ``confined`` placement (production's: the sweeper on its own worker); the other variants and the ``shared``
  placement are reported beside it.
"""
from __future__ import annotations

import random
from collections.abc import Sequence

from bench.lib import results
from bench.lib.stats import median

NO_SWEEP, UNTHROTTLED, DEFAULT = "no_sweep", "unthrottled", "default"
"""Variants: no sweep; no pacing at all (``sweep_latency_target`` 0, ``sweep_max_entries_per_second`` 0); the
shipped settings (``StoreConfig()`` untouched: the application pace); besides them, fixed limits (an int: entries/s,
``sweep_latency_target`` 0)."""
PHASES = ("idle", "steady", "burst", "arrival", "idle_again")
BUSY = ("steady", "burst", "arrival")
"""The load phases with a foreground (in ``arrival`` it starts a few seconds into the window)."""
P99_GOAL, P99_UPPER_GOAL, IDLE_SHARE_GOAL = 1.25, 1.5, 0.8
"""The goals at the default: in the busy phases its p99 <= 1.25x no sweep's with the upper 90% bound <= 1.5x; in
the idle phases its sweep rate >= 0.8 of unthrottled."""
MIN_SAMPLES_FOR_P99 = 1_000
MIN_POOLED = 2_000
"""What the full mode sizes its busy windows for: at least this many transactions per (phase, variant)."""
CI_LEVEL = 0.90
RESAMPLES = 1_000


def default_variant() -> str:
    """The variant the goals are judged at: the shipped settings."""
    return DEFAULT


def variants(phase: str, limits: Sequence[int]) -> list:
    """The variants measured in a load phase. An idle phase has no foreground to hurt: only unthrottled (the
    baseline of its rates) and the default. The arrival measures no fixed limit: a fixed rate does not follow the
    application, so its arrival is its steady window."""
    if phase not in BUSY:
        return [UNTHROTTLED, DEFAULT]
    return [NO_SWEEP, UNTHROTTLED, *(limits if phase != "arrival" else ()), DEFAULT]


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100) of sorted values."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, int(-(-q * len(sorted_values) // 100)) - 1))
    return sorted_values[k]


def p99(sorted_values: Sequence[float]) -> float | None:
    """The p99, or None when there are fewer than :data:`MIN_SAMPLES_FOR_P99` values."""
    return percentile(sorted_values, 99) if len(sorted_values) >= MIN_SAMPLES_FOR_P99 else None


def p99_ratio_ci(values: Sequence[float], base: Sequence[float], *, level: float = CI_LEVEL,
                 resamples: int = RESAMPLES, seed: int = 31) -> tuple[float, float]:
    """Bootstrap ``level`` interval of p99(values) / p99(base), the two pools resampled independently."""
    if not values or not base:
        raise ValueError("two non-empty pools are needed")
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        a = sorted(rng.choices(values, k=len(values)))
        b = sorted(rng.choices(base, k=len(base)))
        ratios.append(percentile(a, 99) / percentile(b, 99))  # type: ignore[operator]
    ratios.sort()
    tail = (1 - level) / 2
    return ratios[int(tail * (resamples - 1))], ratios[int(round((1 - tail) * (resamples - 1)))]


def _median_of(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return median(values) if values else None


def _pooled_rate(rows: list[dict]) -> float | None:
    """Entries swept per second over all the rows' windows together."""
    seconds = sum(r["window_seconds"] for r in rows if r.get("sweep"))
    return sum(r["sweep"]["entries_read"] for r in rows if r.get("sweep")) / seconds if seconds > 0 else None


def summarise(runs: list[dict], limits: Sequence[int], fg_rates: dict) -> dict:
    """Per load phase and variant of ONE placement's runs (see the module doc)."""
    out: dict = {}
    for phase in PHASES:
        mine = [r for r in runs if r["phase"] == phase]
        pools = {str(v): sorted(x for r in mine if r["variant"] == v for x in r["latencies_ms"])
                 for v in variants(phase, limits)}
        base = pools.get(NO_SWEEP, [])
        base_p99 = p99(base)
        unthrottled_rate = _pooled_rate([r for r in mine if r["variant"] == UNTHROTTLED])
        rows: dict = {}
        for variant in variants(phase, limits):
            rs = [r for r in mine if r["variant"] == variant]
            if not rs:
                continue
            pool = pools[str(variant)]
            row: dict = {
                "variant": variant, "limit": variant if isinstance(variant, int) else None,
                "foreground_transactions": len(pool), "p50_ms": percentile(pool, 50), "p99_ms": p99(pool),
                "conflicts": sum(r["conflicts"] for r in rs), "errors": sum(r["error_count"] for r in rs),
                "machine_busy_cores": median(r["cpu"]["machine_busy_cores"] for r in rs),
                "cassandra_cores": median(r["cpu"].get("cassandra_cores", float("nan")) for r in rs),
                "load_avg_1m": median(r["load_avg_1m"] for r in rs),
                "window_seconds": median(r["window_seconds"] for r in rs),
            }
            if phase in BUSY and row["p99_ms"] is None:
                row["p99_note"] = f"too few samples ({len(pool):,} < {MIN_SAMPLES_FOR_P99:,})"
            if variant != NO_SWEEP:
                rate = _pooled_rate(rs)
                row.update(
                    sweep_entries_per_second=rate,
                    share_of_unthrottled=rate / unthrottled_rate if rate is not None and unthrottled_rate else None,
                    seconds_paced=median(r["sweep"]["seconds_paced"] for r in rs),
                    pace_entries_per_second=_median_of([r["sweep"] for r in rs], "pace_entries_per_second"),
                    pace_backoffs=median(r["sweep"]["pace_backoffs"] for r in rs),
                    pace_reason=rs[-1]["sweep"]["pace_reason"],
                    checks_ok=all(r["sweep_check"] for r in rs),
                )
                if phase in BUSY:
                    row["p99_vs_no_sweep"] = row["p99_ms"] / base_p99 if row["p99_ms"] and base_p99 else None
                    row["p99_ratio_ci"] = list(p99_ratio_ci(pool, base)) if row["p99_vs_no_sweep"] else None
                    row["p50_vs_no_sweep"] = (row["p50_ms"] / percentile(base, 50)
                                              if row["p50_ms"] and percentile(base, 50) else None)
            rows[str(variant)] = row
        out[phase] = {"foreground_rate": fg_rates[phase], "variants": rows}
    return out


def evaluate_goals(phases: dict, limits: Sequence[int], *, placement: str = "") -> list:
    """The goals (:data:`P99_GOAL`, :data:`IDLE_SHARE_GOAL`) at the default on one placement's summary, and in the
    steady phase its sweep rate against that of the highest fixed limit meeting the p99 goal."""
    at = f"{DEFAULT}{', ' + placement if placement else ''}"
    goals: list = []

    def goal(name: str, value: float | None, target: float, op: str, note: str = "") -> None:
        goals.append(results.goal(name, value, target, op, note=note))

    for phase in PHASES:
        row = phases[phase]["variants"].get(DEFAULT, {})
        if phase not in BUSY:
            goal(f"{phase}: sweep rate / unthrottled ({at})", row.get("share_of_unthrottled"), IDLE_SHARE_GOAL, ">=")
            continue
        note = row.get("p99_note", "")
        goal(f"{phase}: application p99 / no sweep ({at})", row.get("p99_vs_no_sweep"), P99_GOAL, "<=", note)
        upper = (row.get("p99_ratio_ci") or [None, None])[1]
        goal(f"{phase}: upper {CI_LEVEL:.0%} bound of that ratio ({at})", upper, P99_UPPER_GOAL, "<=", note)
    steady = phases["steady"]["variants"]
    gentle = [lim for lim in limits if (steady.get(str(lim), {}).get("p99_vs_no_sweep") or float("inf")) <= P99_GOAL]
    rate = steady.get(DEFAULT, {}).get("sweep_entries_per_second")
    name = f"steady: sweep rate / that of the highest fixed limit keeping p99 <= {P99_GOAL}x ({at})"
    if gentle and rate is not None:
        best = max(gentle)
        best_rate = steady[str(best)]["sweep_entries_per_second"]
        goal(f"{name}: {best:,}/s, swept {best_rate:,.0f}/s", rate / best_rate, 1.0, ">=")
    else:
        goal(name, None, 1.0, ">=", "no fixed limit kept p99 within the goal" if rate is not None else "not measured")
    return goals


__all__ = ["BUSY", "DEFAULT", "MIN_POOLED", "MIN_SAMPLES_FOR_P99", "NO_SWEEP", "PHASES", "UNTHROTTLED",
           "default_variant", "evaluate_goals", "p99", "p99_ratio_ci", "percentile", "summarise", "variants"]
