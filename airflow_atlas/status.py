"""StoreStatus: what targeted sweep is doing, per shard and strategy, as one JSON-able dict.

Used by ``atlas-sweep status`` and by the Airflow sweep dashboard (both render :func:`compute_status`).
Everything is read from the store itself: shard progress, the sweep queue, the lock table, the
open-transaction registry, the punch table and the sweep history (:mod:`.sweep.history`). Nothing here
imports Airflow.

What it answers, per (shard, strategy):

* where sweep is: sweep timestamp, progress, lag (in timestamps and, estimated, in seconds), backlog
  (queued writes not yet swept; counting stops at ``backlog_cap``), the sweepable part of it (below the
  sweep timestamp) and the pinned part (at or above it), lock holder, last run and its outcome,
  tombstones written over recent runs, and a lag-over-time series;
* **why the sweep timestamp is not advancing** (per strategy): the oldest open read-write transaction or
  the read-only window holding it back - its start timestamp, age, holder - and how much queued work it
  pins (entries with start timestamp >= the sweep timestamp), per shard;
* **backlog drain forecast**: ingest rate (writes enqueued per second) vs sweep rate (writes swept per
  second) over recent runs, the time to drain the backlog, and a warning when ingest outpaces sweep or
  the sweeper has gone idle with sweepable work queued.

Timestamps are logical, so seconds are *estimates*: a :class:`TimestampClock` maps timestamps to wall time
from anchors "by wall time w the fresh timestamp had reached at least ts" - the punch table (sampled at a
few ages), each history record (its wall time and sweep timestamp) and a fresh timestamp drawn now - and
interpolates between them. Precision is about one punch interval.

Computing the status is not strictly read-only: like every sweep-timestamp computation it may punch the
punch table (one small write), and the registry deletes expired registrations it meets.

The JSON shape (``schema_version`` 1) is documented in :func:`compute_status`.
"""
from __future__ import annotations

import bisect
import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Sequence

from .errors import InvalidInputError
from .kvs.api import SweepStrategy
from .sweep.constants import MAX_SHARDS

SCHEMA_VERSION = 1
DEFAULT_WINDOW_SECONDS = 3600.0
DEFAULT_HISTORY_LIMIT = 100
DEFAULT_BACKLOG_CAP = 100_000
DEFAULT_TOLERANCE = 0.1
"""Ingest must exceed the sweep rate by more than this fraction before the forecast warns."""
IDLE_MIN_SECONDS = 300.0
"""The forecast calls a sweeper idle only after at least this long without a run (and 3 usual intervals)."""
RUN_GAP_SECONDS = 30.0
"""Consecutive history records further apart than this belong to different runs (for the usual interval)."""
SAME_RUN_SLACK_SECONDS = 5.0
"""Records with the same sweep timestamp at most this much further apart than the later one's duration are
iterations of one run."""
MIN_WINDOW_SECONDS = 1.0
"""Without runs to measure between, rates need at least this much history."""
SWEEPABLE_STRATEGIES = (SweepStrategy.CONSERVATIVE, SweepStrategy.THOROUGH)
_PUNCH_SAMPLE_AGES = (5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400, 259200, 604800)
_SUMS = ("entries_read", "cells_tombstoned", "sentinels_written", "aborted_writes_deleted", "transactions_aborted",
         "corrupt_entries")


