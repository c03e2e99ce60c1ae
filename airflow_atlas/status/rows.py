"""One (shard, strategy) row of the status document, from what :mod:`.compute` read for the pair: recent
counters, the lag series, the last run and the runs failing in a row, the pair's warnings and its backlog
drain forecast (the rates it needs are measured here: ingest counted in the queue above progress and
estimated from history records below it, where the queue was already cleaned; the forecast itself is the
pure :func:`.forecast.drain_forecast`)."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from ..sweep.counts import SweepCounts
from ..sweep.results import holder_process_gone
from .clock import TimestampClock
from .document import Failing, Forecast, LastRun, ShardRow, Warning
from .forecast import drain_forecast, group_runs
from .lag import PairLag, PairQueue, lag_ts
from .text import format_duration, round_or_none

if TYPE_CHECKING:
    from ..kvs.tables import SweepStrategy
    from ..locks import LockState
    from ..store import AtlasStore

RUN_GAP_SECONDS = 30.0
"""Consecutive history records further apart than this belong to different runs (for the usual interval)."""
MIN_WINDOW_SECONDS = 1.0
"""Without runs to measure between, rates need at least this much history."""
_SUMS = tuple(k for k in SweepCounts.names() if k in LastRun.__dataclass_fields__)
"""The counts of a run that the status document's last run shows (the document keeps its fields)."""


@dataclass(frozen=True)
class PairObservation:
    """What :mod:`.compute` read for one (shard, strategy) pair: its sweep timestamp and progress, its lock,
    its queue's counts and its history records and run records (oldest first)."""

    shard: int
    strategy: SweepStrategy
    sweep_ts: int
    progress: int
    lock: LockState | None
    queue: PairQueue
    records: list[dict]
    runs: list[dict]


def _entries_between(store: AtlasStore, o: PairObservation, a: int, b: int, cap: int) -> tuple[int, bool]:
    """Writes of the shard and strategy with start timestamp in ``(a, b]``: counted in the queue above
    progress; estimated from history records (their ``(old_progress, new_progress]`` ranges and
    ``entries_read``, spread evenly) at or below progress, where the queue was already cleaned."""
    if b <= a:
        return 0, False
    progress = o.progress
    total, capped = 0, False
    lo = max(a, progress)
    if b > lo:
        total = store.queue.reader.count_entries(o.shard, o.strategy, lo, b + 1, cap=cap)
        capped = total >= cap
    if a < progress:
        top = min(b, progress)
        estimate = 0.0
        for r in o.records:
            old, new, n = r.get("old_progress"), r.get("new_progress"), r.get("entries_read") or 0
            if not (isinstance(old, int) and isinstance(new, int)) or new <= old or n <= 0:
                continue
            overlap = min(new, top) - max(old, a)
            if overlap > 0:
                estimate += n * overlap / (new - old)
        total += int(round(estimate))
    return total, capped


def pair_row(store: AtlasStore, o: PairObservation, lag: PairLag, clock: TimestampClock, now: float, window: float,
             cap: int, tolerance: float) -> ShardRow:
    shard, strategy, sweep_ts, progress = o.shard, o.strategy, o.sweep_ts, o.progress
    records, runs = o.records, o.runs
    lock = o.lock
    holder = lock.holder if lock is not None and not lock.expired else None  # a live lease's holder
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
        lock_holder=holder or None,
        lock_expires_in_seconds=round_or_none(lock.expires_at - now) if lock is not None and holder else None,
        lock_holder_process_gone=holder_process_gone(holder) if holder else None,
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


def _forecast(store: AtlasStore, o: PairObservation, clock: TimestampClock, now: float, window: float, cap: int,
              tolerance: float, backlog: int, backlog_capped: bool) -> Forecast:
    records = o.records
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
        sweepable=o.queue.sweepable_entries,
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
        ever_swept=bool(records or o.runs),
    )


def _outcome(status: object, corrupt: object) -> str:
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
