"""The application's latency as the pace controller reads it: an
:class:`~airflow_atlas.sweep.pacing.application.ApplicationLatencySource` backed by the store's
``_app_latency`` table (:mod:`.latency_table`), which every client of the store publishes into about once a
publication interval (:mod:`.latency_publisher`).

:meth:`StoreApplicationLatency.since_last_call` reads the table at most once per interval (the sweeper asks
after every iteration, several times a second): the summaries whose period ended since the previous read,
up to :data:`READ_LAG_SECONDS` ago (a summary is stamped with its end just before its write lands, so the
newest moment is left for the next read), pooled over every client, transactions only (kinds ``commit`` and
``abort``: what the application waits for; its reads are inside them). In between it returns an empty
histogram, which the controller takes for "nothing new", not for an idle application (that takes
:data:`~airflow_atlas.sweep.pacing.application.IDLE_SECONDS` without a transaction).

:meth:`~StoreApplicationLatency.quiet` returns None: the windows without sweep are not tracked yet, so the
controller uses the baseline earlier runs learned (the pace profile) or learns one at its learning pace
(docs/INTENSITY.md). A read that fails raises; the sweeper logs it and keeps its ceiling.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from ..kvs.api import KeyValueService
from .histogram import LatencyHistogram
from .latency_table import read_application_latency

READ_LAG_SECONDS = 0.25
"""How far behind now a read stops (see the module doc)."""
TRANSACTION_KINDS = ("commit", "abort")


class StoreApplicationLatency:
    """One sweep run's view of the application's published latency (state: the end of its previous read)."""

    def __init__(self, kvs: KeyValueService, interval_seconds: float, *, clock: Callable[[], float] = time.time):
        self._kvs = kvs
        self._interval = interval_seconds
        self._clock = clock
        self._read_until = clock() - READ_LAG_SECONDS  # what ended before the run is not the run's to judge

    def since_last_call(self) -> LatencyHistogram:
        until = self._clock() - READ_LAG_SECONDS
        if until - self._read_until < self._interval:
            return LatencyHistogram()
        found = read_application_latency(self._kvs, self._read_until, until, kinds=TRANSACTION_KINDS)
        self._read_until = until
        return LatencyHistogram.pooled(found.values())

    def quiet(self) -> LatencyHistogram | None:
        return None
