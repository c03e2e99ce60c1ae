"""Reading the store for the status document: progress, the queue, locks, the registry, the punch table and
the sweep history (:mod:`airflow_atlas.sweep.history`), then the pure parts (:mod:`.clock`,
:mod:`.forecast`, :mod:`.why`) turn it into a :class:`~airflow_atlas.status.document.StatusDocument`.

Computing the status is not strictly read-only: like every sweep-timestamp computation it may punch the
punch table (one small write), and the registry deletes expired registrations it meets.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from typing import Any

from ..errors import InvalidInputError
from ..kvs.api import SWEEPABLE_STRATEGIES, SweepStrategy
from ..kvs.consistency import ConsistencyPolicy
from ..sweep.queue.constants import MAX_SHARDS
from ..sweep.queue.reader import DEFAULT_COUNT_CAP as DEFAULT_BACKLOG_CAP
from ..sweep.results import SUMMED_FIELDS, holder_process_gone
from ..validation import check_int
from .clock import TimestampClock
from .compaction import read_compaction
from .document import Failing, LastRun, PairWarning, ShardRow, StatusDocument, TableGcGrace, TableWarning, Warning
from .forecast import DEFAULT_TOLERANCE, drain_forecast, group_runs
from .lag import lag_ts, overall, pair_lag, read_pair
from .replicas import datacenter_warnings
from .text import format_duration, round_or_none
from .why import explain_why

DEFAULT_WINDOW_SECONDS = 3600.0
DEFAULT_HISTORY_LIMIT = 100
RUN_RECORDS_READ = 20
"""Run records read per pair (the last run, and how many consecutive runs failed)."""
RUN_GAP_SECONDS = 30.0
"""Consecutive history records further apart than this belong to different runs (for the usual interval)."""
MIN_WINDOW_SECONDS = 1.0
"""Without runs to measure between, rates need at least this much history."""
_PUNCH_SAMPLE_AGES = (5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400, 259200, 604800)
_SUMS = tuple(k for k in SUMMED_FIELDS if k in LastRun.__dataclass_fields__)
"""The summed figures of a run that the status document's last run shows."""


def compute_status(store, shards: Sequence[int] | None = None, strategies=None, **options) -> dict:
    """The status document as JSON (:meth:`StatusDocument.to_json` of :func:`build_status`): what the CLI's
    ``status --json`` prints and the dashboard's ``/api/status`` returns. Options as for
    :func:`build_status`."""
    return build_status(store, shards, strategies, **options).to_json()