# ----- timestamps <-> wall clock --------------------------------------------------------------------------
class TimestampClock:
    """Maps logical timestamps to wall-clock seconds and back, from anchors ``(wall, ts)`` that each mean
    "by wall time ``wall`` the fresh timestamp had reached at least ``ts``".

    Anchors are reduced to a strictly increasing staircase (an anchor whose ts is not above an earlier
    anchor's adds nothing). :meth:`ts_at` is the staircase (a lower bound); :meth:`wall_of` interpolates
    linearly between the two anchors around ``ts``.
    """

    def __init__(self, anchors: Iterable[tuple[float, int]]):
        points: list[tuple[float, int]] = []
        for wall, ts in sorted((float(w), int(t)) for w, t in anchors if w is not None and t is not None):
            if points and ts <= points[-1][1]:
                continue
            points.append((wall, ts))
        self.points = points
        self._walls = [p[0] for p in points]
        self._tss = [p[1] for p in points]

    @classmethod
    def from_store(cls, store, now: float, fresh_ts: int, records: Iterable[dict] = ()) -> "TimestampClock":
        """Anchors from the punch table (the newest punch and the punch at or before each of a few ages),
        from history records (``at``, ``sweep_ts``) and ``(now, fresh_ts)``."""
        anchors: list[tuple[float, int]] = [(now, fresh_ts)]
        punch = store.punch
        latest = punch.latest_punch()
        if latest is not None:
            anchors.append((latest[0] / 1000.0, latest[1]))
        younger = min(now, latest[0] / 1000.0) if latest is not None else None
        for age in _PUNCH_SAMPLE_AGES:
            wall = now - age
            if younger is None or wall >= younger:
                continue
            ts = punch.timestamp_at_or_before(int(wall * 1000))
            if ts is None:
                # The oldest punch lies between ``wall`` and ``younger``: find it (the store is younger
                # than this age, and its first punch anchors everything written since).
                anchors.append(_oldest_punch(punch, wall, younger))
                break
            anchors.append((wall, ts))
            younger = wall
        for r in records:
            if isinstance(r.get("at"), (int, float)) and isinstance(r.get("sweep_ts"), int):
                anchors.append((r["at"], r["sweep_ts"]))
        return cls(anchors)

    @property
    def oldest_wall(self) -> float | None:
        return self._walls[0] if self._walls else None

    def ts_at(self, wall: float) -> int | None:
        """The greatest timestamp known to have been reached by ``wall`` (None when no anchor is that old)."""
        i = bisect.bisect_right(self._walls, wall)
        return self._tss[i - 1] if i else None

    def wall_of(self, ts: int) -> float | None:
        """Estimated wall time at which ``ts`` was the fresh timestamp; None when ``ts`` is older than every
        anchor; the newest anchor's wall time when ``ts`` is at or above it."""
        if not self.points:
            return None
        i = bisect.bisect_left(self._tss, ts)
        if i >= len(self.points):
            return self._walls[-1]
        if self._tss[i] == ts:
            return self._walls[i]
        if i == 0:
            return None
        (w0, t0), (w1, t1) = self.points[i - 1], self.points[i]
        return w0 + (ts - t0) * (w1 - w0) / (t1 - t0)

    def timestamps_per_second(self, since: float | None = None) -> float | None:
        """Average timestamp rate between the oldest anchor at or after ``since`` (or the oldest) and the
        newest anchor."""
        points = [p for p in self.points if since is None or p[0] >= since] or self.points
        if len(points) < 2 or points[-1][0] <= points[0][0]:
            return None
        return (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0])


def _oldest_punch(punch, none_at: float, found_at: float) -> tuple[float, int]:
    """Bisect the wall time of the oldest punch, knowing there is none at or before ``none_at`` and one at
    or before ``found_at``; precision 2% of the span or 50 ms."""
    lo, hi = none_at, found_at
    ts = punch.timestamp_at_or_before(int(hi * 1000))
    precision = max(0.05, 0.02 * (hi - lo))
    while hi - lo > precision:
        mid = (lo + hi) / 2
        found = punch.timestamp_at_or_before(int(mid * 1000))
        if found is None:
            lo = mid
        else:
            hi, ts = mid, found
    return hi, ts


