"""The application-latency pace (issue 31 item 2): an outer loop that holds the application's p99 within
``sweep_latency_target`` x its p99 without sweep, by a ceiling over the own-latency pace
(:class:`~airflow_atlas.sweep.pacing.adaptive.AdaptiveController`). Pure logic: no I/O, no clock and no sleep
(times come in as arguments); every decision is unit-tested (tests/unit/sweep/pacing/test_application.py).

Why: the sweep's own request latency hardly moves when the application suffers (issue 31: the own-latency
controller kept increasing at ``delete p50 10 ms <= target 16 ms`` while the application's p99 had tripled),
so a controller fed by it cannot protect the application. This one is fed with what the application saw.

Inputs (from an :class:`ApplicationLatencySource`, called by the sweeper once per iteration):

* ``since_last_call()``: a :class:`~airflow_atlas.transactions.histogram.LatencyHistogram` of the application's
  transactions observed since the previous call, pooled over its clients (empty when there were none);
* ``quiet()``: the application's transactions in windows where no sweep ran (between runs, at night), a
  histogram per published summary in the order they ended, or None. From :data:`MIN_TRANSACTIONS`
  transactions on they give the **baseline** (:func:`baseline_of`): consecutive summaries are pooled into
  stretches of at least :data:`MIN_TRANSACTIONS` - the size of a decision's pool, so the baseline is the same
  statistic as what is compared with it - and the baseline is the median of the stretches' p99s. Not the p99
  of all of them pooled: a minute of overload without any sweep (a batch job, a node's pause; the benchmark's
  capacity probe) is more than 1% of ten quiet minutes, and its latency became the pooled p99 (5.5 s against
  the 30-47 ms of the application without sweep in a focused run of 2026-11-30, bench/ANALYSIS.md), so the
  controller never backed off for the TTL of the summaries. Without a baseline, the store's pace profile's
  (learned by an earlier run, below) is used; without that either, the run **learns** it (state
  ``learning``).

The effective pace is the lowest of the own-latency controller's pace, this controller's ceiling and the
node-pressure guard's (:mod:`.pressure`, fed with the nodes' readings by :meth:`ApplicationPaceController.feed`;
:meth:`ApplicationPaceController.pace`), so every existing guard (the sweep's own latency, the strong
signal of a timed-out request, ``sweep_max_entries_per_second``) still bounds it, and with no application
traffic the own-latency controller alone decides ("runs free").

States (:attr:`ApplicationPaceController.state`):

* ``free``: no ceiling (no application traffic for :data:`IDLE_SECONDS`, also in the seconds before the run,
  or no decision has asked for one);
* ``steering``: a ceiling holds; a run starts here at the pace the store's previous run ended with (the
  pace profile), when one is stored and the application was not idle just before the run;
* ``learning``: the application is busy and no baseline is known: the sweep is held at
  :data:`LEARNING_ENTRIES_PER_SECOND` (as good as no sweep) until :data:`MIN_TRANSACTIONS` transactions are
  pooled; their p99 is the baseline (kept in the pace profile for later runs). At most
  :data:`LEARNING_MAX_SECONDS`: an application too sparse to give 100 transactions by then is left to the
  own-latency controller for the run (``no baseline``).

Decisions: transactions are pooled over feeds until the pool holds :data:`MIN_TRANSACTIONS` (a p99 of fewer
is its slowest transaction: noise), or until it holds :data:`OVER_SETTLES` transactions over the target
(then the p99 of any :data:`MIN_TRANSACTIONS` that include them is over it, whatever the others will be: the
back-off need not wait for the pool to fill); then its p99 is compared with ``baseline x latency_target``:

* over it: the ceiling becomes :data:`DECREASE_FACTOR` x the rate the sweeper actually **reached** since the
  previous decision (entries swept / seconds, at most the highest pace of that time: the pacer's wait for the
  last iteration comes after the feed), never below the own controller's minimum: halving the nominal pace
  does nothing when the sweeper runs below it (its own speed, or the own-latency pace);
* under it: the ceiling (when there is one) grows by :data:`QUIET_GROWTH_FACTOR` when the p99 uses at most
  half the headroom (the application is as fast as without sweep), else by :data:`NEAR_GROWTH_FACTOR` (near
  the target the pace creeps: no oscillation around it); not above twice what the sweeper reached (a
  ceiling the sweeper does not reach is not raised without bound, so the next back-off takes effect at once).

After a back-off (and on entering ``learning``) the feeds of :data:`SETTLE_SECONDS` are dropped: the
application's latency is published about once a second, so they describe the pace before the change.

Quantiles of the histogram are bucket bounds (4 per doubling): a p99 is "over" when its bucket's bound is,
so the effective threshold is up to 19% above ``baseline x latency_target``.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ...kvs.pressure import NodePressure
from ...transactions.histogram import LatencyHistogram
from ...validation import check_float, check_int
from .adaptive import MAX_SWEEP_LATENCY_TARGET, MIN_ENTRIES_PER_SECOND, PROFILE_RISE_PER_RUN, ms
from .pressure import PressureGuard

log = logging.getLogger(__name__)

PACE_SIGNALS = ("sweep", "application")
"""Values of the setting ``sweep_pace_signal``: ``sweep`` - the pace steers on the sweep's own request latency
only (:class:`~airflow_atlas.sweep.pacing.adaptive.AdaptiveController`); ``application`` - also on the
application's latency (this module), when the sweeper is given a source of it."""
DEFAULT_PACE_SIGNAL = "sweep"
"""Default of ``sweep_pace_signal`` (it matters only where the adaptive pace is turned on: off by default, issue 31
item 4). Not ``application``: measured side by side, it held the steady phase no better than the default's fixed
rate and the burst phase far worse (docs/INTENSITY.md, "Why the default is fixed")."""
MIN_TRANSACTIONS = 100
"""A decision (and a baseline) takes at least this many transactions: the nearest-rank p99 of 100 is the second
slowest; of fewer, the slowest (issue 31)."""
OVER_SETTLES = MIN_TRANSACTIONS - math.ceil(0.99 * MIN_TRANSACTIONS) + 1
"""Transactions over the target that settle an "over" decision before the pool is full (2: the nearest-rank
p99 of 100 is the second slowest)."""
DECREASE_FACTOR = 0.5
"""Over the target, the ceiling becomes this times the rate the sweeper reached."""
QUIET_GROWTH_FACTOR = 1.5
"""Under the target with at most half the headroom used, the ceiling grows by this per decision: a halving is
regained in two decisions (x2 would undo it in one and oscillate between the two every decision)."""
NEAR_GROWTH_FACTOR = 1.1
"""Under the target with more than half the headroom used, the ceiling grows by this per decision (multiplicative,
not additive: the sweeper's rates span 50 to ~75,000 entries/s, where one additive step is either nothing or
too much)."""
IDLE_SECONDS = 2.0
"""Feeds with no transaction for this long: the application is idle, the ceiling is dropped (runs free). Two
publication intervals: one empty second is a gap between publications."""
SETTLE_SECONDS = 1.0
"""Feeds dropped after a back-off or the start of learning: they describe the pace before the change (the
application's latency is published about once a second)."""
LEARNING_ENTRIES_PER_SECOND = MIN_ENTRIES_PER_SECOND
"""The pace while the baseline is learned: the own controller's minimum (50 entries/s, a twentieth of the 1,000/s
the benchmark measured within 1.25x of no sweep: as good as none)."""
LEARNING_MAX_SECONDS = 10.0
"""Learning gives up after this long (an application of fewer than 10 transactions per second): the run is left
to the own-latency controller, unprotected by this one, rather than held at the minimum pace."""


