"""THE definition of the sweep's lag and backlog, per (shard, strategy) pair and over the store.

* **lag** (``lag_seconds``): the age of the oldest *sweepable unswept* entry - the queued write with the
  smallest start timestamp above the pair's progress and below the strategy's sweep timestamp - i.e. how
  long the oldest write the sweep could clean by now has waited. 0 when nothing sweepable is queued. The
  age is now minus the wall time of that start timestamp on the :class:`~airflow_atlas.status.clock.TimestampClock`
  (punch table and history anchors; about one ``punch_interval_seconds`` precise, interpolated between);
  a lower bound (``lag_seconds_is_lower_bound``) when the start timestamp is older than every anchor.
* ``lag_ts``: logical timestamps between progress and the sweep timestamp (``sweep_ts - 1 - progress``).
* **backlog**: ``sweepable_entries`` - queued writes below the sweep timestamp, not yet swept (the work the
  sweep can do now); ``pinned_entries`` - queued writes at or above it (waiting for it to advance);
  ``backlog_entries`` is their sum (everything queued and unswept). Counting stops at ``cap``.

One place computes them: :func:`read_pair` (store reads) and :func:`pair_lag` (pure) serve the status
document (:mod:`.compute`: CLI ``status``, dashboard, Prometheus collector), :func:`measure_pair` the StatsD
gauges of the sweep operator, :func:`measure_store` the benchmark ``sustained``.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..kvs.tables import SWEEPABLE_STRATEGIES, SweepStrategy
from .clock import TimestampClock

if TYPE_CHECKING:
    from ..store import AtlasStore


@dataclass(frozen=True)
class PairQueue:
    """What the store holds for one pair (read by :func:`read_pair`)."""

    shard: int
    strategy: str
    sweep_ts: int
    progress: int
    oldest_unswept_ts: int | None
    sweepable_entries: int
    pinned_entries: int
    cap: int


@dataclass(frozen=True)
class PairLag:
    """Lag and backlog of one pair (see the module doc)."""

    shard: int
    strategy: str
    sweep_ts: int
    progress: int
    lag_ts: int
    oldest_unswept_ts: int | None
    lag_seconds: float | None
    lag_seconds_is_lower_bound: bool
    sweepable_entries: int
    pinned_entries: int
    cap: int

    @property
    def backlog_entries(self) -> int:
        return self.sweepable_entries + self.pinned_entries

    @property
    def sweepable_capped(self) -> bool:
        return self.sweepable_entries >= self.cap

    @property
    def pinned_capped(self) -> bool:
        return self.pinned_entries >= self.cap

    @property
    def backlog_capped(self) -> bool:
        return self.sweepable_capped or self.pinned_capped


@dataclass(frozen=True)
class OverallLag:
    """Lag and backlog over several pairs: the largest lag, the summed backlog."""

    lag_seconds: float | None
    lag_seconds_is_lower_bound: bool
    oldest_unswept_ts: int | None
    sweepable_entries: int
    pinned_entries: int
    backlog_entries: int
    capped: bool


def lag_ts(sweep_ts: int, progress: int) -> int:
    """Logical timestamps between progress and the sweep timestamp (0 when caught up)."""
    return max(0, sweep_ts - 1 - progress)


def entry_age(clock: TimestampClock, start_ts: int | None, now: float) -> tuple[float | None, bool]:
    """``(age in seconds, is a lower bound)`` of a write with start timestamp ``start_ts`` at ``now`` (0 for
    None: no write); None when the clock has no anchor at all."""
    if start_ts is None:
        return 0.0, False
    wall, lower_bound = clock.wall_of(start_ts), False
    if wall is None:
        wall, lower_bound = clock.oldest_wall, True
    if wall is None:
        return None, False
    return max(0.0, now - wall), lower_bound


def pair_lag(q: PairQueue, clock: TimestampClock, now: float) -> PairLag:
    """The pair's lag and backlog from what :func:`read_pair` read (pure)."""
    age, lower_bound = entry_age(clock, q.oldest_unswept_ts, now)
    return PairLag(
        shard=q.shard, strategy=q.strategy, sweep_ts=q.sweep_ts, progress=q.progress,
        lag_ts=lag_ts(q.sweep_ts, q.progress), oldest_unswept_ts=q.oldest_unswept_ts,
        lag_seconds=None if age is None else round(age, 3), lag_seconds_is_lower_bound=lower_bound,
        sweepable_entries=q.sweepable_entries, pinned_entries=q.pinned_entries, cap=q.cap,
    )


