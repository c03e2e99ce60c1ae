"""The application pace: one run's pace from whether and how the application is running, as its clients
publish it (docs/INTENSITY.md is this module's specification). Pure logic: no I/O, no clock and no sleep
(times and observations come in as arguments); every state and transition is unit-tested
(tests/unit/sweep/pacing/test_application.py).

Inputs: every transaction client of the store that has run a transaction publishes, once per publication
interval and also when it ran nothing, that it is alive and the latencies of the transactions it ran
(transactions/latency_publisher.py; the first transaction after a rest is published at once). The sweeper
reads the publications (transactions/latency_source.py) and feeds them here as :class:`Observation` s.

States (:class:`PaceState`), from the newest publication heard and the newest one that held transactions:

* ``unseen`` - no client published for :data:`ALIVE_INTERVALS` publication intervals: an application that
  does not write through this layer, clients that do not publish (setting ``app_latency_publish`` false), or a
  store nobody uses. Nothing tells a busy store from an idle one, so the run keeps the **safe pace** (setting
  ``sweep_max_entries_per_second``, 250 entries/s per pair), and its reason says why.
* ``resting`` - clients are alive and none ran a transaction for :data:`REST_INTERVALS` intervals: the sweep
  runs **unthrottled**, bounded only by what protects the node (the node-pressure guard, :mod:`.pressure`; the
  store's request timeouts; the batch limit).
* ``running`` - transactions were published within :data:`REST_INTERVALS` intervals: the run sweeps at the
  safe pace, entered at once (never a slow start into a busy store), and steers from there by additive
  increase and multiplicative decrease on the application's p99:

  - transactions are pooled until :data:`MIN_TRANSACTIONS` (the nearest-rank p99 of fewer is the slowest one:
    noise) - or until :data:`OVER_SETTLES` of them are over the target, which settles an "over" at once;
  - a pool decided at the safe pace is a **baseline** sample: the baseline is the median p99 of the last
    :data:`BASELINE_POOLS` such pools. The safe pace is the measured pace at which the application's p99 is
    that of no sweep (bench/ANALYSIS.md), so the baseline is the application's quiet p99 measured while it
    runs - no window without sweep is needed, and a baseline is never older than the running phase;
  - once a baseline is known, a pool whose p99 is at most ``baseline x sweep_latency_target`` raises the
    pace by :data:`ADDITIVE_STEP_FACTOR` x the safe pace; one over it halves the pace (never below the safe
    pace, which is where the baseline is measured again), and the transactions of the next
    :data:`SETTLE_INTERVALS` intervals are dropped (they describe the pace before the change).

  Each new running phase starts at the safe pace again; the baseline samples are kept.

Quantiles are histogram bucket bounds (4 per doubling, transactions/histogram.py): a p99 and its baseline
compare as bucket bounds, so "over" means at least one bucket above ``baseline x target``.
"""
from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass
from enum import StrEnum

from ...kvs.pressure import NodePressure
from ...transactions.histogram import LatencyHistogram
from ...validation import check_float, check_int
from .pressure import PressureGuard

DEFAULT_SWEEP_LATENCY_TARGET = 1.2
"""Default of ``sweep_latency_target``: a running application's p99 may be at most 1.2x its baseline before
the pace is halved (below the 1.25x the benchmark judges: a p99 moves in buckets of 1.19x)."""
MAX_SWEEP_LATENCY_TARGET = 100.0
"""Largest ``sweep_latency_target``."""
ALIVE_INTERVALS = 3.0
"""A store whose clients published nothing for this many publication intervals is ``unseen``: a live client
publishes once per interval, so two may go missing (a slow write, a pause) before it counts as gone."""
REST_INTERVALS = 2.0
"""Clients alive and no transaction published for this many intervals: the application rests. Two: a running
client publishes once per interval, so one empty interval is a gap between two busy ones."""
MIN_TRANSACTIONS = 100
"""A decision takes at least this many transactions (the nearest-rank p99 of 100 is the second slowest)."""
OVER_SETTLES = MIN_TRANSACTIONS - math.ceil(0.99 * MIN_TRANSACTIONS) + 1
"""Transactions over the target that settle an "over" before the pool is full (2: the p99 of any 100 that
include them is over the target)."""
BASELINE_POOLS = 3
"""Pools at the safe pace whose median p99 is the baseline (one pool's p99 is its second slowest transaction:
the median of three keeps one unlucky pool from setting it)."""
ADDITIVE_STEP_FACTOR = 1.0
"""A pool within the target raises the pace by this times the safe pace (250 entries/s at the default)."""
DECREASE_FACTOR = 0.5
"""A pool over the target multiplies the pace by this (never below the safe pace)."""
SETTLE_INTERVALS = 1.0
"""Intervals of transactions dropped after a change of pace (a client publishes what it ran in the interval
before, so the first publication after a change describes the old pace)."""