def build_status(
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
    compaction_threshold: int | None = None,
) -> StatusDocument:
    """The status of targeted sweep on ``store`` (an :class:`~airflow_atlas.store.AtlasStore`).

    ``shards``: shard numbers (default all); ``strategies``: CONSERVATIVE and/or THOROUGH (default both);
    ``window_seconds``: how far back rates are measured; ``history_limit``: history records read per shard
    and strategy; ``backlog_cap``: counting stops there (``*_capped`` flags say "at least");
    ``compaction_threshold``: setting ``compaction_threshold_tombstones`` when the caller knows it
    (:mod:`.compaction`). The fields are documented in docs/CLI.md ("Status document")."""
    check_int(history_limit, "history_limit", 1)
    check_int(backlog_cap, "backlog_cap", 1)
    if not isinstance(window_seconds, (int, float)) or not 0 < window_seconds < float("inf"):
        raise InvalidInputError(f"window_seconds must be a positive number, got {window_seconds!r}")
    if not isinstance(tolerance, (int, float)) or not 0 <= tolerance < float("inf"):
        raise InvalidInputError(f"tolerance must be a non-negative number, got {tolerance!r}")
    number_of_shards = store.number_of_shards()
    shard_list = _shards(shards, number_of_shards)
    strategy_list = _strategies(strategies)
    from ..sweep.targeted import TargetedSweeper

    # 1. sweep timestamps and what limits them (one explain per strategy; each draws a fresh timestamp)
    explains = {s.value: store.sweep_timestamps.explain(s) for s in strategy_list}
    fresh_ts = max(e["fresh_ts"] for e in explains.values())
    now = time.time() if now is None else now
    pairs = [(shard, s) for shard in shard_list for s in strategy_list]

    # 2. per shard and strategy: progress, lock, queue counts, history
    def observe(pair):
        shard, strategy = pair
        sweep_ts = explains[strategy.value]["sweep_ts"]
        progress = store.queue.progress.get_progress(shard, strategy)
        lock = store.locks.describe(TargetedSweeper.lock_name(shard, strategy))
        queue = read_pair(store, shard, strategy, sweep_ts, progress, backlog_cap)
        records = store.history.recent(shard, strategy.value, limit=history_limit)
        runs = store.history.runs(shard, strategy.value, limit=RUN_RECORDS_READ)
        return {
            "shard": shard,
            "strategy": strategy,
            "sweep_ts": sweep_ts,
            "progress": progress,
            "lock": lock,
            "queue": queue,
            "records": _by_time(records),
            "runs": _by_time(runs),
        }

    observed = _map(observe, pairs, max_workers)
    clock = TimestampClock(clock_anchors(store, now, fresh_ts, (r for o in observed for r in o["records"])))

    # 3. per shard and strategy: the row with its forecast (needs the clock)
    for o in observed:
        o["lag"] = pair_lag(o["queue"], clock, now)
    rows = _map(lambda o: _row(store, o, clock, now, window_seconds, backlog_cap, tolerance), observed, max_workers)
    why = {
        s.value: explain_why(explains[s.value], rows, s.value, clock.wall_of(explains[s.value]["sweep_ts"]), now)
        for s in strategy_list
    }
    totals = {}
    for s in strategy_list:
        mine = [r for r in rows if r.strategy == s.value]
        lag = overall(o["lag"] for o in observed if o["strategy"] == s)
        totals[s.value] = {
            "lag_seconds": round_or_none(lag.lag_seconds),
            "lag_seconds_is_lower_bound": lag.lag_seconds_is_lower_bound,
            "oldest_unswept_ts": lag.oldest_unswept_ts,
            "backlog_entries": lag.backlog_entries,
            "sweepable_entries": lag.sweepable_entries,
            "pinned_entries": lag.pinned_entries,
            "tombstones_written": sum(r.tombstones_written for r in mine),
            "failing_pairs": sum(1 for r in mine if r.failing is not None),
            "capped": lag.capped,
        }
    warnings = [PairWarning(r.shard, r.strategy, w.kind, w.message) for r in rows for w in r.warnings]
    try:
        quarantined = len(store.history.quarantined(limit=100))
    except Exception:  # an old store without the history table: the status is still useful
        quarantined = 0
    any_explain = next(iter(explains.values()))
    tables = {name: strategy.value for name, strategy in sorted(store.user_tables().items())}
    gc_grace, table_warnings = _gc_grace(store, tables)
    down = datacenter_warnings(store.kvs.down_datacenters(), getattr(store.kvs, "consistency", ConsistencyPolicy()))
    return StatusDocument(
        generated_at=round_or_none(now),
        store=store.describe(),
        number_of_shards=number_of_shards,
        strategies=[s.value for s in strategy_list],
        tables=tables,
        settings={
            "window_seconds": window_seconds,
            "history_limit": history_limit,
            "backlog_cap": backlog_cap,
            "tolerance": tolerance,
            "unreadable_window_seconds": store.config.unreadable_window_seconds,
            "sweep_max_entries_per_second": store.config.sweep_max_entries_per_second,
            "sweep_latency_target": store.config.sweep_latency_target,
            "compaction_threshold_tombstones": compaction_threshold,
        },
        timestamps={
            "fresh_ts": fresh_ts,
            "immutable_ts": any_explain["immutable_ts"],
            "unreadable_ts": explains.get("CONSERVATIVE", {}).get("unreadable_ts"),
            "timestamps_per_second": round_or_none(clock.timestamps_per_second(now - window_seconds)),
        },
        sweep_timestamps={k: e["sweep_ts"] for k, e in explains.items()},
        why_not_advancing=why,
        shards=rows,
        totals=totals,
        warnings=warnings,
        quarantined_cells=quarantined,
        gc_grace=gc_grace,
        table_warnings=table_warnings,
        compaction=read_compaction(store, tables, compaction_threshold, now),
        datacenter_warnings=down,
    )


