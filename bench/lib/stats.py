"""Small statistics of the benchmarks: medians, the rotation that interleaves variants, a bootstrap interval of a
ratio of medians.

Every figure a benchmark reports is a ratio of two things measured side by side in the same run, interleaved (the
order of the variants rotates every repetition), and the median of at least three repetitions, because other work
may be running on the machine."""
from __future__ import annotations

import random
import statistics
from collections.abc import Iterable, Sequence


def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


def rotated(items: Sequence, rep: int) -> list:
    """``items`` rotated by ``rep``: the variants change places every repetition (interleaving)."""
    items = list(items)
    if not items:
        return items
    k = rep % len(items)
    return items[k:] + items[:k]


def ratio_of_medians_ci(
    numerators: Sequence[float], denominators: Sequence[float], *, level: float = 0.90, resamples: int = 2000,
    seed: int = 7,
) -> tuple[float, float]:
    """Bootstrap ``level`` confidence interval of median(numerators) / median(denominators) over paired
    samples (index i of both was measured back to back): pairs are resampled together."""
    if len(numerators) != len(denominators) or not numerators:
        raise ValueError("paired samples of equal, non-zero length are needed")
    rng = random.Random(seed)
    n = len(numerators)
    ratios = []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        ratios.append(median(numerators[i] for i in idx) / median(denominators[i] for i in idx))
    ratios.sort()
    tail = (1 - level) / 2
    return ratios[int(tail * (resamples - 1))], ratios[int(round((1 - tail) * (resamples - 1)))]