# ----- the drain forecast (pure: unit-testable with constructed numbers) ------------------------------
def drain_forecast(
    *,
    backlog: int,
    sweepable: int,
    ingest_entries: int,
    swept_entries: int,
    elapsed_seconds: float | None,
    busy_seconds: float = 0.0,
    runs: int = 0,
    iterations: int | None = None,
    idle_seconds: float | None = None,
    typical_interval_seconds: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    backlog_capped: bool = False,
    ingest_capped: bool = False,
    basis: str = "runs",
) -> dict:
    """Compare ingest with sweep over a window and forecast when the backlog drains.

    * ``backlog``: queued writes not yet swept (``sweepable``: the part below the sweep timestamp);
    * ``ingest_entries``: writes enqueued during the window; ``swept_entries``: writes swept during it;
      ``elapsed_seconds``: the window's length; ``busy_seconds``: time spent sweeping in it;
    * ``runs`` / ``iterations``: sweep runs / iterations counted in the window;
    * ``idle_seconds``: since the last run; ``typical_interval_seconds``: usual time between runs.

    Returns the ``forecast`` dict of a shard row (keys in :func:`compute_status`). ``state`` is
    ``drained`` (no backlog), ``draining`` (sweep outpaces ingest), ``steady`` (rates within the
    tolerance: the backlog neither grows nor drains materially), ``growing`` (ingest outpaces sweep),
    ``stalled`` (backlog, no sweeping and no ingest) or ``unknown`` (no usable window).
    """
    out = {
        "basis": basis,
        "window_seconds": _round(elapsed_seconds),
        "runs_in_window": runs,
        "iterations_in_window": runs if iterations is None else iterations,
        "ingest_entries": ingest_entries,
        "ingest_capped": ingest_capped,
        "swept_entries": swept_entries,
        "ingest_rate_per_second": None,
        "sweep_rate_per_second": None,
        "sweep_throughput_per_second": _round(swept_entries / busy_seconds) if busy_seconds > 0 else None,
        "net_drain_rate_per_second": None,
        "backlog_entries": backlog,
        "backlog_capped": backlog_capped,
        "time_to_drain_seconds": None,
        "state": "unknown",
        "ingest_outpaces_sweep": False,
        "idle_seconds": _round(idle_seconds),
        "warnings": [],
    }
    if backlog == 0:
        out["state"] = "drained"
        out["time_to_drain_seconds"] = 0.0
    if not elapsed_seconds or elapsed_seconds <= 0:
        return out
    ingest_rate = ingest_entries / elapsed_seconds
    sweep_rate = swept_entries / elapsed_seconds
    net = sweep_rate - ingest_rate
    out["ingest_rate_per_second"] = _round(ingest_rate)
    out["sweep_rate_per_second"] = _round(sweep_rate)
    out["net_drain_rate_per_second"] = _round(net)
    if backlog == 0:
        return out
    outpaces = ingest_rate > 0 and ingest_rate > sweep_rate * (1.0 + tolerance)
    out["ingest_outpaces_sweep"] = outpaces
    if net > 0:
        out["time_to_drain_seconds"] = _round(backlog / net)
    if outpaces:
        out["state"] = "growing"
        out["warnings"].append(
            {
                "kind": "ingest_outpaces_sweep",
                "message": f"ingest ({ingest_rate:.3g}/s) outpaces sweep ({sweep_rate:.3g}/s): "
                f"the backlog of {backlog}{'+' if backlog_capped else ''} entries is growing",
            }
        )
    elif sweep_rate == 0 and ingest_rate == 0:
        out["state"] = "stalled"
    elif net > ingest_rate * tolerance or (ingest_rate == 0 and net > 0):
        out["state"] = "draining"
    else:
        out["state"] = "steady"
    if sweepable > 0 and idle_seconds is not None:
        limit = max(IDLE_MIN_SECONDS, 3 * (typical_interval_seconds or 0.0))
        if idle_seconds > limit:
            out["warnings"].append(
                {
                    "kind": "sweeper_idle",
                    "message": f"no sweep run for {format_duration(idle_seconds)} while {sweepable}"
                    f"{'+' if backlog_capped else ''} entries are sweepable",
                }
            )
    elif sweepable > 0 and runs == 0 and basis == "window" and elapsed_seconds >= IDLE_MIN_SECONDS:
        out["warnings"].append(
            {
                "kind": "sweeper_idle",
                "message": f"no sweep run in the last {format_duration(elapsed_seconds)} while {sweepable}"
                f"{'+' if backlog_capped else ''} entries are sweepable",
            }
        )
    return out


