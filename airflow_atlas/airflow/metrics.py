"""Sweep metrics through Airflow's own metrics (StatsD, DogStatsD or OpenTelemetry, as ``[metrics]`` says).

:func:`emit_shard_metrics` is called by the sweep operator after each (shard, strategy) pair it sweeps - in the
task as soon as the pair is done, before the next pair starts (a task stopped later, by a timeout or a
killed worker, has sent the finished pairs' metrics); a Spark job's pairs when the job's document is back -
so what Airflow's metrics backend already collects (and the dashboards built on it) gets, per pair:

=====================================  =======  =============================================================
name (after ``[metrics] statsd_prefix``)  type     meaning
=====================================  =======  =============================================================
``atlas.sweep.shard_runs``             counter  pairs swept, tag ``status`` (``caught_up``, ``blocked``,
                                                ``iteration_limit``, ``skipped_locked``, ``dry_run``,
                                                ``failed``; a failed run also has the tag ``error``, the
                                                error's class, e.g. ``StoreUnavailableError``)
``atlas.sweep.iterations``             counter  sweep iterations (batches)
``atlas.sweep.entries_swept``          counter  queue entries (writes) swept
``atlas.sweep.tombstones_written``     counter  cells tombstoned (old versions deleted)
``atlas.sweep.sentinels_written``      counter  deletion sentinels written (CONSERVATIVE)
``atlas.sweep.aborted_writes_deleted`` counter  writes of aborted transactions deleted
``atlas.sweep.transactions_aborted``   counter  dead writers' transactions aborted by sweep
``atlas.sweep.iteration_time``         timer    mean time of one iteration of this run (ms)
``atlas.sweep.duration``               timer    time sweeping the pair in this run (ms)
``atlas.sweep.lag``                    gauge    timestamps between progress and the run's sweep timestamp
                                                (0 when caught up)
``atlas.sweep.lag_seconds``            gauge    0 when nothing sweepable is left after the run (caught up);
                                                not sent otherwise (the sweeper cannot date the oldest entry:
                                                ``atlas-sweep status`` / the collector report it,
                                                :mod:`airflow_atlas.status.lag`)
``atlas.sweep.backlog``                gauge    queued writes not yet swept after the run (counted up to
                                                100,000)
=====================================  =======  =============================================================

The gauges are the engine result's ``lag``, ``lag_seconds`` and ``backlog`` (``ShardSweepResult``: the
sweeper fills them at the end of its run, in the task and on Spark executors alike), so sending them reads
no store. Every metric carries the tags ``shard`` and ``strategy``. Backends that keep tags (DogStatsD, OpenTelemetry,
StatsD with ``statsd_influxdb_enabled``) need nothing more. Plain StatsD drops tags, so there each metric
is also sent under a dotted name per pair, ``atlas.sweep.<strategy>.<shard>.<metric>`` (strategy in lower
case; ``shard_runs`` adds ``.<status>``), e.g. ``airflow.atlas.sweep.thorough.3.entries_swept``; the
tagged names then still carry the totals over all pairs for the counters and timers, and the gauges are
sent only per pair (a gauge shared by all pairs would just show whichever pair reported last).

Dry runs, failed runs and pairs skipped because another sweeper holds the lock count in ``shard_runs``
only (the reason of a failure is in the sweep history: ``atlas-sweep status`` and the dashboard show it). Nothing
here can fail a sweep: a metrics error is logged and dropped. Documented in docs/METRICS.md.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

PREFIX = "atlas.sweep"
COUNTERS = (
    # (metric, key of the engine's ShardSweepResult)
    ("iterations", "iterations"),
    ("entries_swept", "entries_read"),
    ("tombstones_written", "cells_tombstoned"),
    ("sentinels_written", "sentinels_written"),
    ("aborted_writes_deleted", "aborted_writes_deleted"),
    ("transactions_aborted", "transactions_aborted"),
)
NOT_SWEPT = ("skipped_locked", "dry_run", "failed")


def tags_dropped() -> bool:
    """True when the configured backend is plain StatsD, which sends no tags."""
    from airflow.sdk.configuration import conf

    if not conf.getboolean("metrics", "statsd_on", fallback=False):
        return False
    if conf.getboolean("metrics", "statsd_datadog_enabled", fallback=False):
        return False
    return not conf.getboolean("metrics", "statsd_influxdb_enabled", fallback=False)


GAUGE_TYPES: tuple[tuple[str, type[int] | type[float]], ...] = (("lag", int), ("lag_seconds", float), ("backlog", int))
"""The per-pair gauges and their types: the counts go out as integers (``backlog:0|g``, as before the
figures came from the result), the seconds as a float."""


def shard_measurements(result: Mapping[str, Any]) -> dict[str, float]:
    """lag, lag_seconds and backlog of the pair after a run, as the engine's ``ShardSweepResult`` carries
    them (the sweeper fills them from what it read; no store read here). A figure the result lacks (None)
    is not sent."""
    return {metric: kind(result[metric]) for metric, kind in GAUGE_TYPES
            if isinstance(result.get(metric), (int, float)) and not isinstance(result.get(metric), bool)}


def emit_shard_metrics(target: Mapping[str, Any], result: Mapping[str, Any] | None) -> None:
    """Send the metrics of one swept pair (see the module doc). Never raises."""
    try:
        _emit(target, result or {})
    except Exception as exc:  # metrics must never fail a sweep
        log.warning("could not emit sweep metrics for %s/%s: %s", target.get("strategy"), target.get("shard"), exc)


def _emit(target: Mapping[str, Any], result: Mapping[str, Any]) -> None:
    from airflow.sdk.observability import stats

    shard = int(result.get("shard", target.get("shard")))
    strategy = str(result.get("strategy", target.get("strategy"))).upper()
    status = str(result.get("status", "unknown"))
    tags = {"shard": str(shard), "strategy": strategy}
    dotted = f"{PREFIX}.{strategy.lower()}.{shard}" if tags_dropped() else None

    run_tags = {**tags, "status": status}
    if status == "failed":
        run_tags["error"] = str(result.get("error") or "unknown").split(":", 1)[0]
    stats.incr(f"{PREFIX}.shard_runs", tags=run_tags)
    if dotted:
        stats.incr(f"{dotted}.shard_runs.{status}")
    if status in NOT_SWEPT:
        return
    for metric, key in COUNTERS:
        count = int(result.get(key) or 0)
        stats.incr(f"{PREFIX}.{metric}", count=count, tags=tags)
        if dotted:
            stats.incr(f"{dotted}.{metric}", count=count)
    duration_ms = float(result.get("duration_seconds") or 0.0) * 1000.0
    iterations = int(result.get("iterations") or 0)
    timers = {"duration": duration_ms}
    if iterations:
        timers["iteration_time"] = duration_ms / iterations
    for metric, ms in timers.items():
        stats.timing(f"{PREFIX}.{metric}", ms, tags=tags)
        if dotted:
            stats.timing(f"{dotted}.{metric}", ms)
    for metric, value in shard_measurements(result).items():
        if dotted:
            stats.gauge(f"{dotted}.{metric}", value)
        else:
            stats.gauge(f"{PREFIX}.{metric}", value, tags=tags)
