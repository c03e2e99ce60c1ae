"""One run's pace: the pacer (:mod:`.intensity`), the own-latency controller (:mod:`.adaptive`) and the
application pace (:mod:`.application`) composed, so that :meth:`~airflow_atlas.sweep.targeted.TargetedSweeper.sweep_shard`
asks one object how big the next batch may be, pays it between the chunks of the batch's deletes and after the
iteration, and reports the run's pace. The composition only: every decision is its parts' (and unit-tested
there); this module holds when each part is asked.

When:

* **fixed rate** (``latency_target`` 0, ``max_entries_per_second`` > 0): the pacer at that rate; a batch is
  :meth:`~.intensity.SweepPacer.batch_cap` (one rule for the whole run);
* **unlimited** (both 0) and **dry runs**: no pacing, the caller's batch limit;
* **adaptive** (``latency_target`` > 0): the own-latency controller sets the pacer's rate after each iteration
  and sizes each batch at its pace (:func:`~.adaptive.batch_cap_at`);
* **application** (adaptive and setting ``sweep_pace_signal`` ``application``): the application pace bounds the
  own-latency pace; it is fed with the application's transactions and the entries taken since the previous
  feed **between the chunks of a batch's deletes** (:meth:`RunPace.pay_chunk`) as well as after each iteration
  (:meth:`RunPace.end_iteration`), and a new pace applies to the rest of the batch at once: a batch of up to a
  second of the pace (:func:`~.intensity.paced_batch_cap`) never delays a back-off by its length (fed after
  iterations only, a second's batches delayed the back-off of the real-node acceptance test to 3.5 s, over its
  3 s: issue 31). The source is read about once per publication (it returns an empty histogram in between),
  so the feeds between chunks cost no store request.

Crash safety is the pacer's (its waits come after an iteration's progress is persisted, or between chunks of
idempotent deletes); this module adds no state a crash could lose: the pace profile is merged at the run's end
(:meth:`RunPace.finish`) and a run that never gets there starts from the profile of before.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from .adaptive import AdaptiveController, batch_cap_at
from .application import ApplicationLatencySource, ApplicationPaceController, GuardedSource
from .intensity import SweepPacer
from .pace_profile import PaceProfiles


class RunPace:
    """The pace of one run of one pair (see the module doc).

    :param max_entries_per_second: the limit (0 = unlimited; with a latency target, the adaptive pace's bound).
    :param latency_target: ``sweep_latency_target`` (0 = a fixed rate).
    :param dry_run: a dry run is one unpaced iteration (it reports a whole batch).
    :param max_wait_seconds: the longest single wait (a third of the lock's lease).
    :param profiles: the store's pace profiles (loaded here, merged by :meth:`finish`).
    :param application: the application's latency source when setting ``sweep_pace_signal`` is
        ``application`` (None: the own-latency pace alone); called once, only for an adaptive run.
    :param clock: monotonic seconds; :param sleep: the pacer's default sleep (both for the unit tests).
    """

    def __init__(self, *, max_entries_per_second: int, latency_target: float, dry_run: bool,
                 max_wait_seconds: float, profiles: PaceProfiles,
                 application: Callable[[], ApplicationLatencySource] | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self._clock = clock
        self._profiles = profiles
        self.pacer = SweepPacer(max_entries_per_second, max_wait_seconds=max_wait_seconds, clock=clock, sleep=sleep)
        self.dry_run = dry_run
        now = clock()
        self.adaptive: AdaptiveController | None = None
        """The own-latency controller (None: a fixed rate, unlimited or a dry run)."""
        if latency_target and not dry_run:
            self.adaptive = AdaptiveController(latency_target, max_entries_per_second=max_entries_per_second,
                                               now=now, profile=profiles.load())
            self.pacer.set_rate(self.adaptive.rate)
        self._app: ApplicationPaceController | None = None
        self._source: GuardedSource | None = None
        if self.adaptive is not None and application is not None:
            self._source = GuardedSource(application())
            self._app = ApplicationPaceController(self.adaptive.latency_target, now=now, quiet=self._source.quiet(),
                                                  recent=self._source.recent(),
                                                  stored=profiles.load_application())
            self.pacer.set_rate(self._app.pace(self.adaptive.rate))
        self._charged = 0.0  # what this iteration's chunks paid the pacer
        self._fed = 0  # the entries of this iteration fed to the application pace

    @property
    def paced(self) -> bool:
        """Whether the run is paced: a batch's deletes spread over its time (:meth:`pay_chunk` between chunks),
        a wait after each iteration (:meth:`end_iteration`). Not an unlimited run nor a dry run."""
        return not (self.pacer.unlimited or self.dry_run)

    def start_iteration(self, limit: int, given: int | None) -> int | None:
        """An iteration begins (what its chunks paid and fed starts from 0); returns its batch limit: at the
        current pace for a paced run (``limit``, the run's batch limit, at most), else ``given`` (the caller's,
        None: the store's setting)."""
        self._charged, self._fed = 0.0, 0
        if self.adaptive is not None:
            if self._app is None:
                return self.adaptive.batch_cap(limit)
            return batch_cap_at(self._app.pace(self.adaptive.rate), limit)
        if self.paced:
            return self.pacer.batch_cap(limit)
        return given

    def current(self) -> float:
        """The effective pace now (reported as an iteration's when it ends): the application pace's last
        (which bounds the own one), else the own-latency pace's, else the pacer's rate."""
        if self._app is not None and self._app.last_pace is not None:
            return self._app.last_pace
        return self.adaptive.rate if self.adaptive is not None else self.pacer.max_entries_per_second

    def pay_chunk(self, entries: float, pause: Callable[[float], None]) -> None:
        """Between two chunks of a batch's deletes: pay the pacer the previous chunk's share of the batch
        (waiting with ``pause``), then feed the application pace what the chunks took so far."""
        self._charged += entries
        self.pacer.pace(entries, pause)
        if self._app is not None:
            due = int(self._charged) - self._fed
            self._fed += due
            self.pacer.set_rate(self._feed_application(due))

    def end_iteration(self, entries_read: int, pause: Callable[[float], None]) -> None:
        """After an iteration that is not the run's last (its progress persisted): the controllers decide the
        pace from now, and the pacer is paid what the chunks did not pay of the iteration's ``entries_read``."""
        if not self.paced:
            return
        if self.adaptive is not None:
            rate = self.adaptive.end_iteration(entries_read, self._clock())
            if self._app is not None:
                rate = self._feed_application(max(0, entries_read - self._fed))
            self.pacer.set_rate(rate)
        self.pacer.pace(max(0.0, entries_read - self._charged), pause)

    def _feed_application(self, entries: int) -> float:
        """The application's transactions since the last feed and the ``entries`` taken since then to its
        controller; the effective pace."""
        assert self._app is not None and self._source is not None and self.adaptive is not None
        seen = self._source.since_last_call()
        if seen is not None:  # unreadable: the ceiling holds
            self._app.feed(seen, entries, self._clock(), self._source.pressure())
        return self._app.pace(self.adaptive.rate)

    def finish(self, summary, max_entries_per_second: int) -> None:
        """The run's pace into its result (``summary``: a ShardSweepResult) and the pace profile merged."""
        summary.seconds_paced = round(self.pacer.seconds_paced, 6)
        if self.adaptive is not None:
            app, own = self._app, self.adaptive
            summary.pace_entries_per_second = round(own.rate if app is None else app.pace(own.rate), 1)
            summary.pace_reason = own.reason if app is None else app.reason_with(own.rate, own.reason)
            summary.pace_backoffs = own.backoffs + (0 if app is None else app.backoffs)
            self._profiles.merge(own.profile(), None if app is None else app.kept())
        elif not self.pacer.unlimited:
            summary.pace_entries_per_second = float(max_entries_per_second)
            summary.pace_reason = "fixed rate (sweep_latency_target 0)"


__all__ = ["RunPace"]
