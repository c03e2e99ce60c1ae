"""A fixed-bucket latency histogram: cheap to record into on the commit path, mergeable across clients and
time, and small to store.

Buckets are log-spaced, :data:`BUCKETS_PER_DOUBLING` per doubling from :data:`FIRST_BOUND_SECONDS` (100 us)
to the last bound (about 107 s); a latency above the last bound counts in an overflow bucket. A quantile is
the upper bound of the bucket that holds it (a conservative estimate, at most ~19% above the true value at
four buckets per doubling), so two histograms' quantiles compare exactly when their buckets do. Recording
is one ``bisect`` and one increment: no allocation, no lock (the caller owns one histogram per thread or
locks around it).

Pure: imports only the standard library, so the transaction layer, the pace controller and the status
read it without importing each other.
"""
from __future__ import annotations

import json
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable

from ..errors import InvalidInputError

FIRST_BOUND_SECONDS = 0.0001
BUCKETS_PER_DOUBLING = 4
DOUBLINGS = 20
#: upper bounds in seconds of the finite buckets; index len(BOUNDS) is the overflow bucket
BOUNDS: tuple[float, ...] = tuple(
    FIRST_BOUND_SECONDS * 2 ** (i / BUCKETS_PER_DOUBLING) for i in range(DOUBLINGS * BUCKETS_PER_DOUBLING + 1)
)
ENCODING_VERSION = 1


class LatencyHistogram:
    """Counts of latencies per fixed bucket, with their sum (for a mean)."""

    __slots__ = ("counts", "total_seconds")

    def __init__(self) -> None:
        self.counts: list[int] = [0] * (len(BOUNDS) + 1)
        self.total_seconds = 0.0

    def record(self, seconds: float) -> None:
        if seconds < 0 or math.isnan(seconds):
            raise InvalidInputError(f"a latency must be a non-negative number of seconds, got {seconds!r}")
        self.counts[bisect_left(BOUNDS, seconds)] += 1
        self.total_seconds += seconds

    @property
    def count(self) -> int:
        return sum(self.counts)

    def merge(self, other: LatencyHistogram) -> None:
        """Add ``other``'s counts to this one (pooling clients or time windows)."""
        for i, n in enumerate(other.counts):
            if n:
                self.counts[i] += n
        self.total_seconds += other.total_seconds

    @classmethod
    def pooled(cls, histograms: Iterable[LatencyHistogram]) -> LatencyHistogram:
        out = cls()
        for h in histograms:
            out.merge(h)
        return out

    def quantile(self, q: float) -> float:
        """The upper bound in seconds of the bucket holding the nearest-rank ``q`` quantile (``inf`` in the
        overflow bucket); refuses an empty histogram and ``q`` outside (0, 1]."""
        if not 0 < q <= 1:
            raise InvalidInputError(f"a quantile must be in (0, 1], got {q!r}")
        n = self.count
        if n == 0:
            raise InvalidInputError("an empty histogram has no quantile")
        rank = math.ceil(q * n)
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= rank:
                return BOUNDS[i] if i < len(BOUNDS) else math.inf
        raise AssertionError("unreachable: the ranks add up to the count")

    def count_over(self, seconds: float) -> int:
        """How many latencies lie in buckets whose upper bound exceeds ``seconds`` (the overflow bucket included):
        with :meth:`quantile`'s bucket bounds, a quantile is over ``seconds`` exactly when its rank falls among
        these."""
        return sum(self.counts[bisect_right(BOUNDS, seconds):])

    def mean(self) -> float:
        n = self.count
        if n == 0:
            raise InvalidInputError("an empty histogram has no mean")
        return self.total_seconds / n

    def to_bytes(self) -> bytes:
        """Sparse JSON (``{"v": 1, "c": {index: count}, "s": sum}``): a second of one client's traffic is a
        few dozen bytes."""
        sparse = {str(i): c for i, c in enumerate(self.counts) if c}
        return json.dumps({"v": ENCODING_VERSION, "c": sparse, "s": self.total_seconds},
                          separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> LatencyHistogram:
        try:
            doc = json.loads(raw)
            if doc.get("v") != ENCODING_VERSION:
                raise ValueError(f"encoding version {doc.get('v')!r}, expected {ENCODING_VERSION}")
            out = cls()
            for key, n in doc["c"].items():
                i, count = int(key), int(n)
                if not 0 <= i < len(out.counts) or count < 0:
                    raise ValueError(f"bucket {key}={n} out of range")
                out.counts[i] = count
            out.total_seconds = float(doc["s"])
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise InvalidInputError(f"not a latency histogram: {e}") from e
        return out

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, LatencyHistogram) and self.counts == other.counts
                and math.isclose(self.total_seconds, other.total_seconds))

    def __repr__(self) -> str:
        if not self.count:
            return "LatencyHistogram(empty)"
        return f"LatencyHistogram(n={self.count}, p50={self.quantile(0.5):.4f}s, p99={self.quantile(0.99):.4f}s)"