class ApplicationLatencySource(Protocol):
    """Where the application's latency comes from (issue 31 item 1 publishes it in a store table). Called by the
    sweeper after every iteration (several times a second at full speed): a source that reads a table should
    read it about once per publication and return an empty histogram in between (the controller takes the
    application for idle only after :data:`IDLE_SECONDS` without a transaction). An exception is logged and
    skipped (the ceiling holds); it never fails the run."""

    def since_last_call(self) -> LatencyHistogram:
        """The application's transactions observed since the previous call, pooled over its clients (empty: none)."""

    def quiet(self) -> Sequence[LatencyHistogram] | None:
        """The application's transactions in windows where no sweep ran, a histogram per published summary in
        the order they ended (None: not known)."""

    def recent(self) -> LatencyHistogram | None:
        """The application's transactions of the :data:`IDLE_SECONDS` (at least two publication intervals)
        before the run (None: not known): none, and the run starts free rather than at the previous run's end
        pace."""

    def pressure(self) -> list[NodePressure] | None:
        """The store's nodes' pressure when read this time (read about once per publication: None in between;
        []: no nodes), for the node-pressure guard (:mod:`.pressure`)."""


class GuardedSource:
    """A source as the sweeper reads it (the one I/O edge of this module): a read that raises is logged and
    comes back as None (unreadable: the ceiling holds), so a source never fails a run."""

    def __init__(self, source: ApplicationLatencySource) -> None:
        self._source = source
        self._no_pressure = False

    def _read(self, read, what: str):
        try:
            return read()
        except Exception as exc:
            log.warning("could not read the application's latency (%s): %s", what, exc)
            return None

    def since_last_call(self) -> LatencyHistogram | None:
        return self._read(self._source.since_last_call, "transactions")

    def quiet(self) -> Sequence[LatencyHistogram] | None:
        return self._read(self._source.quiet, "quiet windows")

    def recent(self) -> LatencyHistogram | None:
        return self._read(self._source.recent, "the seconds before the run")

    def pressure(self) -> list[NodePressure] | None:
        """A failed read is logged once and pressure is not read again in the run (a role without SELECT on
        the virtual table fails every time): the guard then holds nothing back."""
        if self._no_pressure:
            return None
        try:
            return self._source.pressure()
        except Exception as exc:
            self._no_pressure = True
            log.warning("could not read the nodes' pressure (not used for the rest of the run): %s", exc)
            return None


