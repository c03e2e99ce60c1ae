"""The safety oracle: sweep must never change what a protected reader sees.

It computes visibility independently of the transaction code (a second implementation of the MVCC read
rule, straight from the stored versions and the transactions table) for a set of reader timestamps,
before and after any number of sweep iterations, and compares:

* read-write readers (open transactions) and read-only readers at or above the sweep timestamp: every
  cell must read exactly the same value (or absence);
* CONSERVATIVE read-only readers older than the unreadable window: the same value, or a sentinel error
  (they must fail rather than see wrong data) - never a different value;
* after a full sweep with nothing open, :func:`obsolete_versions` lists every version that should be gone
  and is still there.

Outcomes per cell: ``bytes`` value, ``ABSENT`` (never written or deleted), ``SWEPT`` (a read-only reader
met a sentinel before finding its version).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from .kvs.api import SENTINEL_TIMESTAMP, Cell, SweepStrategy

ABSENT = "ABSENT"
SWEPT = "SWEPT"
ABORTED = -1


@dataclass(frozen=True)
class Reader:
    timestamp: int
    read_only: bool = False


@dataclass
class Observation:
    """What each reader sees in each user table: {reader: {table: {cell: outcome}}}."""

    views: dict = field(default_factory=dict)
    strategies: dict = field(default_factory=dict)


def _all_versions(store, table: str) -> dict[Cell, list[tuple[int, bytes]]]:
    versions: dict[Cell, list[tuple[int, bytes]]] = {}
    for cell, ts, value in store.kvs.scan(table):
        versions.setdefault(cell, []).append((ts, value))
    return versions


def _commits(store, starts: Iterable[int]) -> dict[int, int]:
    starts = sorted({s for s in starts if s >= 0})
    return dict(store.transaction_service.get_many(starts)) if starts else {}


def _read(versions: list[tuple[int, bytes]], commits: dict[int, int], reader: Reader, strategy: SweepStrategy):
    for ts, value in sorted(versions, reverse=True):
        if ts >= reader.timestamp:
            continue
        if ts == SENTINEL_TIMESTAMP:
            if reader.read_only and strategy is SweepStrategy.CONSERVATIVE:
                return SWEPT
            continue
        commit = commits.get(ts)
        if commit is None or commit == ABORTED or commit >= reader.timestamp:
            continue
        return ABSENT if value == b"" else value
    return ABSENT


def observe(store, readers: Iterable[Reader], tables: Iterable[str] | None = None) -> Observation:
    readers = list(readers)
    tables = list(tables) if tables is not None else sorted(store.user_tables())
    obs = Observation()
    for table in tables:
        strategy = store.kvs.get_metadata(table).strategy
        obs.strategies[table] = strategy
        versions = _all_versions(store, table)
        commits = _commits(store, (ts for vs in versions.values() for ts, _ in vs))
        for reader in readers:
            view = obs.views.setdefault(reader, {}).setdefault(table, {})
            for cell, vs in versions.items():
                view[cell] = _read(vs, commits, reader, strategy)
    return obs


def compare(before: Observation, after: Observation, sweep_ts: dict[str, int] | None = None) -> list[str]:
    """Violations (empty when sweep was safe). ``sweep_ts`` maps strategy name -> the highest sweep
    timestamp used; read-only readers below it on CONSERVATIVE tables may see SWEPT instead of data."""
    problems: list[str] = []
    sweep_ts = sweep_ts or {}
    for reader, tables in before.views.items():
        for table, cells in tables.items():
            strategy = before.strategies[table]
            limit = sweep_ts.get(strategy.value, 0)
            after_cells = after.views.get(reader, {}).get(table, {})
            for cell, seen in cells.items():
                now = after_cells.get(cell, ABSENT)
                if now == seen:
                    continue
                if (
                    reader.read_only
                    and strategy is SweepStrategy.CONSERVATIVE
                    and reader.timestamp < limit
                    and now == SWEPT
                ):
                    continue  # an old read-only reader fails loudly instead of reading wrong data: allowed
                problems.append(
                    f"{table} {cell.row!r}/{cell.col!r} reader@{reader.timestamp}"
                    f"{' (read-only)' if reader.read_only else ''}: before {_show(seen)}, after {_show(now)}"
                )
    return problems


def obsolete_versions(store, sweep_ts: dict[str, int], tables: Iterable[str] | None = None) -> list[str]:
    """Versions a complete sweep to ``sweep_ts`` (per strategy name) should have removed but did not.

    For each cell, among versions below the sweep timestamp whose writers committed below it, only the
    newest may remain (plus the sentinel on CONSERVATIVE tables; on THOROUGH the newest goes too when it
    is a delete); versions of aborted or never-committed writers below it must be gone."""
    tables = list(tables) if tables is not None else sorted(store.user_tables())
    left: list[str] = []
    for table in tables:
        strategy = store.kvs.get_metadata(table).strategy
        if strategy is SweepStrategy.NOTHING:
            continue
        limit = sweep_ts[strategy.value]
        versions = _all_versions(store, table)
        commits = _commits(store, (ts for vs in versions.values() for ts, _ in vs))
        for cell, vs in versions.items():
            swept = [(ts, v) for ts, v in vs if 0 <= ts < limit]
            committed = [(ts, v) for ts, v in swept if commits.get(ts, ABORTED) not in (ABORTED,) and commits[ts] < limit]
            newest = max(committed) if committed else None
            for ts, v in swept:
                commit = commits.get(ts)
                if commit is not None and commit != ABORTED and commit >= limit:
                    continue  # committed too late to be swept yet
                if newest is not None and ts == newest[0]:
                    if strategy is SweepStrategy.THOROUGH and v == b"":
                        left.append(f"{table} {cell}: THOROUGH delete at {ts} still present")
                    continue
                if newest is None and commit is None:
                    continue  # writer undecided and nothing newer: only sweep's abort would remove it
                left.append(f"{table} {cell}: version {ts} (commit {commit}) still present")
            if strategy is SweepStrategy.THOROUGH and newest is not None:
                if any(ts == SENTINEL_TIMESTAMP for ts, _ in vs):
                    left.append(f"{table} {cell}: THOROUGH sentinel still present")
    return left


def _show(outcome) -> str:
    if isinstance(outcome, bytes):
        return repr(outcome[:40])
    return str(outcome)
