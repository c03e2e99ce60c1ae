"""The status document as Prometheus gauges: :class:`StatusCollector`, a ``prometheus_client`` collector that
reads the store's status (:func:`~airflow_atlas.status.compute.build_status`, the one computation of lag,
backlog, failing pairs and lock holders) at each scrape and yields one ``GaugeMetricFamily`` per figure.
Served by ``atlas-sweep metrics`` (:mod:`airflow_atlas.cli.metrics`) and by the dashboard app's
``/metrics`` route (:mod:`airflow_atlas.airflow.web.metrics`); the names are in docs/METRICS.md
("Prometheus gauges"). Nothing here imports Airflow.

A scrape stays cheap and bounded: the status is read with small caps (``backlog_cap`` queue entries counted
per pair, ``history_limit`` history records read per pair), at most one read runs at a time (a scrape that
arrives meanwhile waits for that read instead of starting another), a read younger than ``max_age_seconds``
is reused, and a scrape waits at most ``timeout_seconds``: after that it answers ``atlas_status_up 0``
(the read goes on in the background and serves the next scrape). A store error also gives
``atlas_status_up 0`` (and a warning in the log), never a failed scrape.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError
from ..validation import check_int
from .compute import DEFAULT_WINDOW_SECONDS, build_status
from .document import ShardRow, StatusDocument, TableCompactionState

if TYPE_CHECKING:  # prometheus_client is imported when metrics are collected, not by the CLI's other commands
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric

log = logging.getLogger(__name__)

SCRAPE_BACKLOG_CAP = 10_000
"""Queue entries counted per pair and scrape (``atlas_sweep_backlog_capped`` says "at least")."""
SCRAPE_HISTORY_LIMIT = 20
"""History records read per pair and scrape (the last run, failing runs and the rates need few)."""
SCRAPE_TIMEOUT_SECONDS = 10.0
"""How long a scrape waits for the status (Prometheus's default scrape timeout is 10 s)."""
SCRAPE_MAX_AGE_SECONDS = 1.0
"""A status read this recently is served again instead of read anew (several scrapers, one read)."""
PAIR_LABELS = ("shard", "strategy")


@dataclass(frozen=True)
class PairGauge:
    """A gauge with one sample per (shard, strategy) pair: ``value`` reads it from the pair's row of the
    status document (None: no sample for that pair)."""

    name: str
    help: str
    value: Callable[[ShardRow], float | None]


def _flag(value: bool | None) -> float | None:
    return None if value is None else float(bool(value))


def _held(r: ShardRow) -> bool:
    return r.lock_holder is not None


PAIR_GAUGES: tuple[PairGauge, ...] = (
    PairGauge("atlas_sweep_progress_ts", "Logical timestamp the pair is swept up to (sweep progress).",
              lambda r: r.progress),
    PairGauge("atlas_sweep_lag_ts", "Logical timestamps between the pair's progress and its sweep timestamp.",
              lambda r: r.lag_ts),
    PairGauge("atlas_sweep_lag_seconds",
              "Age of the pair's oldest sweepable unswept entry in seconds, 0 when none (estimated from the punch "
              "table; a lower bound when atlas_sweep_lag_seconds_is_lower_bound is 1).",
              lambda r: r.lag_seconds),
    PairGauge("atlas_sweep_lag_seconds_is_lower_bound",
              "1 when the punch table is younger than the oldest unswept entry, so atlas_sweep_lag_seconds is a "
              "lower bound.",
              lambda r: _flag(r.lag_seconds_is_lower_bound)),
    PairGauge("atlas_sweep_backlog_entries", "Queued writes of the pair not yet swept (sweepable + pinned).",
              lambda r: r.backlog_entries),
    PairGauge("atlas_sweep_backlog_capped",
              "1 when counting stopped at the cap: the backlog is at least atlas_sweep_backlog_entries.",
              lambda r: _flag(r.backlog_capped)),
    PairGauge("atlas_sweep_sweepable_entries", "Queued writes below the sweep timestamp (sweepable now).",
              lambda r: r.sweepable_entries),
    PairGauge("atlas_sweep_pinned_entries",
              "Queued writes at or above the sweep timestamp (pinned until it advances).",
              lambda r: r.pinned_entries),
    PairGauge("atlas_sweep_failing_runs",
              "Consecutive failed runs of the pair up to the newest run (0: the newest run did not fail).",
              lambda r: r.failing.runs if r.failing is not None else 0),
    PairGauge("atlas_sweep_lock_held", "1 while a sweeper holds the pair's lease.", lambda r: _flag(_held(r))),
    PairGauge("atlas_sweep_lock_expires_in_seconds", "Seconds until the holder's lease expires (held pairs only).",
              lambda r: r.lock_expires_in_seconds if _held(r) else None),
    PairGauge("atlas_sweep_lock_holder_process_gone",
              "1 when the lease holder's process is known to be gone (held pairs whose holder runs here).",
              lambda r: _flag(r.lock_holder_process_gone) if _held(r) else None),
    PairGauge("atlas_sweep_last_run_timestamp_seconds", "Unix time of the pair's newest run.",
              lambda r: r.last_run.at if r.last_run is not None else None),
    PairGauge("atlas_sweep_last_run_duration_seconds", "How long the pair's newest run took.",
              lambda r: r.last_run.duration_seconds if r.last_run is not None else None),
    PairGauge("atlas_sweep_last_run_entries", "Queue entries the pair's newest run swept.",
              lambda r: r.last_run.entries_read if r.last_run is not None else None),
    PairGauge("atlas_sweep_last_run_pace_entries_per_second",
              "The pace at the end of the pair's newest run (0: unthrottled while the application rested; unpaced: none).",
              lambda r: r.last_run.pace_entries_per_second if r.last_run is not None else None),
    PairGauge("atlas_sweep_rate_entries_per_second",
              "Sweep pace: queue entries swept per second over the rate window.",
              lambda r: r.forecast.sweep_rate_per_second),
    PairGauge("atlas_sweep_ingest_rate_entries_per_second", "Writes queued per second over the rate window.",
              lambda r: r.forecast.ingest_rate_per_second),
    PairGauge("atlas_sweep_time_to_drain_seconds",
              "Forecast time until the backlog is swept (no sample when it does not drain or is unknown).",
              lambda r: r.forecast.time_to_drain_seconds),
    PairGauge("atlas_sweep_ingest_outpaces_sweep", "1 when writes are queued faster than the pair is swept.",
              lambda r: _flag(r.forecast.ingest_outpaces_sweep)),
)
"""The per-pair gauges, labelled ``shard`` and ``strategy`` (one place: the collector and docs/METRICS.md)."""


@dataclass(frozen=True)
class TableGauge:
    """A gauge with one sample per user table (label ``table``), read from the document's ``compaction`` row."""

    name: str
    help: str
    value: Callable[[TableCompactionState], float | None]


TABLE_GAUGES: tuple[TableGauge, ...] = (
    TableGauge("atlas_compaction_pending_tombstones",
               "Tombstones written into the table since its last compaction: what atlas_compaction plans from "
               "(0 again after each compaction; at least this many when atlas_compaction_pending_capped is 1).",
               lambda t: t.tombstones_since_compaction),
    TableGauge("atlas_compaction_pending_capped",
               "1 when counting stopped at the read cap: the table has at least that many and is due.",
               lambda t: _flag(t.capped)),
    TableGauge("atlas_compaction_last_timestamp_seconds", "Unix time of the table's last compaction (none: never).",
               lambda t: t.last_compaction_at),
    TableGauge("atlas_compaction_due",
               "1 when the table's count reached the threshold (no sample when the threshold is not known).",
               lambda t: _flag(t.due)),
)
"""The per-table gauges, labelled ``table``."""

STRATEGY_GAUGES = (
    ("atlas_sweep_ts", "The strategy's sweep timestamp (logical)."),
    ("atlas_sweep_ts_age_seconds", "Estimated age of the sweep timestamp: how far sweep trails the present."),
    ("atlas_sweep_failing_pairs", "Pairs of the strategy whose newest run failed."),
    ("atlas_sweep_backlog_total_entries", "Queued writes not yet swept, summed over the strategy's pairs."),
    ("atlas_sweep_sweepable_total_entries", "Queued writes below the sweep timestamp, summed over the strategy's pairs."),
    ("atlas_sweep_lag_max_seconds", "The strategy's lag: age of its oldest sweepable unswept entry (0 when none)."),
)
"""The per-strategy gauges, labelled ``strategy``."""

STORE_GAUGES = (
    ("atlas_status_up", "1 when this scrape read the store's status, 0 when it failed or timed out."),
    ("atlas_status_read_seconds", "How long reading the status took (the read this scrape served)."),
    ("atlas_status_age_seconds", "Age of the status this scrape served (reads are shared between close scrapes)."),
    ("atlas_store_shards", "Number of shards of the store."),
    ("atlas_sweep_max_entries_per_second",
     "Configured sweep intensity: queue entries per second per pair at most (0: unlimited)."),
    ("atlas_sweep_quarantined_cells", "Corrupt queue cells quarantined recently (last 100 at most)."),
    ("atlas_status_backlog_cap_entries", "Queue entries counted per pair and scrape (counting stops there)."),
    ("atlas_compaction_threshold_tombstones",
     "Setting compaction_threshold_tombstones: tombstones since its last compaction that make a table due (when known)."),
)
"""The store-wide gauges (no label)."""

METRIC_NAMES: tuple[str, ...] = (
    tuple(g.name for g in PAIR_GAUGES) + ("atlas_sweep_lock_holder_info",)
    + tuple(g.name for g in TABLE_GAUGES) + tuple(n for n, _ in STRATEGY_GAUGES) + tuple(n for n, _ in STORE_GAUGES)
)
"""Every metric name the collector can yield (docs/METRICS.md lists them; a test checks both ways)."""


@dataclass(frozen=True)
class _Read:
    document: StatusDocument | None
    finished_at: float
    read_seconds: float
    error: str | None = None


class StatusCollector:
    """A ``prometheus_client`` collector of the status of the store ``open_store()`` returns (called at each
    read, so a caller may reopen its store; ``on_error(store)`` is told of a store whose read failed).
    ``shards``/``strategies`` as for :func:`build_status` (default all); ``compaction_threshold()`` is called
    after each ``open_store()`` (the setting as the caller knows it then; None: not known)."""

    def __init__(
        self,
        open_store: Callable[[], Any],
        *,
        shards: Sequence[int] | None = None,
        strategies: Sequence[str] | None = None,
        window_seconds: float = DEFAULT_WINDOW_SECONDS,
        history_limit: int = SCRAPE_HISTORY_LIMIT,
        backlog_cap: int = SCRAPE_BACKLOG_CAP,
        timeout_seconds: float = SCRAPE_TIMEOUT_SECONDS,
        max_age_seconds: float = SCRAPE_MAX_AGE_SECONDS,
        on_error: Callable[[Any], None] | None = None,
        clock: Callable[[], float] = time.time,
        compaction_threshold: Callable[[], int | None] = lambda: None,
    ) -> None:
        check_int(history_limit, "history_limit", 1)
        check_int(backlog_cap, "backlog_cap", 1)
        for name, value in (("window_seconds", window_seconds), ("timeout_seconds", timeout_seconds)):
            if not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise InvalidInputError(f"{name} must be a positive number of seconds, got {value!r}")
        if not isinstance(max_age_seconds, (int, float)) or not 0 <= max_age_seconds < float("inf"):
            raise InvalidInputError(f"max_age_seconds must be a non-negative number of seconds, got {max_age_seconds!r}")
        self._open_store = open_store
        self._shards, self._strategies = shards, strategies
        self.window_seconds = float(window_seconds)
        self.history_limit = history_limit
        self.backlog_cap = backlog_cap
        self.timeout_seconds = float(timeout_seconds)
        self.max_age_seconds = float(max_age_seconds)
        self._on_error = on_error
        self._clock = clock
        self._compaction_threshold = compaction_threshold
        self._lock = threading.Lock()
        self._pending: Future[_Read] | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="atlas-metrics")

    # ----- prometheus_client's collector protocol -----------------------------------------------------------
    def describe(self) -> Iterator[Metric]:
        """Nothing: registering the collector must not read the store."""
        return iter(())

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        read = self._read()
        now = self._clock()
        yield GaugeMetricFamily("atlas_status_up", _help("atlas_status_up"), value=0.0 if read.document is None else 1.0)
        yield GaugeMetricFamily("atlas_status_read_seconds", _help("atlas_status_read_seconds"), value=read.read_seconds)
        yield GaugeMetricFamily("atlas_status_backlog_cap_entries", _help("atlas_status_backlog_cap_entries"),
                                value=self.backlog_cap)
        if read.document is None:
            return
        yield GaugeMetricFamily("atlas_status_age_seconds", _help("atlas_status_age_seconds"),
                                value=max(0.0, now - read.finished_at))
        yield from document_metrics(read.document)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ----- one read at a time, bounded -----------------------------------------------------------------------
    def _read(self) -> _Read:
        with self._lock:
            pending = self._pending
            fresh = (pending is not None and pending.done() and pending.exception() is None
                     and self._clock() - pending.result().finished_at <= self.max_age_seconds)
            if not fresh and (pending is None or pending.done()):
                pending = self._pending = self._pool.submit(self._compute)
        assert pending is not None
        try:
            return pending.result(timeout=self.timeout_seconds)
        except FutureTimeout:
            log.warning("atlas metrics: the status took longer than %.1f s; this scrape reports atlas_status_up 0 "
                        "(the read goes on and serves a later scrape)", self.timeout_seconds)
            return _Read(None, self._clock(), self.timeout_seconds, f"timed out after {self.timeout_seconds} s")

    def _compute(self) -> _Read:
        started = time.monotonic()
        store = None
        try:
            store = self._open_store()
            document = build_status(store, self._shards, self._strategies, window_seconds=self.window_seconds,
                                    history_limit=self.history_limit, backlog_cap=self.backlog_cap,
                                    compaction_threshold=self._compaction_threshold())
        except Exception as exc:  # a scrape reports the failure as atlas_status_up 0, never raises
            log.warning("atlas metrics: reading the status failed: %s: %s", type(exc).__name__, exc)
            if store is not None and self._on_error is not None:
                self._on_error(store)
            return _Read(None, self._clock(), time.monotonic() - started, f"{type(exc).__name__}: {exc}")
        return _Read(document, self._clock(), time.monotonic() - started)


