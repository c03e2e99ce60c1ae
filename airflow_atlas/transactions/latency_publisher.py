"""LatencyPublisher: publishes this process's application latency (a
:class:`~airflow_atlas.transactions.latency_recorder.LatencyRecorder`) into the application-latency table
(:mod:`airflow_atlas.transactions.latency_table`) once per ``interval_seconds`` - also when nothing was
recorded, so that the sweep can tell a resting application (clients alive, no transactions) from one it cannot
see (sweep/pacing/application.py).

Off the commit path: a transaction only records into the recorder; one daemon thread per publisher drains it
and writes one store request per interval (every kind in one ``put_wallclock``). The thread starts with the
first recording (a manager that never ran a transaction - a sweeper's - publishes nothing) and runs until
:meth:`LatencyPublisher.close`, which stops it and publishes what is left (best-effort), called by
``TransactionManager.close`` (and so by ``AtlasStore.close``). The first recording after an interval in which
no transaction ended wakes the thread to publish at once when a transaction ends: a sweep running free while
the application rests hears of its first transaction without waiting for the interval to end.

A publication that fails never fails a transaction: its summary is dropped, :attr:`LatencyPublisher.failures`
counts it, and a warning is logged at most once per :data:`FAILURE_LOG_INTERVAL_SECONDS` (with the number of
failures since the last one). A store without the table (not initialised since the table was added: run
``atlas-sweep init``) or a role without its grant (``atlas-sweep grants``) is such a failure.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InvalidInputError
from ..kvs.api import KeyValueService
from .latency_recorder import LatencyRecorder
from .latency_table import TRANSACTION_KINDS, write_summaries

log = logging.getLogger(__name__)

FAILURE_LOG_INTERVAL_SECONDS = 60.0
"""At most one warning per this many seconds about failed publications (per publisher)."""


@dataclass(frozen=True)
class LatencyPublication:
    """How a transaction manager publishes its application latency (from the settings
    ``app_latency_interval_seconds`` and ``app_latency_ttl_seconds``; None in ``TransactionConfig``: off)."""

    interval_seconds: float
    ttl_seconds: int

    def __post_init__(self) -> None:
        if not self.interval_seconds > 0:
            raise InvalidInputError(f"interval_seconds must be positive, got {self.interval_seconds!r}")
        if isinstance(self.ttl_seconds, bool) or not isinstance(self.ttl_seconds, int) or self.ttl_seconds < 1:
            raise InvalidInputError(f"ttl_seconds must be a positive integer, got {self.ttl_seconds!r}")


class LatencyPublisher:
    def __init__(
        self,
        kvs: KeyValueService,
        holder: str,
        publication: LatencyPublication,
        *,
        clock: Callable[[], float] = time.time,
    ):
        self._kvs = kvs
        self._publication = publication
        self._clock = clock
        self.client = f"{holder}/{uuid.uuid4().hex[:8]}"
        """This publisher's id in the table (the manager's holder plus a random suffix)."""
        self.recorder = LatencyRecorder()
        self.published = 0
        """Publications written."""
        self.failures = 0
        """Publications that failed (their summaries were dropped)."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._resting = True  # the last interval ran no transaction: the next one's end wakes the thread
        self._thread: threading.Thread | None = None
        self._closed = False
        self._last_failure_log: float | None = None
        self._unlogged_failures = 0

    @property
    def running(self) -> bool:
        """Whether the publishing thread is alive (from the first recording to close)."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def record(self, kind: str, seconds: float) -> None:
        self.recorder.record(kind, seconds)
        if self._thread is None:
            self._start()
        if self._resting and kind in TRANSACTION_KINDS:  # a read inside a transaction is not its end
            self._resting = False
            self._wake.set()

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(target=self._run, name="atlas-latency-publisher", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._publication.interval_seconds)
            self._wake.clear()
            if not self._stop.is_set():
                self.publish()

    def publish(self) -> bool:
        """Drain the recorder and write its summaries now (an empty one when nothing was recorded: alive);
        returns whether anything had been recorded. Never raises."""
        histograms = self.recorder.drain()
        # after an interval without a transaction, the next transaction is published at once
        self._resting = not any(kind in histograms for kind in TRANSACTION_KINDS)
        try:
            write_summaries(self._kvs, self.client, self._clock(), histograms, self._publication.ttl_seconds)
            self.published += 1
        except Exception as exc:  # never fails a transaction: count, log now and then, drop the summary
            self._failed(exc)
        return bool(histograms)

    def _failed(self, exc: Exception) -> None:
        self.failures += 1
        self._unlogged_failures += 1
        now = time.monotonic()
        if self._last_failure_log is None or now - self._last_failure_log >= FAILURE_LOG_INTERVAL_SECONDS:
            log.warning(
                "could not publish the application latency (%d failure(s) since the last warning, %d in all; "
                "transactions are not affected; does the store need 'atlas-sweep init' or the grants of "
                "'atlas-sweep grants'?): %s", self._unlogged_failures, self.failures, exc,
            )
            self._last_failure_log = now
            self._unlogged_failures = 0

    def close(self) -> None:
        """Stop the thread and publish what is left (best-effort). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        self._stop.set()
        self._wake.set()
        if thread is None:
            return  # never recorded anything: nothing to publish, no client to announce
        thread.join(timeout=self._publication.interval_seconds + 30)
        self.publish()


__all__ = ["FAILURE_LOG_INTERVAL_SECONDS", "LatencyPublication", "LatencyPublisher"]
