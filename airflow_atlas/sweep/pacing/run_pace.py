"""One run's pace: the pacer (:mod:`.intensity`) and, by default, the application pace (:mod:`.application`)
composed, so that :meth:`~airflow_atlas.sweep.targeted.TargetedSweeper.sweep_shard` asks one object how big
the next batch may be, how long its next delete chunk is, and pays it between chunks and after the iteration.
The composition only: every decision is its parts' (and unit-tested there); this module holds when each part
is asked, and reads the application's publications.

Modes (from ``sweep_max_entries_per_second`` and ``sweep_latency_target``):

* **unpaced** - a dry run, or a rate of 0: no waits, the caller's batch limit, each table's deletes in one call;
* **fixed** - ``sweep_latency_target`` 0: the pacer at the rate for the whole run;
* **application** (the default) - the application pace sets the pacer's rate, 0 (unthrottled) while the
  application rests. The publications are read at most every :data:`FREE_POLL_SECONDS` while the sweep runs
  free - at the start of each iteration and between the chunks of its deletes, whose length follows the pace
  now (:func:`~.intensity.chunk_step`), so an application that starts slows the rest of the batch at once -
  and every half publication interval otherwise. A source that fails is logged and reads as no publication: a
  store whose publications cannot be read becomes ``unseen`` and keeps the safe pace.

Runs one after another: a sweep task's group sweeps its pairs in turn, each a run. A run takes over the application
pace (state, baseline, pace, its source's read position) that its process's previous run on the store left at most
:data:`CARRY_INTERVALS` publication intervals before (:class:`PaceCarry`, one per store's sweeper), so the pairs of
a group are paced as one long run would be - the case the foreground benchmark measures - instead of each starting
at the safe pace and pooling its baseline again (bench/ANALYSIS.md, ``sustained``). Runs at once on one store do
not share: a run takes the carried pace away, the others start afresh.

Crash safety is the pacer's (its waits come after an iteration's progress is persisted, or between chunks of
idempotent deletes); what is carried between runs is pacing knowledge held in memory, never anything of the store.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from .application import ApplicationPace, Observation, PaceState
from .intensity import SweepPacer, chunk_step

log = logging.getLogger(__name__)

FREE_POLL_SECONDS = 0.1
"""While the sweep runs unthrottled, the publications are read at most this often (one small read of the
latest publications; ~10 a second per free-running pair): with the clients' first publication after a rest,
which is sent at once, an application that starts is seen within about this plus its first transaction."""
FIXED_REASON = "fixed rate (sweep_latency_target 0)"
CARRY_INTERVALS = 2.0
"""A run takes over the application pace its process's previous run on the store left, when that run ended at most
this many publication intervals before (the next pair of a group starts at once); later, the run starts afresh."""


class ApplicationSource(Protocol):
    """Where a run reads the application's publications (transactions/latency_source.py)."""

    def poll(self) -> Observation:
        """The publications not read before (the first call: those of the last few intervals)."""


class PaceSummary(Protocol):
    """Where a run's pace is reported (:class:`~airflow_atlas.sweep.results.ShardSweepResult`)."""

    seconds_paced: float
    latency_target: float
    pace_entries_per_second: float | None
    pace_reason: str | None
    pace_backoffs: int


class LeaseWaits(Protocol):
    """The waits of a run that holds a lease (:class:`~airflow_atlas.sweep.lease_keeper.LeaseKeeper`): a pause
    that a lost lease cuts short, and the check that stops the run once it is lost."""

    def pause(self, seconds: float) -> None: ...

    def raise_if_lost(self) -> None: ...