# ----- entry point ---------------------------------------------------------------------------------------
def compute_status(
    store,
    shards: Sequence[int] | None = None,
    strategies: Sequence[SweepStrategy | str] | None = None,
    *,
    window_seconds: float = DEFAULT_WINDOW_SECONDS,
    history_limit: int = DEFAULT_HISTORY_LIMIT,
    backlog_cap: int = DEFAULT_BACKLOG_CAP,
    tolerance: float = DEFAULT_TOLERANCE,
    max_workers: int = 8,
    now: float | None = None,
) -> dict:
    """The status of targeted sweep on ``store`` (an :class:`~airflow_atlas.store.AtlasStore`).

    ``shards``: shard numbers (default all); ``strategies``: CONSERVATIVE and/or THOROUGH (default both);
    ``window_seconds``: how far back rates are measured; ``history_limit``: history records read per shard
    and strategy; ``backlog_cap``: counting stops there (``*_capped`` flags say "at least").

    Shape (all times are Unix seconds, durations seconds, ``ts`` logical timestamps)::

        {
          "schema_version": 1, "generated_at": float, "store": str (no secrets), "number_of_shards": int,
          "strategies": [str], "tables": {name: strategy},
          "settings": {"window_seconds", "history_limit", "backlog_cap", "tolerance",
                       "unreadable_window_seconds"},
          "timestamps": {"fresh_ts", "immutable_ts", "unreadable_ts", "timestamps_per_second"},
          "sweep_timestamps": {strategy: int},
          "why_not_advancing": {strategy: {
              "strategy", "sweep_ts", "fresh_ts", "immutable_ts", "unreadable_ts",
              "unreadable_window_seconds", "limited_by": "open_transaction" | "read_only_window" | "none",
              "sweep_ts_age_seconds": float | None, "behind_fresh_ts": int,
              "held_by": None | {"kind", "start_ts", "age_seconds", "holder", "expires_in_seconds"},
              "oldest_open_transaction": None | {"start_ts", "holder", "age_seconds", "expires_in_seconds"},
              "pinned_entries": int, "pinned_capped": bool,
              "pinned_by_shard": [{"shard", "entries", "capped"}], "message": str}},
          "shards": [{
              "shard", "strategy", "sweep_ts", "progress", "lag_ts", "lag_seconds": float | None,
              "lag_seconds_is_lower_bound": bool,
              "backlog_entries", "backlog_capped", "sweepable_entries", "sweepable_capped",
              "pinned_entries", "pinned_capped",
              "lock_holder": str | None, "lock_expires_in_seconds": float | None,
              "last_run": None | {"at", "age_seconds", "status", "outcome", "entries_read",
                                  "cells_tombstoned", "sentinels_written", "aborted_writes_deleted",
                                  "transactions_aborted", "corrupt_entries", "duration_seconds",
                                  "old_progress", "new_progress", "sweep_ts", "blocked_by", "lock_holder"},
              "tombstones_written": int,
              "recent": {"runs", "since", "entries_swept", "tombstones_written", "sentinels_written",
                         "aborted_writes_deleted", "transactions_aborted", "corrupt_entries"},
              "lag_series": [{"at", "sweep_ts", "progress", "lag_ts", "entries_read", "status"}],  # oldest first
              "forecast": {"basis": "runs" | "window", "window_seconds", "runs_in_window", "iterations_in_window",
                           "ingest_entries", "ingest_capped", "swept_entries",
                           "ingest_rate_per_second", "sweep_rate_per_second",
                           "sweep_throughput_per_second", "net_drain_rate_per_second",
                           "backlog_entries", "backlog_capped", "time_to_drain_seconds",
                           "state": "drained" | "draining" | "steady" | "growing" | "stalled" | "unknown",
                           "ingest_outpaces_sweep": bool, "idle_seconds", "warnings": [{"kind", "message"}]},
              "warnings": [{"kind", "message"}]}],
          "totals": {strategy: {"backlog_entries", "sweepable_entries", "pinned_entries",
                                "tombstones_written", "capped"}},
          "warnings": [{"shard", "strategy", "kind", "message"}],
          "quarantined_cells": int   # recent quarantine records (at most 100)
        }

    Rows are ordered by shard, then strategy. ``lag_ts = max(0, sweep_ts - 1 - progress)``; ``lag_seconds``
    is the estimated wall time between timestamp ``progress + 1`` and the sweep timestamp.
    ``last_run.outcome`` is ``ok`` (swept / caught up), ``blocked`` (a transaction committed at or after
    the sweep timestamp; see ``blocked_by``) or ``quarantined`` (corrupt queue cells were skipped).
    Failed iterations leave no history record (the Airflow task log has them).
    """
    if not isinstance(history_limit, int) or history_limit < 1:
        raise InvalidInputError(f"history_limit must be a positive integer, got {history_limit!r}")
    if not isinstance(backlog_cap, int) or backlog_cap < 1:
        raise InvalidInputError(f"backlog_cap must be a positive integer, got {backlog_cap!r}")
    if not isinstance(window_seconds, (int, float)) or not window_seconds > 0:
        raise InvalidInputError(f"window_seconds must be a positive number, got {window_seconds!r}")
    if not isinstance(tolerance, (int, float)) or tolerance < 0:
        raise InvalidInputError(f"tolerance must be a non-negative number, got {tolerance!r}")
    number_of_shards = store.number_of_shards()
    shard_list = _shards(shards, number_of_shards)
    strategy_list = _strategies(strategies)
    from .sweep.targeted import TargetedSweeper

    # 1. sweep timestamps and what limits them (one explain per strategy; each draws a fresh timestamp)
    explains = {s.value: store.sweep_timestamps.explain(s) for s in strategy_list}
    fresh_ts = max(e["fresh_ts"] for e in explains.values())
    now = time.time() if now is None else now
    pairs = [(shard, s) for shard in shard_list for s in strategy_list]
    reader = store.queue.reader

    # 2. per shard and strategy: progress, lock, queue counts, history
    def observe(pair):
        shard, strategy = pair
        sweep_ts = explains[strategy.value]["sweep_ts"]
        progress = store.queue.progress.get_progress(shard, strategy)
        lock = store.locks.describe(TargetedSweeper.lock_name(shard, strategy))
        sweepable = reader.count_entries(shard, strategy, progress, max(sweep_ts, 0), cap=backlog_cap) if progress < sweep_ts - 1 else 0
        pinned = reader.count_entries(shard, strategy, max(progress, sweep_ts - 1), None, cap=backlog_cap)
        records = store.history.recent(shard, strategy.value, limit=history_limit)
        return {
            "shard": shard,
            "strategy": strategy,
            "sweep_ts": sweep_ts,
            "progress": progress,
            "lock": lock,
            "sweepable": sweepable,
            "pinned": pinned,
            "records": sorted((r for r in records if isinstance(r.get("at"), (int, float))), key=lambda r: r["at"]),
        }

    observed = _map(observe, pairs, max_workers)
    clock = TimestampClock.from_store(store, now, fresh_ts, (r for o in observed for r in o["records"]))

    # 3. per shard and strategy: the row with its forecast (needs the clock)
    def build(o):
        return _row(store, o, clock, now, window_seconds, backlog_cap, tolerance)

    rows = _map(build, observed, max_workers)
    why = {s.value: _why(explains[s.value], rows, s, clock, now) for s in strategy_list}
    totals = {}
    for s in strategy_list:
        mine = [r for r in rows if r["strategy"] == s.value]
        totals[s.value] = {
            "backlog_entries": sum(r["backlog_entries"] for r in mine),
            "sweepable_entries": sum(r["sweepable_entries"] for r in mine),
            "pinned_entries": sum(r["pinned_entries"] for r in mine),
            "tombstones_written": sum(r["tombstones_written"] for r in mine),
            "capped": any(r["backlog_capped"] for r in mine),
        }
    warnings = [
        {"shard": r["shard"], "strategy": r["strategy"], **w} for r in rows for w in r["warnings"]
    ]
    try:
        quarantined = len(store.history.quarantined(limit=100))
    except Exception:  # an old store without the history table: the status is still useful
        quarantined = 0
    any_explain = next(iter(explains.values()))
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_at": _round(now),
        "store": store.describe(),
        "number_of_shards": number_of_shards,
        "strategies": [s.value for s in strategy_list],
        "tables": {name: strategy.value for name, strategy in sorted(store.user_tables().items())},
        "settings": {
            "window_seconds": window_seconds,
            "history_limit": history_limit,
            "backlog_cap": backlog_cap,
            "tolerance": tolerance,
            "unreadable_window_seconds": store.config.unreadable_window_seconds,
        },
        "timestamps": {
            "fresh_ts": fresh_ts,
            "immutable_ts": any_explain["immutable_ts"],
            "unreadable_ts": explains.get("CONSERVATIVE", {}).get("unreadable_ts"),
            "timestamps_per_second": _round(clock.timestamps_per_second(now - window_seconds)),
        },
        "sweep_timestamps": {k: e["sweep_ts"] for k, e in explains.items()},
        "why_not_advancing": why,
        "shards": rows,
        "totals": totals,
        "warnings": warnings,
        "quarantined_cells": quarantined,
    }


