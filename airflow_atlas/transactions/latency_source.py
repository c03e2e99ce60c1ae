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

:meth:`~StoreApplicationLatency.quiet` reads, once at the start of a run, the application's transactions of
the :data:`QUIET_LOOKBACK_SECONDS` before it (at most the summaries' TTL) that no sweep claim overlaps
(:func:`~airflow_atlas.transactions.latency_table.read_quiet_latency`; the claims are written by every
targeted run, sweep/pacing/activity.py), nor the :data:`QUIET_AFTERMATH_SECONDS` after one: between scheduled
runs that is the time since the previous run ended, but its first half minute.
From 100 transactions on, they give the run's baseline (the median p99 of their stretches of 100:
:func:`~airflow_atlas.sweep.pacing.application.baseline_of`), and the pace profile keeps it (a moving minimum)
for runs that find too few. A read that fails raises; the sweeper logs it and keeps its ceiling.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from ..kvs.api import KeyValueService
from ..kvs.pressure import NodePressure
from ..sweep.pacing.application import IDLE_SECONDS
from .histogram import LatencyHistogram
from .latency_table import read_application_latency, read_quiet_latency

READ_LAG_SECONDS = 0.25
"""How far behind now a read stops (see the module doc)."""
QUIET_LOOKBACK_SECONDS = 900.0
"""How far before a run :meth:`StoreApplicationLatency.quiet` looks (capped by the TTL): three default schedule
intervals, 30 partition reads at most; the pace profile carries what older windows taught."""
QUIET_AFTERMATH_SECONDS = 30.0
"""How long after a sweep's claim ends the application is not yet quiet: what the sweep held up is still
draining and the node compacts what it deleted (a full foreground_impact run learned a 4.6 s baseline from the
seconds after an unthrottled sweep, 70x its no-sweep p99). Between runs 5 minutes apart it leaves 4 and a half."""
QUIET_PERIOD_INTERVALS = 2.0
"""A summary's latencies are taken to span this many publication intervals before its end (a client
publishes about once per interval), so a claim that overlaps that span excludes it."""
TRANSACTION_KINDS = ("commit", "abort")


class StoreApplicationLatency:
    """One sweep run's view of the application's published latency (state: the end of its previous read)."""

    def __init__(self, kvs: KeyValueService, interval_seconds: float, ttl_seconds: float = QUIET_LOOKBACK_SECONDS,
                 *, clock: Callable[[], float] = time.time):
        self._kvs = kvs
        self._interval = interval_seconds
        self._lookback = min(float(ttl_seconds), QUIET_LOOKBACK_SECONDS)
        self._clock = clock
        self._read_until = clock() - READ_LAG_SECONDS  # what ended before the run is not the run's to judge
        self._run_start = self._read_until  # ... but is quiet where no sweep claimed it
        self._pressure_read = float("-inf")

    def since_last_call(self) -> LatencyHistogram:
        until = self._clock() - READ_LAG_SECONDS
        if until - self._read_until < self._interval:
            return LatencyHistogram()
        found = read_application_latency(self._kvs, self._read_until, until, kinds=TRANSACTION_KINDS)
        self._read_until = until
        return LatencyHistogram.pooled(found.values())

    def pressure(self) -> list[NodePressure] | None:
        """The nodes' pressure (``KeyValueService.node_pressure``), read at most once per interval (None in
        between); [] on the embedded store. A failed read raises (the sweeper's guard stops asking)."""
        now = self._clock()
        if now - self._pressure_read < self._interval:
            return None
        self._pressure_read = now
        return self._kvs.node_pressure()

    def recent(self) -> LatencyHistogram:
        """The application's transactions of the summaries that ended in the
        :data:`~airflow_atlas.sweep.pacing.application.IDLE_SECONDS` before the run (at least two publication
        intervals: a busy client publishes once per interval), read once at its start: none, the application is
        idle and the run starts free."""
        until = self._run_start
        found = read_application_latency(self._kvs, until - max(IDLE_SECONDS, 2 * self._interval), until,
                                         kinds=TRANSACTION_KINDS)
        return LatencyHistogram.pooled(found.values())

    def quiet(self) -> list[LatencyHistogram]:
        """The application's transactions before this run where no sweep ran, a summary each in the order they
        ended (see the module doc)."""
        until = self._run_start
        return read_quiet_latency(self._kvs, max(0.0, until - self._lookback), until,
                                  QUIET_PERIOD_INTERVALS * self._interval, kinds=TRANSACTION_KINDS,
                                  aftermath_seconds=QUIET_AFTERMATH_SECONDS)
