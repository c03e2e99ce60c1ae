"""The application's publications as one sweep run reads them: the
:class:`~airflow_atlas.sweep.pacing.run_pace.ApplicationSource` backed by the store's ``_app_latency`` table
(:mod:`.latency_table`), into which every client that ran a transaction publishes once per publication
interval, also when it ran nothing (:mod:`.latency_publisher`).

:meth:`StoreApplicationLatency.poll` turns what was published into an
:class:`~airflow_atlas.sweep.pacing.application.Observation` for the application pace:

* the first poll reads the :data:`~airflow_atlas.sweep.pacing.application.ALIVE_INTERVALS` intervals before
  the run: a publication is heard at its own end stamp, so a run knows at once whether clients are alive and
  how long ago one ran a transaction;
* every later poll reads the publications that ended in the last :data:`REREAD_SECONDS` (and up to
  :data:`REREAD_SECONDS` ahead) and keeps those it has not seen (by client and end stamp): a publication is
  heard when it is first read (by client, end stamp and kind). So a summary whose write lands late, or a publisher whose clock is up to
  :data:`REREAD_SECONDS` off the sweeper's, is neither missed nor counted twice; a clock further off can make a
  client look gone (the safe pace) but never make a busy application look idle for longer than it takes
  its next publication (the store's clocks are synchronised anyway: Cassandra's last-write-wins needs it).

Transactions only (kinds ``commit`` and ``abort``); the nodes' pressure is read at most once per interval
(``KeyValueService.node_pressure``, [] on the embedded store). A read that fails raises; the run logs it and
hears nothing (run_pace.py).
"""
from __future__ import annotations

import time
from collections.abc import Callable

from ..kvs.api import KeyValueService
from ..kvs.pressure import NodePressure
from ..sweep.pacing.application import ALIVE_INTERVALS, Observation
from .histogram import LatencyHistogram
from .latency_table import read_publications

REREAD_SECONDS = 1.0
"""How far back (and ahead) of now each poll reads (see the module doc)."""


class StoreApplicationLatency:
    """One sweep run's view of the application's publications (state: the publications already heard)."""

    def __init__(self, kvs: KeyValueService, interval_seconds: float, *, clock: Callable[[], float] = time.time):
        self._kvs = kvs
        self._interval = interval_seconds
        self._clock = clock
        self._seen: dict[tuple[str, float, str], float] = {}  # (client, end, kind) -> end, of the last reads
        self._first = True
        self._pressure_read = float("-inf")

    def poll(self) -> Observation:
        now = self._clock()
        if self._first:
            since = max(0.0, now - ALIVE_INTERVALS * self._interval)
        else:
            since = max(0.0, now - REREAD_SECONDS)
        heard = busy = None
        pooled = LatencyHistogram()
        for publication in read_publications(self._kvs, since, now + REREAD_SECONDS):
            key = (publication.client, publication.end, publication.kind)
            if key in self._seen:
                continue
            at = min(publication.end, now) if self._first else now
            heard = at if heard is None else max(heard, at)
            if publication.histogram.count:
                busy = at if busy is None else max(busy, at)
                pooled.merge(publication.histogram)
            self._seen[key] = publication.end
        self._first = False
        self._forget(now)
        return Observation(heard_at=heard, busy_at=busy, transactions=pooled, pressure=self._pressure(now))

    def _forget(self, now: float) -> None:
        old = now - 3 * REREAD_SECONDS
        for key in [key for key, end in self._seen.items() if end < old]:
            del self._seen[key]

    def _pressure(self, now: float) -> list[NodePressure] | None:
        if now - self._pressure_read < self._interval:
            return None
        self._pressure_read = now
        return self._kvs.node_pressure()