def document_metrics(doc: StatusDocument) -> Iterator[Metric]:
    """The gauges of one status document (pure: what each scrape yields after the ``atlas_status_*`` ones)."""
    from prometheus_client.core import GaugeMetricFamily

    for gauge in PAIR_GAUGES:
        family = GaugeMetricFamily(gauge.name, gauge.help, labels=PAIR_LABELS)
        for row in doc.shards:
            value = gauge.value(row)
            if value is not None:
                family.add_metric([str(row.shard), row.strategy], float(value))
        yield family
    holders = GaugeMetricFamily("atlas_sweep_lock_holder_info", "The holder of each held lease (value 1).",
                                labels=PAIR_LABELS + ("holder",))
    for row in doc.shards:
        if row.lock_holder is not None:
            holders.add_metric([str(row.shard), row.strategy, row.lock_holder], 1.0)
    yield holders

    for table_gauge in TABLE_GAUGES:
        family = GaugeMetricFamily(table_gauge.name, table_gauge.help, labels=("table",))
        for t in doc.compaction:
            value = table_gauge.value(t)
            if value is not None:
                family.add_metric([t.table], float(value))
        yield family

    per_strategy: dict[str, dict[str, float | None]] = {}
    for strategy in doc.strategies:
        why = doc.why_not_advancing.get(strategy)
        totals = doc.totals.get(strategy, {})
        per_strategy[strategy] = {
            "atlas_sweep_ts": doc.sweep_timestamps.get(strategy),
            "atlas_sweep_ts_age_seconds": why.sweep_ts_age_seconds if why is not None else None,
            "atlas_sweep_failing_pairs": totals.get("failing_pairs"),
            "atlas_sweep_backlog_total_entries": totals.get("backlog_entries"),
            "atlas_sweep_sweepable_total_entries": totals.get("sweepable_entries"),
            "atlas_sweep_lag_max_seconds": totals.get("lag_seconds"),
        }
    for name, help_text in STRATEGY_GAUGES:
        family = GaugeMetricFamily(name, help_text, labels=("strategy",))
        for strategy, values in per_strategy.items():
            value = values[name]
            if value is not None:
                family.add_metric([strategy], float(value))
        yield family

    store_values = {
        "atlas_store_shards": doc.number_of_shards,
        "atlas_sweep_max_entries_per_second": doc.settings.get("sweep_max_entries_per_second"),
        "atlas_sweep_quarantined_cells": doc.quarantined_cells,
        "atlas_compaction_threshold_tombstones": doc.settings.get("compaction_threshold_tombstones"),
    }
    for name, value in store_values.items():
        if value is not None:
            yield GaugeMetricFamily(name, _help(name), value=float(value))


def _help(name: str) -> str:
    return dict(STORE_GAUGES)[name]


def status_registry(collector: StatusCollector) -> CollectorRegistry:
    """A registry of its own holding only ``collector`` (no process or platform metrics of the default one)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