class PaceCarry:
    """The application pace one run hands on to the next run of its process on the same store (see the module
    doc). Thread-safe: :meth:`take` takes it away, so two runs at once never share one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._left: tuple[ApplicationPace, ApplicationSource, float] | None = None

    def take(self, safe_rate: float, latency_target: float, interval_seconds: float, now: float
             ) -> tuple[ApplicationPace, ApplicationSource] | None:
        """The pace and source left at most :data:`CARRY_INTERVALS` intervals before ``now`` (wall clock) with the
        same settings; None otherwise (then nothing is left either)."""
        with self._lock:
            left, self._left = self._left, None
        if left is None:
            return None
        application, source, ended = left
        same = (application.safe_rate, application.latency_target, application.interval) == (
            safe_rate, latency_target, interval_seconds)
        if not same or not 0 <= now - ended <= CARRY_INTERVALS * interval_seconds:
            return None
        return application, source

    def leave(self, application: ApplicationPace, source: ApplicationSource, now: float) -> None:
        """A run ends at ``now`` (wall clock) leaving its pace for the next."""
        with self._lock:
            self._left = (application, source, now)


class RunPace:
    """The pace of one run of one pair (see the module doc).

    :param max_entries_per_second: the fixed rate, or the application pace's safe pace (0 = unpaced).
    :param latency_target: ``sweep_latency_target`` (0 = a fixed rate).
    :param dry_run: a dry run is one unpaced iteration (it reports a whole batch).
    :param max_wait_seconds: the longest single wait (a third of the lock's lease).
    :param source: the application's publications, called once for an application-paced run.
    :param interval_seconds: the clients' publication interval (``app_latency_interval_seconds``).
    :param carry: where the previous run left its application pace and this run leaves its own (None: neither;
        a run with a source of the caller's own, whose publications are not the store's).
    :param clock: monotonic seconds (the pacer); :param wall: wall-clock seconds (the publications);
    :param sleep: the pacer's default sleep (all three for the unit tests).
    """

    def __init__(self, *, max_entries_per_second: int, latency_target: float, dry_run: bool,
                 max_wait_seconds: float, source: Callable[[], ApplicationSource] | None = None,
                 interval_seconds: float = 1.0, carry: PaceCarry | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep):
        self.pacer = SweepPacer(max_entries_per_second, max_wait_seconds=max_wait_seconds, clock=clock, sleep=sleep)
        self.paced = not (dry_run or self.pacer.unlimited)
        """Whether the run is paced: its batches capped at the pace, its deletes chunked, a wait after each
        iteration but the last."""
        self._wall = wall
        self._interval = interval_seconds
        self._limit = 1
        self._charged = 0.0  # what this iteration's chunks paid the pacer
        self._unfed = 0.0  # entries swept since the application pace last heard of them
        self._polled = float("-inf")
        self._source: ApplicationSource | None = None
        self.application: ApplicationPace | None = None
        """The application pace (None: unpaced or a fixed rate)."""
        self._carry = carry
        self._backoffs_before = 0
        if self.paced and latency_target and source is not None:
            taken = None if carry is None else carry.take(max_entries_per_second, latency_target, interval_seconds,
                                                          wall())
            if taken is None:
                self.application = ApplicationPace(max_entries_per_second, latency_target, interval_seconds,
                                                   now=wall())
                self._source = source()
            else:
                self.application, self._source = taken
                self._backoffs_before = self.application.backoffs + self.application.guard.backoffs
            self._poll()

    def start_iteration(self, limit: int, given: int | None) -> int | None:
        """An iteration begins; returns its batch limit: at the pace now for a paced run (``limit``, the run's
        batch limit, at most; ``limit`` itself while unthrottled), else ``given`` (the caller's, None: the
        store's setting)."""
        self._charged = 0.0
        self._limit = limit
        self._poll()
        return self.pacer.batch_cap(limit) if self.paced else given

    def current(self) -> float | None:
        """The pace now, reported as an iteration's when it ends (0: unthrottled; None: unpaced)."""
        return self.pacer.max_entries_per_second if self.paced else None

    # ----- ChunkPacing (sweep/batch_deletes.py), bound to the run's lease by chunk_pacing() -----------------
    def step(self, batch_entries: int) -> int:
        return chunk_step(batch_entries, self.pacer.max_entries_per_second, self._limit)

    def pay_chunk(self, entries: float, pause: Callable[[float], None]) -> None:
        """Between two chunks of a batch's deletes: pay the pacer the previous chunk's share (waiting with
        ``pause``), then read the publications when due."""
        self._charged += entries
        self._unfed += entries
        self.pacer.pace(entries, pause)
        self._poll()

    def end_iteration(self, entries_read: int, pause: Callable[[float], None]) -> None:
        """After an iteration that is not the run's last (its progress persisted): read the publications when
        due, then pay the pacer what the chunks did not pay of the iteration's ``entries_read``."""
        if not self.paced:
            return
        rest = max(0.0, entries_read - self._charged)
        self._unfed += rest
        self._poll()
        self.pacer.pace(rest, pause)

    def _poll(self) -> None:
        if self.application is None or self._source is None:
            return
        now = self._wall()
        due = FREE_POLL_SECONDS if self.application.state is PaceState.RESTING else self._interval / 2
        if now - self._polled < due:
            return
        self._polled = now
        try:
            seen = self._source.poll()
        except Exception as exc:  # unreadable: no publication heard (unseen after a few intervals: the safe pace)
            log.warning("could not read the application's publications: %s", exc)
            seen = Observation()
        entries, self._unfed = int(self._unfed), self._unfed - int(self._unfed)
        self.pacer.set_rate(self.application.observe(seen, entries, now))

    def finish(self, summary: PaceSummary) -> None:
        """The run's pace into its result (``summary``: a ShardSweepResult)."""
        summary.seconds_paced = round(self.pacer.seconds_paced, 6)
        if self.application is not None:
            summary.latency_target = self.application.latency_target
            summary.pace_entries_per_second = round(self.application.pace(), 1)
            summary.pace_reason = self.application.full_reason()
            summary.pace_backoffs = self.application.backoffs + self.application.guard.backoffs - self._backoffs_before
            if self._carry is not None and self._source is not None:
                self._carry.leave(self.application, self._source, self._wall())
        elif self.paced:
            summary.pace_entries_per_second = float(self.pacer.max_entries_per_second)
            summary.pace_reason = FIXED_REASON


class ChunkPacing:
    """A run's pace as one batch's deletes see it (:class:`~airflow_atlas.sweep.batch_deletes.ChunkPacing`):
    its waits are the lease keeper's pauses (a lost lease cuts them short, and stops the run before its next
    chunk)."""

    def __init__(self, pace: RunPace, keeper: LeaseWaits) -> None:
        self._pace = pace
        self._keeper = keeper

    def step(self, batch_entries: int) -> int:
        return self._pace.step(batch_entries)

    def spread(self, entries: float) -> None:
        self._pace.pay_chunk(entries, self._keeper.pause)
        self._keeper.raise_if_lost()


__all__ = [
    "CARRY_INTERVALS", "FIXED_REASON", "FREE_POLL_SECONDS", "ApplicationSource", "ChunkPacing", "LeaseWaits", "PaceCarry",
    "PaceSummary", "RunPace",
]