# ----- internals -------------------------------------------------------------------------------------------
def _shards(shards, number_of_shards: int) -> list[int]:
    if shards is None:
        return list(range(number_of_shards))
    out = []
    for shard in shards:
        if isinstance(shard, bool) or not isinstance(shard, int):
            raise InvalidInputError(f"shard must be an integer, got {shard!r}")
        if not 0 <= shard < min(number_of_shards, MAX_SHARDS):
            raise InvalidInputError(
                f"shard {shard} is out of range: this store has {number_of_shards} shard(s) (0..{number_of_shards - 1})"
            )
        if shard not in out:
            out.append(shard)
    return sorted(out)


def _strategies(strategies) -> list[SweepStrategy]:
    if strategies is None:
        return list(SWEEPABLE_STRATEGIES)
    out = []
    for s in strategies:
        parsed = SweepStrategy.parse(s)
        if parsed is SweepStrategy.NOTHING:
            raise InvalidInputError("strategy NOTHING is never swept: choose CONSERVATIVE or THOROUGH")
        if parsed not in out:
            out.append(parsed)
    if not out:
        raise InvalidInputError("no strategy given: choose CONSERVATIVE and/or THOROUGH")
    return sorted(out, key=SWEEPABLE_STRATEGIES.index)


def _map(fn, items, max_workers: int) -> list:
    items = list(items)
    if max_workers <= 1 or len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(max_workers, len(items)), thread_name_prefix="atlas-status") as pool:
        return list(pool.map(fn, items))