@dataclass(frozen=True)
class ApplicationPace:
    """What the controller keeps between runs in the store's pace profile (sweep/pacing/pace_profile.py)."""

    baseline_p99_seconds: float | None = None
    """The application's p99 without sweep, learned by a run (``learning``)."""
    end_entries_per_second: float | None = None
    """The pace the run ended with: where the next run starts."""


def merge_application(stored: ApplicationPace, kept: ApplicationPace) -> ApplicationPace:
    """The application pace to store after a run: the baseline a moving minimum (raised by
    :data:`~airflow_atlas.sweep.pacing.adaptive.PROFILE_RISE_PER_RUN` at most), the end pace the run's own."""
    baseline = stored.baseline_p99_seconds
    if kept.baseline_p99_seconds is not None:
        baseline = kept.baseline_p99_seconds if baseline is None else min(
            kept.baseline_p99_seconds, baseline * (1 + PROFILE_RISE_PER_RUN))
    end = kept.end_entries_per_second if kept.end_entries_per_second is not None else stored.end_entries_per_second
    return ApplicationPace(baseline_p99_seconds=baseline, end_entries_per_second=end)


def quiet_stretches(quiet: Sequence[LatencyHistogram]) -> list[LatencyHistogram]:
    """Consecutive histograms of ``quiet`` (in the order they ended) pooled into stretches of at least
    :data:`MIN_TRANSACTIONS` transactions; a shorter rest joins the last stretch ([] under
    :data:`MIN_TRANSACTIONS` in all)."""
    stretches: list[LatencyHistogram] = []
    current = LatencyHistogram()
    for histogram in quiet:
        current.merge(histogram)
        if current.count >= MIN_TRANSACTIONS:
            stretches.append(current)
            current = LatencyHistogram()
    if current.count and stretches:
        stretches[-1].merge(current)
    return stretches


