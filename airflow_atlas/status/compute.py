"""Reading the store for the status document: progress, the queue, locks, the registry, the punch table and
the sweep history (:mod:`airflow_atlas.sweep.history`), then the pure parts (:mod:`.clock`,
:mod:`.forecast`, :mod:`.why`) turn it into a :class:`~airflow_atlas.status.document.StatusDocument`.

Computing the status is not strictly read-only: like every sweep-timestamp computation it may punch the
punch table (one small write), and the registry deletes expired registrations it meets.

Its linearizable reads (fresh timestamp, progress, shard count, locks) go through Paxos. When one fails
(:class:`~airflow_atlas.errors.StoreUnavailableError`, e.g. "CAS operation result is unknown" on a loaded
cluster), the status is read again with plain reads and no Paxos at all (no timestamp drawn, no punch) and
says so in ``reads`` (:class:`~airflow_atlas.status.document.StatusReads`): a report must answer when Paxos
does not, and its figures may then lag an operation in flight by a moment.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import InvalidInputError, StoreUnavailableError
from ..kvs.consistency import ConsistencyPolicy
from ..kvs.tables import SWEEPABLE_STRATEGIES, SweepStrategy
from ..serialisation import to_json
from ..sweep.queue.constants import MAX_SHARDS
from ..sweep.queue.reader import DEFAULT_COUNT_CAP as DEFAULT_BACKLOG_CAP
from ..validation import check_int
from .anchors import clock_anchors
from .clock import TimestampClock
from .compaction import read_compaction
from .document import PairWarning, StatusDocument, TableGcGrace, TableWarning
from .forecast import DEFAULT_TOLERANCE
from .lag import overall, pair_lag, read_pair
from .replicas import datacenter_warnings
from .rows import PairObservation, pair_row
from .text import round_or_none
from .why import explain_why

if TYPE_CHECKING:
    from ..store import AtlasStore

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_WINDOW_SECONDS = 3600.0
DEFAULT_HISTORY_LIMIT = 100
RUN_RECORDS_READ = 20
"""Run records read per pair (the last run, and how many consecutive runs failed)."""


def compute_status(
    store: AtlasStore,
    shards: Sequence[int] | None = None,
    strategies: Sequence[SweepStrategy | str] | None = None,
    **options: Any,  # build_status's keyword arguments
) -> dict:
    """The status document as JSON (:func:`~airflow_atlas.serialisation.to_json` of :func:`build_status`): what the CLI's
    ``status --json`` prints and the dashboard's ``/api/status`` returns. Options as for
    :func:`build_status`."""
    return to_json(build_status(store, shards, strategies, **options))


def build_status(
    store: AtlasStore,
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
    (:mod:`.compaction`). The fields are documented in docs/CLI.md ("Status document"). When a read through
    Paxos fails, the status is read again without Paxos, and ``reads`` says so (module doc)."""
    check_int(history_limit, "history_limit", 1)
    check_int(backlog_cap, "backlog_cap", 1)
    if not isinstance(window_seconds, (int, float)) or not 0 < window_seconds < float("inf"):
        raise InvalidInputError(f"window_seconds must be a positive number, got {window_seconds!r}")
    if not isinstance(tolerance, (int, float)) or not 0 <= tolerance < float("inf"):
        raise InvalidInputError(f"tolerance must be a non-negative number, got {tolerance!r}")
    def read(serial: bool) -> StatusDocument:
        return _read_status(store, shards, strategies, serial=serial, window_seconds=window_seconds, now=now,
                            history_limit=history_limit, backlog_cap=backlog_cap, tolerance=tolerance,
                            max_workers=max_workers, compaction_threshold=compaction_threshold)

    try:
        return read(True)
    except StoreUnavailableError as exc:
        log.warning("status: a read through Paxos failed (%s); reading again without Paxos", exc)
        document = read(False)
        document.reads_fell_back(str(exc))
        return document


def _read_status(store: AtlasStore, shards: Sequence[int] | None, strategies: Sequence[SweepStrategy | str] | None,
                 *, serial: bool, window_seconds: float, history_limit: int,
                 backlog_cap: int, tolerance: float, max_workers: int, now: float | None,
                 compaction_threshold: int | None) -> StatusDocument:
    number_of_shards = store.queue.progress.get_number_of_shards(serial=serial)
    shard_list = _shards(shards, number_of_shards)
    strategy_list = _strategies(strategies)
    from ..sweep.targeted import TargetedSweeper

    # 1. sweep timestamps and what limits them (one explain per strategy; each draws a fresh timestamp)
    explains = {s.value: store.sweep_timestamps.explain(s, read_only=not serial) for s in strategy_list}
    fresh_ts = max(e["fresh_ts"] for e in explains.values())
    now = time.time() if now is None else now
    pairs = [(shard, s) for shard in shard_list for s in strategy_list]

    # 2. per shard and strategy: progress, lock, queue counts, history
    def observe(pair: tuple[int, SweepStrategy]) -> PairObservation:
        shard, strategy = pair
        sweep_ts = explains[strategy.value]["sweep_ts"]
        progress = store.queue.progress.get_progress(shard, strategy, serial=serial)
        lock = store.locks.describe(TargetedSweeper.lock_name(shard, strategy), serial=serial)
        queue = read_pair(store, shard, strategy, sweep_ts, progress, backlog_cap, serial)
        records = store.history.recent(shard, strategy.value, limit=history_limit)
        runs = store.history.runs(shard, strategy.value, limit=RUN_RECORDS_READ)
        return PairObservation(shard, strategy, sweep_ts, progress, lock, queue, _by_time(records), _by_time(runs))

    observed = _map(observe, pairs, max_workers)
    clock = TimestampClock(clock_anchors(store, now, fresh_ts, (r for o in observed for r in o.records)))

    # 3. per shard and strategy: the row with its forecast (needs the clock)
    lags = [pair_lag(o.queue, clock, now) for o in observed]
    rows = _map(lambda ol: pair_row(store, ol[0], ol[1], clock, now, window_seconds, backlog_cap, tolerance),
                list(zip(observed, lags, strict=True)), max_workers)
    why = {
        s.value: explain_why(explains[s.value], rows, s.value, clock.wall_of(explains[s.value]["sweep_ts"]), now)
        for s in strategy_list
    }
    totals = {}
    for s in strategy_list:
        mine = [r for r in rows if r.strategy == s.value]
        lag = overall(pair for o, pair in zip(observed, lags, strict=True) if o.strategy == s)
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


def _gc_grace(store: AtlasStore, tables: dict[str, str]) -> tuple[list[TableGcGrace], list[TableWarning]]:
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
# ----- internals -------------------------------------------------------------------------------------------
def _by_time(records: list[dict]) -> list[dict]:
    """Records with a wall time, oldest first."""
    return sorted((r for r in records if isinstance(r.get("at"), (int, float))), key=lambda r: r["at"])


def _shards(shards: Sequence[int] | None, number_of_shards: int) -> list[int]:
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


def _strategies(strategies: Sequence[SweepStrategy | str] | None) -> list[SweepStrategy]:
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


def _map(fn: Callable[[T], R], items: Iterable[T], max_workers: int) -> list[R]:
    todo = list(items)
    if max_workers <= 1 or len(todo) <= 1:
        return [fn(i) for i in todo]
    with ThreadPoolExecutor(max_workers=min(max_workers, len(todo)), thread_name_prefix="atlas-status") as pool:
        return list(pool.map(fn, todo))