def _entries_between(store, o: dict, a: int, b: int, cap: int) -> tuple[int, bool]:
    """Writes of the shard and strategy with start timestamp in ``(a, b]``: counted in the queue above
    progress; estimated from history records (their ``(old_progress, new_progress]`` ranges and
    ``entries_read``, spread evenly) at or below progress, where the queue was already cleaned."""
    if b <= a:
        return 0, False
    progress = o["progress"]
    total, capped = 0, False
    lo = max(a, progress)
    if b > lo:
        total = store.queue.reader.count_entries(o["shard"], o["strategy"], lo, b + 1, cap=cap)
        capped = total >= cap
    if a < progress:
        top = min(b, progress)
        estimate = 0.0
        for r in o["records"]:
            old, new, n = r.get("old_progress"), r.get("new_progress"), r.get("entries_read") or 0
            if not (isinstance(old, int) and isinstance(new, int)) or new <= old or n <= 0:
                continue
            overlap = min(new, top) - max(old, a)
            if overlap > 0:
                estimate += n * overlap / (new - old)
        total += int(round(estimate))
    return total, capped


def _row(store, o: dict, clock: TimestampClock, now: float, window: float, cap: int, tolerance: float) -> dict:
    shard, strategy, sweep_ts, progress = o["shard"], o["strategy"], o["sweep_ts"], o["progress"]
    records = o["records"]
    sweepable, pinned = o["sweepable"], o["pinned"]
    lag_ts = max(0, sweep_ts - 1 - progress)
    lag_seconds, lower_bound = 0.0, False
    if lag_ts > 0:
        w_sweep = clock.wall_of(sweep_ts)
        w_prog = clock.wall_of(progress + 1)
        if w_prog is None:
            w_prog, lower_bound = clock.oldest_wall, True
        lag_seconds = None if w_sweep is None or w_prog is None else max(0.0, w_sweep - w_prog)
    lock = o["lock"]
    held = lock is not None and not lock.expired and lock.holder
    recent = {"runs": len(records), "since": _round(records[0]["at"]) if records else None}
    for name, key in (("entries_swept", "entries_read"), ("tombstones_written", "cells_tombstoned"),
                      ("sentinels_written", "sentinels_written"), ("aborted_writes_deleted", "aborted_writes_deleted"),
                      ("transactions_aborted", "transactions_aborted"), ("corrupt_entries", "corrupt_entries")):
        recent[name] = sum(int(r.get(key) or 0) for r in records)
    series = [
        {
            "at": _round(r["at"]),
            "sweep_ts": r.get("sweep_ts"),
            "progress": r.get("new_progress"),
            "lag_ts": max(0, r["sweep_ts"] - 1 - r["new_progress"])
            if isinstance(r.get("sweep_ts"), int) and isinstance(r.get("new_progress"), int)
            else None,
            "entries_read": r.get("entries_read", 0),
            "status": r.get("status"),
        }
        for r in records
    ]
    backlog = sweepable + pinned
    backlog_capped = sweepable >= cap or pinned >= cap
    forecast = _forecast(store, o, clock, now, window, cap, tolerance, backlog, backlog_capped)
    row = {
        "shard": shard,
        "strategy": strategy.value,
        "sweep_ts": sweep_ts,
        "progress": progress,
        "lag_ts": lag_ts,
        "lag_seconds": _round(lag_seconds),
        "lag_seconds_is_lower_bound": lower_bound,
        "backlog_entries": backlog,
        "backlog_capped": backlog_capped,
        "sweepable_entries": sweepable,
        "sweepable_capped": sweepable >= cap,
        "pinned_entries": pinned,
        "pinned_capped": pinned >= cap,
        "lock_holder": lock.holder if held else None,
        "lock_expires_in_seconds": _round(lock.expires_at - now) if held else None,
        "last_run": _last_run(records[-1], now) if records else None,
        "tombstones_written": recent["tombstones_written"],
        "recent": recent,
        "lag_series": series,
        "forecast": forecast,
        "warnings": list(forecast["warnings"]),
    }
    last = row["last_run"]
    if last is not None and last["outcome"] == "blocked" and last.get("blocked_by"):
        b = last["blocked_by"]
        row["warnings"].append(
            {
                "kind": "blocked_by_late_commit",
                "message": f"last run stopped at transaction {b.get('start_ts')} (committed at {b.get('commit_ts')}, "
                f"at or after the sweep timestamp {last.get('sweep_ts')}); it is swept once the sweep timestamp passes it",
            }
        )
    if last is not None and last["corrupt_entries"]:
        row["warnings"].append(
            {"kind": "corrupt_queue_cells", "message": f"last run quarantined {last['corrupt_entries']} corrupt queue cell(s)"}
        )
    return row