def baseline_of(quiet: Sequence[LatencyHistogram] | None) -> float | None:
    """The baseline that quiet windows (histograms in the order they ended) give: the median p99 of their
    :func:`quiet_stretches` (the lower of the middle two), None under :data:`MIN_TRANSACTIONS` transactions in
    all (see the module doc: why not the pooled p99)."""
    p99s = sorted(stretch.quantile(0.99) for stretch in quiet_stretches(quiet or ()))
    return p99s[(len(p99s) - 1) // 2] if p99s else None


class ApplicationPaceController:
    """The ceiling over one run's pace from the application's latency (see the module doc).

    :param latency_target: allowed ratio of the application's p99 to its baseline (> 1: ``sweep_latency_target``).
    :param now: the run's start on the caller's monotonic clock.
    :param quiet: the source's histograms of quiet windows, in the order they ended (:func:`baseline_of`).
    :param stored: what an earlier run kept (its learned baseline, used without ``quiet``; its end pace, this
        run's starting ceiling).
    :param recent: the source's histogram of the :data:`IDLE_SECONDS` before the run: empty, the application is
        idle and the run starts free, not at the stored end pace (None: not known, the end pace holds).
    """

    def __init__(self, latency_target: float, *, now: float, quiet: Sequence[LatencyHistogram] | None = None,
                 stored: ApplicationPace | None = None, recent: LatencyHistogram | None = None):
        self.latency_target = check_float(latency_target, "latency_target", 1.0, MAX_SWEEP_LATENCY_TARGET)
        stored = stored or ApplicationPace()
        from_quiet = baseline_of(quiet)
        self.baseline: float | None = from_quiet if from_quiet is not None else stored.baseline_p99_seconds
        """The application's p99 without sweep (seconds), None until known."""
        self.learned: float | None = from_quiet
        """The baseline this run found in quiet windows or learned (``learning``), for the pace profile."""
        self.ceiling: float | None = None
        """The upper bound of the pace (entries/s); None: free."""
        self.state = "free"
        self.reason = "free: no application transaction seen yet"
        if stored.end_entries_per_second is not None and recent is not None and not recent.count:
            self.reason = (f"free: no application transaction in the {IDLE_SECONDS:g} s before the run (the previous "
                           f"run ended at {stored.end_entries_per_second:,.0f} entries/s)")
        elif stored.end_entries_per_second is not None:
            self.ceiling = max(MIN_ENTRIES_PER_SECOND, stored.end_entries_per_second)
            self.state = "steering"
            self.reason = f"starting at the previous run's end pace, {self.ceiling:,.0f} entries/s"
        self._backoffs = 0
        self.guard = PressureGuard(now=now)
        """The node-pressure ceiling (:mod:`.pressure`), fed with the nodes' readings by :meth:`feed`."""
        self.last_pace: float | None = None
        """The effective pace last returned by :meth:`pace`."""
        self._pool = LatencyHistogram()
        self._pool_start = now
        self._pool_entries = 0
        self._pool_pace = 0.0
        self._last_traffic = now
        self._settle_until = now
        self._learning_since: float | None = None
        self._gave_up = False

    # ----- the composition ------------------------------------------------------------------------
    @property
    def backoffs(self) -> int:
        """Back-offs of this run by the application's latency and by the nodes' pressure."""
        return self._backoffs + self.guard.backoffs

    def pace(self, own_rate: float) -> float:
        """The effective pace: the lowest of the own-latency controller's ``own_rate``, the ceiling and the
        node-pressure guard's ceiling."""
        rate = min(c for c in (own_rate, self.ceiling, self.guard.ceiling) if c is not None)
        self.last_pace = rate
        self._pool_pace = max(self._pool_pace, rate)
        return rate

    def governs(self, own_rate: float) -> bool:
        """Whether the ceiling, not the own-latency pace (nor the pressure guard's lower one), sets the pace."""
        return self.ceiling is not None and self.ceiling < own_rate and not self._pressure_governs(own_rate)

    def _pressure_governs(self, own_rate: float) -> bool:
        held = self.guard.ceiling
        return held is not None and held < own_rate and (self.ceiling is None or held < self.ceiling)

    def reason_with(self, own_rate: float, own_reason: str) -> str:
        """Why the effective pace is what it is: the governing controller's reason first, the other's after."""
        if self._pressure_governs(own_rate):
            return (f"{self.guard.reason} [own latency: {own_rate:,.0f} entries/s, {own_reason}; "
                    f"application: {self.reason}]")
        if self.governs(own_rate):
            return f"application: {self.reason} [own latency: {own_rate:,.0f} entries/s, {own_reason}]"
        return f"{own_reason} [application: {self.reason}]"

    def kept(self) -> ApplicationPace:
        """What the pace profile keeps of this run: the baseline it learned, the pace it ended with."""
        ended = None if self.state == "learning" else self.last_pace  # the learning pace is no steering result
        return ApplicationPace(baseline_p99_seconds=self.learned, end_entries_per_second=ended)

    # ----- the feed -------------------------------------------------------------------------------
    def feed(self, histogram: LatencyHistogram, entries: int, now: float,
             nodes: list[NodePressure] | None = None) -> float | None:
        """The application's transactions since the previous feed (``histogram``) and the entries the sweeper
        took since then (``entries``), at ``now``; decides when the pool holds :data:`MIN_TRANSACTIONS`.
        ``nodes``: the nodes' pressure when read this time, for the guard. Returns the ceiling (None: free)."""
        check_int(entries, "entries", 0)
        self.guard.feed(nodes, entries, self.last_pace, now)
        self._pool_entries += entries
        if histogram.count:
            self._last_traffic = now
        elif now - self._last_traffic >= IDLE_SECONDS:
            if self.state != "free":
                self._set_free(f"free: no application transaction for {now - self._last_traffic:.1f} s")
            self._learning_since = None  # traffic that comes back starts learning again
            self._restart_pool(now)
            return self.ceiling
        if now < self._settle_until:
            self._restart_pool(now)  # they describe the pace before the last change
            return self.ceiling
        if self.baseline is None and not self._gave_up:
            if self._learning_since is None:
                if not histogram.count:
                    return self.ceiling
                self._start_learning(now)
                return self.ceiling
            self._pool.merge(histogram)
            if self._pool.count >= MIN_TRANSACTIONS:
                self.baseline = self.learned = self._pool.quantile(0.99)
                self._set_free(f"free: learned the application's baseline p99 {ms(self.baseline)} "
                               f"({self._pool.count} transactions at {LEARNING_ENTRIES_PER_SECOND:,.0f} entries/s)")
                self._restart_pool(now)
            elif now - self._learning_since >= LEARNING_MAX_SECONDS:
                self._gave_up = True
                self._set_free(f"free: no baseline (only {self._pool.count} application transactions in "
                               f"{LEARNING_MAX_SECONDS:g} s, {MIN_TRANSACTIONS} needed)")
                self._restart_pool(now)
            return self.ceiling
        if self.baseline is None:  # gave up learning: the own-latency controller decides
            return self.ceiling
        self._pool.merge(histogram)
        target = self.baseline * self.latency_target
        if self._pool.count >= MIN_TRANSACTIONS or self._pool.count_over(target) >= OVER_SETTLES:
            self._decide(now, target)
        return self.ceiling

    def _decide(self, now: float, target: float) -> None:
        """Compares the pool's p99 with ``target`` (``baseline x latency_target``)."""
        assert self.baseline is not None
        elapsed = now - self._pool_start
        reached = self._pool_entries / elapsed if elapsed > 0 else 0.0
        if self._pool_pace > 0:
            # At most the highest pace of the pool: the pacer's wait for the last iteration's entries comes after
            # this feed, so a pool of one fast iteration reads many times the pace (27,800 entries/s at 1,000).
            reached = min(reached, self._pool_pace)
        p99 = self._pool.quantile(0.99)
        n = self._pool.count
        text = (f"application p99 {ms(p99)} {'>' if p99 > target else '<='} target {ms(target)} "
                f"(baseline {ms(self.baseline)} x {self.latency_target:g}, {n} transactions)")
        if p99 > target:
            self.ceiling = max(MIN_ENTRIES_PER_SECOND, reached * DECREASE_FACTOR)
            self.state = "steering"
            self._backoffs += 1
            self.reason = f"backed off to {self.ceiling:,.0f} entries/s (half the {reached:,.0f} reached): {text}"
            self._settle_until = now + SETTLE_SECONDS
        elif self.ceiling is not None:
            quiet = p99 <= self.baseline + (target - self.baseline) / 2
            factor = QUIET_GROWTH_FACTOR if quiet else NEAR_GROWTH_FACTOR
            self.ceiling = min(self.ceiling * factor, max(self.ceiling, 2 * reached))
            self.reason = f"growing to {self.ceiling:,.0f} entries/s (x{factor:g} at most): {text}"
        else:
            self.reason = f"free: {text}"
        self._restart_pool(now)

    def _start_learning(self, now: float) -> None:
        self.state = "learning"
        self._learning_since = now
        self.ceiling = LEARNING_ENTRIES_PER_SECOND
        self.reason = (f"learning the application's baseline at {LEARNING_ENTRIES_PER_SECOND:,.0f} entries/s "
                       f"(no quiet window known)")
        self._settle_until = now + SETTLE_SECONDS
        self._restart_pool(now)

    def _set_free(self, reason: str) -> None:
        self.state = "free"
        self.ceiling = None
        self.reason = reason

    def _restart_pool(self, now: float) -> None:
        self._pool = LatencyHistogram()
        self._pool_start = now
        self._pool_entries = 0
        self._pool_pace = 0.0 if self.last_pace is None else self.last_pace


__all__ = [
    "DEFAULT_PACE_SIGNAL",
    "IDLE_SECONDS",
    "LEARNING_ENTRIES_PER_SECOND",
    "LEARNING_MAX_SECONDS",
    "MIN_TRANSACTIONS",
    "OVER_SETTLES",
    "PACE_SIGNALS",
    "SETTLE_SECONDS",
    "ApplicationLatencySource",
    "ApplicationPace",
    "ApplicationPaceController",
    "baseline_of",
    "merge_application",
    "quiet_stretches",
]
