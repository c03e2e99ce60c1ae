"""Closed-loop calls for a fixed window, as timestamps and transactions measure them: threads that call one
function without pause from one wall instant for a number of seconds (:func:`draw_loop`, :func:`run_threads`), and
a step's figures from its processes' results - the rate per sub-window, p50/p90/p99 and a bootstrap interval of
the p99 (:func:`summarise_step`), the interval of a ratio of two bootstrap distributions (:func:`ratio_ci`)."""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

WINDOWS = 10
"""Sub-windows per step: the rate's per-window samples (the ratio's interval)."""
MAX_DRAWS_PER_THREAD = 5_000_000
RESAMPLES = 400
"""Bootstrap resamples of a step's p99."""


def draw_loop(draw, start_at: float, seconds: float, max_draws: int = MAX_DRAWS_PER_THREAD) -> dict:
    """One thread: wait until wall time ``start_at``, then call ``draw()`` for ``seconds`` (at most
    ``max_draws`` times). Returns latencies (s), per-window completion counts and errors."""
    while (wait := start_at - time.time()) > 0:
        time.sleep(min(wait, 0.01))
    started = time.perf_counter()
    deadline = started + seconds
    window = seconds / WINDOWS
    latencies: list[float] = []
    counts = [0] * WINDOWS
    errors = 0
    first_error = ""
    for _ in range(max_draws):
        t0 = time.perf_counter()
        if t0 >= deadline:
            break
        try:
            draw()
        except Exception as exc:  # a contended cell gives up after its attempts: counted, not fatal
            errors += 1
            first_error = first_error or f"{type(exc).__name__}: {str(exc)[:200]}"
            continue
        t1 = time.perf_counter()
        latencies.append(t1 - t0)
        if t1 < deadline:
            counts[min(WINDOWS - 1, int((t1 - started) / window))] += 1
    return {"latencies": latencies, "counts": counts, "errors": errors, "first_error": first_error}


def run_threads(draw, threads: int, start_at: float, seconds: float) -> dict:
    """``threads`` threads of :func:`draw_loop` on ``draw``; their results pooled."""
    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(lambda _: draw_loop(draw, start_at, seconds), range(threads)))
    return {
        "latencies": [x for p in parts for x in p["latencies"]],
        "counts": [sum(p["counts"][i] for p in parts) for i in range(WINDOWS)],
        "errors": sum(p["errors"] for p in parts),
        "first_error": next((p["first_error"] for p in parts if p["first_error"]), ""),
        "pid": os.getpid(),
    }


def p99_resamples(latencies_ms: np.ndarray, resamples: int = RESAMPLES, seed: int = 11) -> np.ndarray:
    """Bootstrap distribution of the p99 (each resample as large as the pool)."""
    rng = np.random.default_rng(seed)
    n = len(latencies_ms)
    if n == 0:
        return np.array([])
    return np.array([np.percentile(latencies_ms[rng.integers(0, n, n)], 99) for _ in range(resamples)])


def interval(values: np.ndarray, level: float = 0.90) -> list[float] | None:
    if len(values) == 0:
        return None
    tail = (1 - level) / 2 * 100
    return [float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))]


def summarise_step(parts: list[dict], seconds: float) -> tuple[dict, np.ndarray]:
    """A step's figures from its processes' results, and the bootstrap p99 distribution (for ratios)."""
    lat = np.array([x for p in parts for x in p["latencies"]]) * 1000
    counts = [sum(p["counts"][i] for p in parts) for i in range(WINDOWS)]
    boot = p99_resamples(lat)
    window = seconds / WINDOWS
    summary = {
        "draws_per_second": sum(counts) / seconds,
        "samples": int(len(lat)),
        "in_window_draws": int(sum(counts)),
        "window_rates": [c / window for c in counts],
        "p50_ms": float(np.percentile(lat, 50)) if len(lat) else None,
        "p90_ms": float(np.percentile(lat, 90)) if len(lat) else None,
        "p99_ms": float(np.percentile(lat, 99)) if len(lat) else None,
        "p99_ci90_ms": interval(boot),
        "max_ms": float(lat.max()) if len(lat) else None,
        "errors": sum(p["errors"] for p in parts),
        "first_error": next((p["first_error"] for p in parts if p["first_error"]), ""),
        "pids": sorted({p["pid"] for p in parts}),
    }
    return summary, boot


def ratio_ci(num: np.ndarray, den: np.ndarray) -> list[float] | None:
    if len(num) == 0 or len(den) == 0:
        return None
    return interval(num / den)