def _gc_grace(store, tables: dict[str, str]) -> tuple[list[TableGcGrace], list[TableWarning]]:
    """Each swept table's live ``gc_grace_seconds`` against ``repair_interval_seconds`` (the key-value
    service's effective guard: the URL or connection may override the engine setting), with a warning
    for each table below it: a sweep tombstone may be purged before repair copies it to a replica that
    missed it, and the deleted data comes back."""
    guard = getattr(store.kvs, "gc_grace_guard", None)
    repair = guard.repair_interval_seconds if guard is not None else store.config.repair_interval_seconds
    allowed = (guard.allow_gc_grace_below_repair_interval if guard is not None
               else store.config.allow_gc_grace_below_repair_interval)
    rows, warnings = [], []
    for name, strategy in tables.items():
        if not SweepStrategy.parse(strategy).is_swept:
            continue
        grace = store.kvs.gc_grace_seconds(name)
        below = grace is not None and grace < repair
        rows.append(TableGcGrace(name, strategy, grace, repair, below, allowed))
        if below:
            warnings.append(TableWarning(
                name,
                "gc_grace_below_repair_interval",
                f"table {name} ({strategy}) has gc_grace_seconds={grace}, below repair_interval_seconds={repair}"
                f"{' (allowed by allow_gc_grace_below_repair_interval)' if allowed else ''}: a sweep tombstone may "
                "be purged by compaction before repair copies it to a replica that missed it, and the deleted data "
                "comes back. Raise the table's gc_grace_seconds to at least the repair interval (or, if repair "
                "really runs more often, lower repair_interval_seconds)",
            ))
    return rows, warnings


# ----- the clock's anchors --------------------------------------------------------------------------------
def clock_anchors(store, now: float, fresh_ts: int, records: Iterable[dict] = ()) -> list[tuple[float, int]]:
    """Anchors "by wall time w the fresh timestamp had reached ts" for a :class:`TimestampClock`: the punch
    table (the newest punch and the punch at or before each of a few ages), history records (``at``,
    ``sweep_ts``) and ``(now, fresh_ts)``."""
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
            # The oldest punch lies between ``wall`` and ``younger``: find it (the store is younger than
            # this age, and its first punch anchors everything written since).
            anchors.append(_oldest_punch(punch, wall, younger))
            break
        anchors.append((wall, ts))
        younger = wall
    for r in records:
        if isinstance(r.get("at"), (int, float)) and isinstance(r.get("sweep_ts"), int):
            anchors.append((r["at"], r["sweep_ts"]))
    return anchors


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


# ----- internals -------------------------------------------------------------------------------------------
def _by_time(records: list[dict]) -> list[dict]:
    """Records with a wall time, oldest first."""
    return sorted((r for r in records if isinstance(r.get("at"), (int, float))), key=lambda r: r["at"])


def _shards(shards, number_of_shards: int) -> list[int]:
    if shards is None:
        return list(range(number_of_shards))
    out = []
    for shard in shards:
        check_int(shard, "shard")
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
        parsed = SweepStrategy.parse_swept(s)
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


