"""The anchors of the status's :class:`~airflow_atlas.status.clock.TimestampClock` ("by wall time w the fresh
timestamp had reached ts"), read from the store: the punch table (the newest punch and the punch at or before
each of a few ages, the oldest found by bisection), the sweep history's records and ``(now, fresh_ts)``. A leaf
of ``status/``: it imports none of the package's other modules, so the clock and the status both use it."""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..store import AtlasStore
    from ..transactions.punch import PunchTable

_PUNCH_SAMPLE_AGES = (5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400, 259200, 604800)


def clock_anchors(store: AtlasStore, now: float, fresh_ts: int, records: Iterable[dict] = ()) -> list[tuple[float, int]]:
    """Anchors "by wall time w the fresh timestamp had reached ts" for a :class:`TimestampClock`: the punch
    table (the newest punch and the punch at or before each of a few ages), history records (``at``,
    ``sweep_ts``) and ``(now, fresh_ts)``."""
    anchors: list[tuple[float, int]] = [(now, fresh_ts)]
    punch = store.punch
    latest = punch.latest_punch()
    if latest is not None:
        anchors.append((latest[0] / 1000.0, latest[1]))
    # the youngest anchor from a punch: (wall time, the timestamp of the newest punch at or before it)
    younger = (min(now, latest[0] / 1000.0), latest[1]) if latest is not None else None
    for age in _PUNCH_SAMPLE_AGES:
        wall = now - age
        if younger is None or wall >= younger[0]:
            continue
        ts = punch.timestamp_at_or_before(int(wall * 1000))
        if ts is None:
            # The oldest punch lies between ``wall`` and ``younger``: find it (the store is younger than
            # this age, and its first punch anchors everything written since).
            anchors.append(_oldest_punch(punch, wall, younger))
            break
        anchors.append((wall, ts))
        younger = (wall, ts)
    for r in records:
        if isinstance(r.get("at"), (int, float)) and isinstance(r.get("sweep_ts"), int):
            anchors.append((r["at"], r["sweep_ts"]))
    return anchors


def _oldest_punch(punch: PunchTable, none_at: float, known: tuple[float, int]) -> tuple[float, int]:
    """Bisect the wall time of the oldest punch, knowing there is none at or before ``none_at`` and that
    ``known`` is (a wall time, the timestamp of the newest punch at or before it); precision 2% of the span
    or 50 ms."""
    lo, (hi, ts) = none_at, known
    precision = max(0.05, 0.02 * (hi - lo))
    while hi - lo > precision:
        mid = (lo + hi) / 2
        found = punch.timestamp_at_or_before(int(mid * 1000))
        if found is None:
            lo = mid
        else:
            hi, ts = mid, found
    return hi, ts
