"""TimestampClock: logical timestamps <-> wall-clock seconds, from anchors (pure; the anchors are read from
the store by :mod:`airflow_atlas.status.compute`)."""
from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .anchors import clock_anchors

if TYPE_CHECKING:
    from ..store import AtlasStore


class TimestampClock:
    """Maps logical timestamps to wall-clock seconds and back, from anchors ``(wall, ts)`` that each mean
    "by wall time ``wall`` the fresh timestamp had reached at least ``ts``".

    Anchors are reduced to a strictly increasing staircase (an anchor whose ts is not above an earlier
    anchor's adds nothing). :meth:`ts_at` is the staircase (a lower bound); :meth:`wall_of` interpolates
    linearly between the two anchors around ``ts``.
    """

    def __init__(self, anchors: Iterable[tuple[float, int]]):
        points: list[tuple[float, int]] = []
        for wall, ts in sorted((float(w), int(t)) for w, t in anchors if w is not None and t is not None):
            if points and ts <= points[-1][1]:
                continue
            points.append((wall, ts))
        self.points = points
        self._walls = [p[0] for p in points]
        self._tss = [p[1] for p in points]

    @classmethod
    def from_store(cls, store: AtlasStore, now: float, fresh_ts: int, records: Iterable[dict] = ()) -> TimestampClock:
        """A clock with the anchors of ``store`` (see :func:`airflow_atlas.status.anchors.clock_anchors`)."""
        return cls(clock_anchors(store, now, fresh_ts, records))

    @property
    def oldest_wall(self) -> float | None:
        return self._walls[0] if self._walls else None

    def ts_at(self, wall: float) -> int | None:
        """The greatest timestamp known to have been reached by ``wall`` (None when no anchor is that old)."""
        i = bisect.bisect_right(self._walls, wall)
        return self._tss[i - 1] if i else None

    def wall_of(self, ts: int) -> float | None:
        """Estimated wall time at which ``ts`` was the fresh timestamp; None when ``ts`` is older than every
        anchor; the newest anchor's wall time when ``ts`` is at or above it."""
        if not self.points:
            return None
        i = bisect.bisect_left(self._tss, ts)
        if i >= len(self.points):
            return self._walls[-1]
        if self._tss[i] == ts:
            return self._walls[i]
        if i == 0:
            return None
        (w0, t0), (w1, t1) = self.points[i - 1], self.points[i]
        return w0 + (ts - t0) * (w1 - w0) / (t1 - t0)

    def timestamps_per_second(self, since: float | None = None) -> float | None:
        """Average timestamp rate between the oldest anchor at or after ``since`` (or the oldest) and the
        newest anchor."""
        points = [p for p in self.points if since is None or p[0] >= since] or self.points
        if len(points) < 2 or points[-1][0] <= points[0][0]:
            return None
        return (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0])