def _forecast(store, o, clock, now, window, cap, tolerance, backlog, backlog_capped) -> dict:
    records = o["records"]
    start = now - window
    in_window = [r for r in records if r["at"] >= start]
    # Usual time between runs: the gaps between records that separate runs (iterations of one run follow
    # each other within seconds), over every record read, so slow schedules are known too.
    gaps = sorted(b["at"] - a["at"] for a, b in zip(records, records[1:]) if b["at"] - a["at"] > RUN_GAP_SECONDS)
    typical = gaps[len(gaps) // 2] if gaps else None
    idle = now - records[-1]["at"] if records else None
    runs = _runs(in_window)
    if len(runs) >= 2 and runs[-1][-1]["at"] > runs[0][-1]["at"]:
        # From the end of the first run of the window to the end of the last: each later run swept what
        # arrived since the one before, so steady periodic sweeping compares equal, whatever the phase
        # of "now" between two runs.
        t0, t1 = runs[0][-1]["at"], runs[-1][-1]["at"]
        counted = [r for run in runs[1:] for r in run]
        counted_runs = len(runs) - 1
        basis = "runs"
        ts1 = clock.ts_at(t1)
    else:
        oldest = clock.oldest_wall
        t0 = max(start, oldest if oldest is not None else now)
        t1 = now
        if t1 - t0 < MIN_WINDOW_SECONDS:
            t0 = t1  # too little history for a rate (a store created a moment ago)
        counted = [r for r in in_window if r["at"] > t0]
        counted_runs = len(_runs(counted))
        basis = "window"
        ts1 = clock.ts_at(now)
    ts0 = clock.ts_at(t0)
    if ts0 is None or ts1 is None:
        ingest, ingest_capped = 0, False
    else:
        ingest, ingest_capped = _entries_between(store, o, ts0, ts1, cap)
    swept = sum(int(r.get("entries_read") or 0) for r in counted)
    busy = sum(float(r.get("duration_seconds") or 0.0) for r in counted)
    return drain_forecast(
        backlog=backlog,
        sweepable=o["sweepable"],
        ingest_entries=ingest,
        swept_entries=swept,
        elapsed_seconds=t1 - t0 if t1 > t0 else None,
        busy_seconds=busy,
        runs=counted_runs,
        iterations=len(counted),
        idle_seconds=idle,
        typical_interval_seconds=typical,
        tolerance=tolerance,
        backlog_capped=backlog_capped,
        ingest_capped=ingest_capped,
        basis=basis,
    )


def _runs(records: list[dict]) -> list[list[dict]]:
    """Group history records (oldest first) into runs: iterations of one run share their sweep timestamp
    (computed once per run) and follow each other without a pause (the gap between two records is about
    the later iteration's duration)."""
    runs: list[list[dict]] = []
    for r in records:
        if runs:
            prev = runs[-1][-1]
            gap = r["at"] - prev["at"]
            if r.get("sweep_ts") == prev.get("sweep_ts") and gap <= float(r.get("duration_seconds") or 0.0) + SAME_RUN_SLACK_SECONDS:
                runs[-1].append(r)
                continue
        runs.append([r])
    return runs


def _last_run(r: dict, now: float) -> dict:
    status = r.get("status")
    outcome = "blocked" if status == "blocked" else "ok"
    if r.get("corrupt_entries"):
        outcome = "quarantined"
    keys = ("status", "entries_read", "cells_tombstoned", "sentinels_written", "aborted_writes_deleted",
            "transactions_aborted", "corrupt_entries", "duration_seconds", "old_progress", "new_progress",
            "sweep_ts", "blocked_by", "lock_holder")
    out = {"at": _round(r["at"]), "age_seconds": _round(max(0.0, now - r["at"])), "outcome": outcome}
    for k in keys:
        out[k] = r.get(k, 0 if k in _SUMS else None)
    return out


def _why(explain: dict, rows: list[dict], strategy: SweepStrategy, clock: TimestampClock, now: float) -> dict:
    mine = [r for r in rows if r["strategy"] == strategy.value]
    pinned_by_shard = [{"shard": r["shard"], "entries": r["pinned_entries"], "capped": r["pinned_capped"]} for r in mine]
    pinned = sum(r["pinned_entries"] for r in mine)
    pinned_capped = any(r["pinned_capped"] for r in mine)
    sweep_ts, fresh = explain["sweep_ts"], explain["fresh_ts"]
    wall = clock.wall_of(sweep_ts)
    age = None if wall is None else max(0.0, now - wall)
    oldest = explain.get("oldest_open_transaction")
    limited_by = explain["limited_by"]
    held_by = None
    pins = f"{pinned}{'+' if pinned_capped else ''} queued entr{'y' if pinned == 1 else 'ies'}"
    shards_pinned = [p for p in pinned_by_shard if p["entries"]]
    where = f" in {len(shards_pinned)} shard(s)" if shards_pinned else ""
    if limited_by == "open_transaction" and oldest is not None:
        held_by = {
            "kind": "open_transaction",
            "start_ts": oldest["start_ts"],
            "age_seconds": _round(oldest["age_seconds"]),
            "holder": oldest["holder"],
            "expires_in_seconds": _round(oldest["expires_in_seconds"]),
        }
        message = (
            f"{strategy.value} sweep timestamp {sweep_ts} is held back by open transaction {oldest['start_ts']} "
            f"(holder {oldest['holder']}, open {format_duration(oldest['age_seconds'])}, lease expires in "
            f"{format_duration(max(0.0, oldest['expires_in_seconds']))}); it pins {pins}{where}"
        )
    elif limited_by == "read_only_window":
        window = explain.get("unreadable_window_seconds")
        held_by = {
            "kind": "read_only_window",
            "start_ts": explain.get("unreadable_ts"),
            "age_seconds": _round(age),
            "holder": None,
            "expires_in_seconds": None,
        }
        punched = "no punch is that old yet" if sweep_ts == 0 else f"punched {format_duration(age)} ago"
        message = (
            f"{strategy.value} sweep timestamp {sweep_ts} is the unreadable timestamp, the timestamp punched at "
            f"least the read-only window ({format_duration(window or 0)}) ago ({punched}): CONSERVATIVE sweep "
            f"stays that far behind to protect read-only transactions; it pins {pins}{where}"
        )
    else:
        message = f"{strategy.value} sweep timestamp {sweep_ts} is not held back (it is the fresh timestamp)"
    return {
        "strategy": strategy.value,
        "sweep_ts": sweep_ts,
        "fresh_ts": fresh,
        "immutable_ts": explain["immutable_ts"],
        "unreadable_ts": explain.get("unreadable_ts"),
        "unreadable_window_seconds": explain.get("unreadable_window_seconds"),
        "limited_by": limited_by,
        "sweep_ts_age_seconds": _round(age),
        "behind_fresh_ts": max(0, fresh - sweep_ts),
        "held_by": held_by,
        "oldest_open_transaction": None
        if oldest is None
        else {
            "start_ts": oldest["start_ts"],
            "holder": oldest["holder"],
            "age_seconds": _round(oldest["age_seconds"]),
            "expires_in_seconds": _round(oldest["expires_in_seconds"]),
        },
        "pinned_entries": pinned,
        "pinned_capped": pinned_capped,
        "pinned_by_shard": pinned_by_shard,
        "message": message,
    }


def _round(value, digits: int = 3):
    if value is None:
        return None
    value = float(value)
    if math.isnan(value) or math.isinf(value):
        return None
    return round(value, digits)


def format_duration(seconds: float | None) -> str:
    """``42s``, ``5m12s``, ``3h04m``, ``2d03h``; ``-`` for None."""
    if seconds is None:
        return "-"
    s = max(0.0, float(seconds))
    if s < 10:
        return f"{s:.1f}s"
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


__all__ = ["compute_status", "drain_forecast", "TimestampClock", "format_duration", "SCHEMA_VERSION"]