class PaceState(StrEnum):
    """What the controller knows of the application (see the module doc)."""

    UNSEEN = "unseen"
    RESTING = "resting"
    RUNNING = "running"


@dataclass(frozen=True)
class Observation:
    """What one read of the publications found (times on the sweeper's wall clock, seconds).

    :param heard_at: when the newest publication read was heard (None: none in this read).
    :param busy_at: when the newest publication that held a transaction was heard (None: none).
    :param transactions: the latencies of the transactions in the publications read (pooled over clients).
    :param pressure: the nodes' pressure when read this time (None: not read; []: no nodes).
    """

    heard_at: float | None = None
    busy_at: float | None = None
    transactions: LatencyHistogram | None = None
    pressure: list[NodePressure] | None = None


def ms(seconds: float) -> str:
    """Seconds as milliseconds for a reason (``"3.2 ms"``, ``"38 ms"``)."""
    value = seconds * 1000
    return f"{value:.1f} ms" if value < 10 else f"{value:,.0f} ms"


class ApplicationPace:
    """The pace of one run from the application's publications (see the module doc).

    :param safe_rate: the safe pace, entries/s (``sweep_max_entries_per_second``, > 0).
    :param latency_target: allowed ratio of a pool's p99 to the baseline (``sweep_latency_target``, >= 1).
    :param interval_seconds: the clients' publication interval (``app_latency_interval_seconds``).
    :param now: the run's start on the wall clock; the state is ``unseen`` until an observation says otherwise.
    """

    def __init__(self, safe_rate: float, latency_target: float, interval_seconds: float, *, now: float):
        self.safe_rate = check_float(safe_rate, "safe_rate", 0)  # > 0: a rate of 0 is an unpaced run
        self.latency_target = check_float(latency_target, "latency_target", 1.0, MAX_SWEEP_LATENCY_TARGET)
        self.interval = check_float(interval_seconds, "interval_seconds", 0)
        self.state = PaceState.UNSEEN
        self.rate = self.safe_rate
        """The pace while running (entries/s)."""
        self.backoffs = 0
        self.baseline_samples: deque[float] = deque(maxlen=BASELINE_POOLS)
        self.guard = PressureGuard(now=now)
        self.reason = self._unseen_reason()
        self._heard: float | None = None
        self._busy: float | None = None
        self._pool = LatencyHistogram()
        self._settle_until = now

    @property
    def baseline(self) -> float | None:
        """The application's p99 at the safe pace (median of the last :data:`BASELINE_POOLS` pools), None
        until that many pools were decided there."""
        if len(self.baseline_samples) < BASELINE_POOLS:
            return None
        return statistics.median_low(self.baseline_samples)

    def pace(self) -> float:
        """The pace now, entries/s; 0 = unthrottled (resting, and no node-pressure ceiling)."""
        if self.state is PaceState.RESTING:
            base = math.inf
        elif self.state is PaceState.RUNNING:
            base = self.rate
        else:
            base = self.safe_rate
        if self.guard.ceiling is not None:
            base = min(base, self.guard.ceiling)
        return 0.0 if math.isinf(base) else base

    def full_reason(self) -> str:
        """Why the pace is what it is: the state's reason, and the node-pressure guard's when it holds."""
        if self.guard.ceiling is not None and self.guard.reason:
            return f"{self.guard.reason} [{self.reason}]"
        return self.reason

    def observe(self, seen: Observation, entries: int, now: float) -> float:
        """One read of the publications (``seen``) and the ``entries`` swept since the previous call, at
        ``now``; returns the pace (:meth:`pace`)."""
        check_int(entries, "entries", 0)
        if seen.heard_at is not None:
            self._heard = seen.heard_at if self._heard is None else max(self._heard, seen.heard_at)
        if seen.busy_at is not None:
            self._busy = seen.busy_at if self._busy is None else max(self._busy, seen.busy_at)
        self.guard.feed(seen.pressure, entries, self.pace() or None, now)
        state = self._state_at(now)
        if state is not self.state:
            self._enter(state, now)
        elif state is PaceState.RESTING:
            self.reason = self._resting_reason(now)
        if state is PaceState.RUNNING and seen.transactions is not None and seen.transactions.count:
            self._pool_transactions(seen.transactions, now)
        return self.pace()

    # ----- states ---------------------------------------------------------------------------------
    def _state_at(self, now: float) -> PaceState:
        if self._heard is None or now - self._heard > ALIVE_INTERVALS * self.interval:
            return PaceState.UNSEEN
        if self._busy is not None and now - self._busy < REST_INTERVALS * self.interval:
            return PaceState.RUNNING
        return PaceState.RESTING

    def _enter(self, state: PaceState, now: float) -> None:
        self.state = state
        self._pool = LatencyHistogram()
        if state is PaceState.RUNNING:
            self.rate = self.safe_rate  # never a slow start into a busy store
            self._settle_until = now + SETTLE_INTERVALS * self.interval  # what was published under the old pace
            self.reason = f"running: the safe pace {self.safe_rate:,.0f} entries/s, {self._baseline_text()}"
        elif state is PaceState.RESTING:
            self.reason = self._resting_reason(now)
        else:
            self.reason = self._unseen_reason()

    def _unseen_reason(self) -> str:
        return (f"unseen: no transaction client published for {ALIVE_INTERVALS * self.interval:g} s (an "
                f"application that does not write through airflow-atlas, app_latency_publish false, or none): "
                f"the safe pace {self.safe_rate:,.0f} entries/s")

    def _resting_reason(self, now: float) -> str:
        since = "no transaction published yet" if self._busy is None else (
            f"no transaction for {now - self._busy:.1f} s")
        return f"resting: clients alive, {since}: unthrottled"

    def _baseline_text(self) -> str:
        baseline = self.baseline
        if baseline is None:
            return (f"measuring the baseline ({len(self.baseline_samples)} of {BASELINE_POOLS} pools of "
                    f"{MIN_TRANSACTIONS} transactions)")
        return f"baseline p99 {ms(baseline)}"

    # ----- steering while running -----------------------------------------------------------------
    def _pool_transactions(self, transactions: LatencyHistogram, now: float) -> None:
        if now < self._settle_until:
            return
        self._pool.merge(transactions)
        baseline = self.baseline
        target = None if baseline is None else baseline * self.latency_target
        over = target is not None and self._pool.count_over(target) >= OVER_SETTLES
        if self._pool.count >= MIN_TRANSACTIONS or over:
            self._decide(now, target)

    def _decide(self, now: float, target: float | None) -> None:
        pool, self._pool = self._pool, LatencyHistogram()
        p99 = pool.quantile(0.99)
        at_safe = self.rate <= self.safe_rate
        if at_safe and pool.count >= MIN_TRANSACTIONS:
            self.baseline_samples.append(p99)
            baseline = self.baseline
            target = None if baseline is None else baseline * self.latency_target
        if target is None:
            self.reason = (f"running: the safe pace {self.safe_rate:,.0f} entries/s, {self._baseline_text()} "
                           f"(last p99 {ms(p99)})")
            return
        text = (f"p99 {ms(p99)} {'>' if p99 > target else '<='} target {ms(target)} ({self._baseline_text()} "
                f"x {self.latency_target:g}, {pool.count} transactions)")
        if p99 > target:
            if at_safe:
                self.reason = f"running: the safe pace {self.safe_rate:,.0f} entries/s: {text}"
                return
            self.rate = max(self.safe_rate, self.rate * DECREASE_FACTOR)
            self.backoffs += 1
            self._settle_until = now + SETTLE_INTERVALS * self.interval
            self.reason = f"running: halved to {self.rate:,.0f} entries/s: {text}"
        else:
            self.rate += ADDITIVE_STEP_FACTOR * self.safe_rate
            self._settle_until = now + SETTLE_INTERVALS * self.interval
            self.reason = f"running: raised to {self.rate:,.0f} entries/s: {text}"


__all__ = [
    "ADDITIVE_STEP_FACTOR", "ALIVE_INTERVALS", "BASELINE_POOLS", "DECREASE_FACTOR", "DEFAULT_SWEEP_LATENCY_TARGET",
    "MAX_SWEEP_LATENCY_TARGET", "MIN_TRANSACTIONS", "OVER_SETTLES", "REST_INTERVALS", "SETTLE_INTERVALS",
    "ApplicationPace", "Observation", "PaceState", "ms",
]