def overall(lags: Iterable[PairLag]) -> OverallLag:
    """The largest lag (None when a pair's is unknown) and the summed backlog of ``lags`` (pure)."""
    lags = list(lags)
    ages = [x.lag_seconds for x in lags]
    worst = None if any(a is None for a in ages) else max((a for a in ages if a is not None), default=0.0)
    oldest = [x.oldest_unswept_ts for x in lags if x.oldest_unswept_ts is not None]
    return OverallLag(
        lag_seconds=worst,
        lag_seconds_is_lower_bound=any(x.lag_seconds_is_lower_bound for x in lags),
        oldest_unswept_ts=min(oldest) if oldest else None,
        sweepable_entries=sum(x.sweepable_entries for x in lags),
        pinned_entries=sum(x.pinned_entries for x in lags),
        backlog_entries=sum(x.backlog_entries for x in lags),
        capped=any(x.backlog_capped for x in lags),
    )


def read_pair(store: AtlasStore, shard: int, strategy: SweepStrategy, sweep_ts: int, progress: int, cap: int,
              serial: bool = True) -> PairQueue:
    """Read the pair's queue: the oldest sweepable unswept start timestamp and the counts (capped);
    ``serial=False``: without Paxos (the status's fallback)."""
    reader = store.queue.reader
    sweepable = store.sweeper.sweepable_entries(shard, strategy, max(sweep_ts, 0), cap=cap, serial=serial)
    oldest = reader.oldest_start_ts(shard, strategy, progress, max(sweep_ts, 0)) if sweep_ts - 1 > progress else None
    pinned = reader.count_entries(shard, strategy, max(progress, sweep_ts - 1), None, cap=cap)
    return PairQueue(shard, strategy.value, sweep_ts, progress, oldest, sweepable, pinned, cap)


def measure_pair(store: AtlasStore, shard: int, strategy: SweepStrategy | str, sweep_ts: int, *, cap: int,
                 progress: int | None = None, now: float | None = None) -> PairLag:
    """Lag and backlog of one pair against ``sweep_ts`` (e.g. a run's), with a clock from the store."""
    strategy = SweepStrategy.parse_swept(strategy)
    if progress is None:
        progress = store.queue.progress.get_progress(shard, strategy)
    now = time.time() if now is None else now
    q = read_pair(store, shard, strategy, sweep_ts, progress, cap)
    fresh_ts = store.sweep_timestamps.explain(strategy)["fresh_ts"]
    return pair_lag(q, TimestampClock.from_store(store, now, fresh_ts), now)


def measure_store(
    store: AtlasStore, *, cap: int, shards: Sequence[int] | None = None, strategies: Sequence[SweepStrategy | str] | None = None,
    now: float | None = None,
) -> list[PairLag]:
    """Lag and backlog of every pair (default: all shards, both strategies) at the strategies' sweep
    timestamps now: what the benchmark ``sustained`` samples (:func:`overall` sums them up)."""
    strategy_list = [SweepStrategy.parse_swept(s) for s in (strategies or SWEEPABLE_STRATEGIES)]
    shard_list = list(range(store.number_of_shards())) if shards is None else list(shards)
    explains = {s: store.sweep_timestamps.explain(s) for s in strategy_list}
    now = time.time() if now is None else now
    clock = TimestampClock.from_store(store, now, max(e["fresh_ts"] for e in explains.values()))
    out = []
    for s in strategy_list:
        for shard in shard_list:
            progress = store.queue.progress.get_progress(shard, s)
            out.append(pair_lag(read_pair(store, shard, s, explains[s]["sweep_ts"], progress, cap), clock, now))
    return out
