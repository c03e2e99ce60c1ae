"""The node-pressure guard: a ceiling over the application pace (:mod:`.application`) from the store's nodes' own
account of how busy they are (:mod:`airflow_atlas.kvs.pressure`: a request stage queueing more tasks than it
has threads, blocked native-transport tasks, more than 20 pending compactions). Pure logic: the readings and
the times come in as arguments (the sweeper reads them through the application's latency source,
``pressure()``, at most once per publication interval); unit-tested in tests/unit/sweep/pacing/test_pressure.py.

Why beside the application's publications: a node can fall behind before any transaction is slower
(compactions pile up behind sweep's tombstones; a request stage's queue grows), and a resting application -
when the sweep runs unthrottled - gives no latency to steer on, while the node still serves others (repairs,
other keyspaces' clients). Without readings (the embedded store; a role that may not read the virtual table) the guard never holds the pace.

A reading under pressure, outside the settle time of the previous back-off, sets the ceiling to
:data:`DECREASE_FACTOR` x the rate the sweeper reached since the previous reading (never above the current
ceiling, never below :data:`MIN_ENTRIES_PER_SECOND`); a reading without pressure grows it by
:data:`GROWTH_FACTOR`, and drops it once it is over twice the rate reached (it no longer binds: the next
pressure halves what the sweeper really does). A signal that needs no baseline: a node's queue longer than its threads is pressure whatever it was yesterday.
"""
from __future__ import annotations

from ...kvs.pressure import NodePressure, pressure_problem

MIN_ENTRIES_PER_SECOND = 50.0
"""The lowest ceiling the guard sets: a pair is never starved."""
DECREASE_FACTOR = 0.5
"""Under pressure, the ceiling becomes this times the rate the sweeper reached."""
GROWTH_FACTOR = 1.5
"""Without pressure, a held ceiling grows by this per reading (a halving regained in two readings)."""
SETTLE_SECONDS = 2.0
"""Readings under pressure this long after a back-off do not back off again: a queue takes a moment to drain
once the sweep slows (two readings at the default interval)."""


class PressureGuard:
    """The ceiling from the nodes' pressure for one run (see the module doc)."""

    def __init__(self, *, now: float) -> None:
        self.ceiling: float | None = None
        """The upper bound of the pace (entries/s); None: the nodes hold nothing back."""
        self.reason: str | None = None
        self.backoffs = 0
        self._since = now
        self._entries = 0
        self._settle_until = now

    def feed(self, nodes: list[NodePressure] | None, entries: int, pace: float | None, now: float) -> float | None:
        """The entries swept since the previous feed and, when the nodes were read this time, their pressure
        (None: not read; []: no nodes, as on the embedded store). Returns the ceiling."""
        self._entries += entries
        if not nodes:
            return self.ceiling
        elapsed = now - self._since
        reached = self._entries / elapsed if elapsed > 0 else 0.0
        if pace is not None:
            reached = min(reached, pace)  # the pacer's wait for the last entries comes after the feed
        self._since, self._entries = now, 0
        problem = pressure_problem(nodes)
        if problem is not None:
            if now >= self._settle_until:
                lowered = max(MIN_ENTRIES_PER_SECOND, reached * DECREASE_FACTOR)
                self.ceiling = lowered if self.ceiling is None else min(self.ceiling, lowered)
                self.backoffs += 1
                self.reason = (f"node pressure, backed off to {self.ceiling:,.0f} entries/s (half the "
                               f"{reached:,.0f} reached): {problem}")
                self._settle_until = now + SETTLE_SECONDS
        elif self.ceiling is not None and now >= self._settle_until:
            self.ceiling *= GROWTH_FACTOR
            if self.ceiling > 2 * max(reached, MIN_ENTRIES_PER_SECOND):
                self.ceiling, self.reason = None, None
            else:
                self.reason = f"node pressure gone, growing to {self.ceiling:,.0f} entries/s (x{GROWTH_FACTOR:g})"
        return self.ceiling


__all__ = ["MIN_ENTRIES_PER_SECOND", "DECREASE_FACTOR", "GROWTH_FACTOR", "SETTLE_SECONDS", "PressureGuard"]
