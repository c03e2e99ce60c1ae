"""StoreStatus: what targeted sweep is doing, per shard and strategy - one document for ``atlas-sweep
status`` and the Airflow sweep dashboard. Nothing here imports Airflow.

What it answers, per (shard, strategy):

* where sweep is: sweep timestamp, progress, lag (in timestamps, and in seconds: the age of the oldest
  sweepable unswept entry - THE definition is :mod:`.lag`), backlog
  (queued writes not yet swept; counting stops at ``backlog_cap``), the sweepable part of it (below the
  sweep timestamp) and the pinned part (at or above it), lock holder with its lease expiry and whether its
  process is gone, the last run and its outcome (failed runs with their reason), tombstones written over
  recent runs, and a lag-over-time series;
* **why the sweep timestamp is not advancing** (per strategy): the oldest open read-write transaction or
  the read-only window holding it back, and how much queued work it pins, per shard;
* **backlog drain forecast**: ingest rate vs sweep rate over recent runs, the time to drain the backlog
  (or what the forecast does not know, e.g. no sweep run yet), and warnings (ingest outpaces sweep, idle
  sweeper, failing pair, dead lock holder);

and per user table the **compaction state**: tombstones since its last compaction (what ``atlas_compaction``
plans from), that compaction, the threshold and whether the table is due.

Modules, pure parts apart from the one that reads the store:

* :mod:`.document` - the document's dataclasses, serialised once (``to_json``; None stays None);
* :mod:`.clock` - :class:`TimestampClock`, logical timestamps <-> wall time (pure);
* :mod:`.forecast` - :func:`drain_forecast` and the grouping of history records into runs (pure);
* :mod:`.why` - the why-explainer (pure);
* :mod:`.text` - duration and number formatting (pure);
* :mod:`.lag` - THE definition of lag and backlog (per pair and overall), used by the document, the StatsD
  gauges of the sweep operator and the benchmark ``sustained``;
* :mod:`.compaction` - the per-table compaction state (the store's counts, the policy's rule);
* :mod:`.compute` - reads the store: :func:`build_status` (the dataclass) and :func:`compute_status`
  (its JSON);
* :mod:`.metrics` - :class:`~.metrics.StatusCollector`, the document as Prometheus gauges at each scrape
  (``atlas-sweep metrics``, the plugin's ``/atlas/metrics``); imported on its own, not from here.

Timestamps are logical, so seconds are *estimates* (precision about one punch interval).
"""
from .anchors import clock_anchors
from .clock import TimestampClock
from .compute import (
    DEFAULT_BACKLOG_CAP,
    DEFAULT_HISTORY_LIMIT,
    DEFAULT_WINDOW_SECONDS,
    build_status,
    compute_status,
)
from .document import SCHEMA_VERSION, StatusDocument
from .forecast import DEFAULT_TOLERANCE, drain_forecast
from .lag import OverallLag, PairLag, measure_pair, measure_store, overall
from .text import format_duration

__all__ = [
    "compute_status",
    "build_status",
    "clock_anchors",
    "drain_forecast",
    "TimestampClock",
    "StatusDocument",
    "format_duration",
    "SCHEMA_VERSION",
    "DEFAULT_WINDOW_SECONDS",
    "DEFAULT_HISTORY_LIMIT",
    "DEFAULT_BACKLOG_CAP",
    "DEFAULT_TOLERANCE",
    "PairLag",
    "OverallLag",
    "measure_pair",
    "measure_store",
    "overall",
]