def _row(store, o: dict, clock: TimestampClock, now: float, window: float, cap: int, tolerance: float) -> ShardRow:
    shard, strategy, sweep_ts, progress = o["shard"], o["strategy"], o["sweep_ts"], o["progress"]
    records, runs = o["records"], o["runs"]
    lag = o["lag"]
    lock = o["lock"]
    held = bool(lock is not None and not lock.expired and lock.holder)
    recent: dict[str, Any] = {"runs": len(records), "since": round_or_none(records[0]["at"]) if records else None}
    for name, key in (("entries_swept", "entries_read"), ("tombstones_written", "cells_tombstoned"),
                      ("sentinels_written", "sentinels_written"), ("aborted_writes_deleted", "aborted_writes_deleted"),
                      ("transactions_aborted", "transactions_aborted"), ("corrupt_entries", "corrupt_entries")):
        recent[name] = sum(int(r.get(key) or 0) for r in records)
    series = [
        {
            "at": round_or_none(r["at"]),
            "sweep_ts": r.get("sweep_ts"),
            "progress": r.get("new_progress"),
            "lag_ts": lag_ts(r["sweep_ts"], r["new_progress"])
            if isinstance(r.get("sweep_ts"), int) and isinstance(r.get("new_progress"), int)
            else None,
            "entries_read": r.get("entries_read", 0),
            "status": r.get("status"),
        }
        for r in records
    ]
    forecast = _forecast(store, o, clock, now, window, cap, tolerance, lag.backlog_entries, lag.backlog_capped)
    newest = runs[-1] if runs else (records[-1] if records else None)
    last = _last_run(newest, now) if newest is not None else None
    failing = _failing(runs)
    row = ShardRow(
        shard=shard,
        strategy=strategy.value,
        sweep_ts=sweep_ts,
        progress=progress,
        lag_ts=lag.lag_ts,
        lag_seconds=round_or_none(lag.lag_seconds),
        lag_seconds_is_lower_bound=lag.lag_seconds_is_lower_bound,
        oldest_unswept_ts=lag.oldest_unswept_ts,
        backlog_entries=lag.backlog_entries,
        backlog_capped=lag.backlog_capped,
        sweepable_entries=lag.sweepable_entries,
        sweepable_capped=lag.sweepable_capped,
        pinned_entries=lag.pinned_entries,
        pinned_capped=lag.pinned_capped,
        lock_holder=lock.holder if held else None,
        lock_expires_in_seconds=round_or_none(lock.expires_at - now) if held else None,
        lock_holder_process_gone=holder_process_gone(lock.holder) if held else None,
        last_run=last,
        failing=failing,
        tombstones_written=recent["tombstones_written"],
        recent=recent,
        lag_series=series,
        forecast=forecast,
    )
    if failing is not None:
        row.warnings.append(Warning(
            "sweep_failing",
            f"the last {failing.runs} run(s) failed (the first {format_duration(now - failing.since)} ago): "
            f"{failing.error}" if failing.since is not None else f"the last run failed: {failing.error}",
        ))
    if row.lock_holder_process_gone:
        row.warnings.append(Warning(
            "lock_holder_gone",
            f"locked by {row.lock_holder}, whose process is gone: the pair is swept again once the lease "
            f"expires (in {format_duration(max(0.0, row.lock_expires_in_seconds or 0.0))})",
        ))
    row.warnings.extend(forecast.warnings)
    if last is not None and last.outcome == "blocked" and last.blocked_by:
        b = last.blocked_by
        row.warnings.append(Warning(
            "blocked_by_late_commit",
            f"last run stopped at transaction {b.get('start_ts')} (committed at {b.get('commit_ts')}, "
            f"at or after the sweep timestamp {last.sweep_ts}); it is swept once the sweep timestamp passes it",
        ))
    if last is not None and last.corrupt_entries:
        row.warnings.append(
            Warning("corrupt_queue_cells", f"last run quarantined {last.corrupt_entries} corrupt queue cell(s)")
        )
    return row


def _forecast(store, o, clock, now, window, cap, tolerance, backlog, backlog_capped):
    records = o["records"]
    start = now - window
    in_window = [r for r in records if r["at"] >= start]
    # Usual time between runs: the gaps between records that separate runs (iterations of one run follow
    # each other within seconds), over every record read, so slow schedules are known too.
    gaps = sorted(b["at"] - a["at"] for a, b in pairwise(records) if b["at"] - a["at"] > RUN_GAP_SECONDS)
    typical = gaps[len(gaps) // 2] if gaps else None
    idle = now - records[-1]["at"] if records else None
    runs = group_runs(in_window)
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
        counted_runs = len(group_runs(counted))
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
        sweepable=o["queue"].sweepable_entries,
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
        ever_swept=bool(records or o["runs"]),
    )


def _outcome(status, corrupt) -> str:
    if status == "failed":
        return "failed"
    if status == "skipped_locked":
        return "skipped"
    if corrupt:
        return "quarantined"
    return "blocked" if status == "blocked" else "ok"


def _last_run(r: dict, now: float) -> LastRun:
    out = LastRun(
        at=round_or_none(r["at"]),
        age_seconds=round_or_none(max(0.0, now - r["at"])),
        status=r.get("status"),
        outcome=_outcome(r.get("status"), r.get("corrupt_entries")),
    )
    for k in _SUMS:
        setattr(out, k, int(r.get(k) or 0))
    for k in ("duration_seconds", "old_progress", "new_progress", "sweep_ts", "blocked_by", "lock_holder",
              "iterations", "error", "lock_expires_at", "lock_holder_process_gone", "pace_entries_per_second",
              "pace_reason"):
        setattr(out, k, r.get(k))
    return out


def _failing(runs: list[dict]) -> Failing | None:
    """Consecutive failed runs up to the newest (runs oldest first), or None when the newest did not fail."""
    failed = []
    for r in reversed(runs):
        if r.get("status") != "failed":
            break
        failed.append(r)
    if not failed:
        return None
    return Failing(runs=len(failed), since=round_or_none(failed[-1]["at"]), error=failed[0].get("error"))
