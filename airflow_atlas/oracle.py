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

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

from .errors import CorruptTransactionDataError
from .kvs.api import SENTINEL_TIMESTAMP, Cell
from .kvs.tables import SweepStrategy

if TYPE_CHECKING:
    from .store import AtlasStore
    from .transactions.service import TransactionService

_LOAD_CHUNK = 10_000
ABSENT: Final = "ABSENT"
LONG_READER = 2**63 - 1
"""A reader after every commit: what the newest snapshot sees."""
SWEPT: Final = "SWEPT"
ABORTED = -1

Outcome = bytes | Literal["ABSENT", "SWEPT"]
"""What a reader sees in a cell: its value, :data:`ABSENT` or :data:`SWEPT`."""


@dataclass(frozen=True)
class Reader:
    timestamp: int
    read_only: bool = False


@dataclass
class Observation:
    """What each reader sees in each user table: {reader: {table: {cell: outcome}}}."""

    views: dict[Reader, dict[str, dict[Cell, Outcome]]] = field(default_factory=dict)
    strategies: dict[str, SweepStrategy] = field(default_factory=dict)


def _all_versions(store: AtlasStore, table: str) -> dict[Cell, list[tuple[int, bytes]]]:
    versions: dict[Cell, list[tuple[int, bytes]]] = {}
    for cell, ts, value in store.kvs.scan(table):
        versions.setdefault(cell, []).append((ts, value))
    return versions


def load_commits(
    service: TransactionService, starts: Iterable[int], corrupt: dict[int, CorruptTransactionDataError] | None = None
) -> dict[int, int]:
    """Commit timestamps (or ABORTED) of ``starts`` that have an entry. With ``corrupt`` (a dict), a corrupt
    entry does not fail the load: its CorruptTransactionDataError is stored under its start timestamp and
    the others are still loaded (a failing chunk is split until the corrupt entries are isolated)."""
    wanted = sorted({s for s in starts if s >= 0})
    if not wanted:
        return {}
    if corrupt is None:
        return dict(service.get_many(wanted))
    out: dict[int, int] = {}

    def load(chunk: list[int]) -> None:
        try:
            out.update(service.get_many(chunk))
        except CorruptTransactionDataError as exc:
            if len(chunk) == 1:
                corrupt[chunk[0]] = exc
                return
            mid = len(chunk) // 2
            load(chunk[:mid])
            load(chunk[mid:])

    for i in range(0, len(wanted), _LOAD_CHUNK):
        load(wanted[i:i + _LOAD_CHUNK])
    return out


def _commits(
    store: AtlasStore, starts: Iterable[int], corrupt: dict[int, CorruptTransactionDataError] | None = None
) -> dict[int, int]:
    return load_commits(store.transaction_service, starts, corrupt)


def _read(versions: list[tuple[int, bytes]], commits: dict[int, int], reader: Reader, strategy: SweepStrategy) -> Outcome:
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


def observe(store: AtlasStore, readers: Iterable[Reader], tables: Iterable[str] | None = None) -> Observation:
    reader_list = list(readers)
    table_list = list(tables) if tables is not None else sorted(store.user_tables())
    obs = Observation()
    for table in table_list:
        strategy = store.kvs.get_metadata(table).strategy
        obs.strategies[table] = strategy
        versions = _all_versions(store, table)
        commits = _commits(store, (ts for vs in versions.values() for ts, _ in vs))
        for reader in reader_list:
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


@dataclass(frozen=True)
class Leftover:
    """A version a complete sweep should have removed. ``visible``: a reader now sees a different value
    because of it (deleted or overwritten data is back), not just wasted space."""

    table: str
    cell: Cell
    timestamp: int
    commit: int | None
    what: str
    visible: bool = False

    def __str__(self) -> str:
        return f"{self.table} {self.cell}: {self.what}"


def leftover_versions(
    store: AtlasStore,
    sweep_ts: dict[str, int],
    tables: Iterable[str] | None = None,
    corrupt: dict[int, CorruptTransactionDataError] | None = None,
) -> list[Leftover]:
    """Versions a complete sweep to ``sweep_ts`` (per strategy name) should have removed but did not.

    For each cell, among versions below the sweep timestamp whose writers committed below it, only the
    newest may remain (plus the sentinel on CONSERVATIVE tables; on THOROUGH the newest goes too when it
    is a delete); versions of aborted or never-committed writers below it must be gone. With ``corrupt``
    (a dict), cells with a version whose transaction entry is corrupt are skipped and the errors collected
    there (start timestamp -> error; the error's ``cells`` attribute lists ``(table, cell)`` pairs)."""
    table_list = list(tables) if tables is not None else sorted(store.user_tables())
    left: list[Leftover] = []
    for table in table_list:
        strategy = store.kvs.get_metadata(table).strategy
        if not strategy.is_swept:
            continue
        limit = sweep_ts[strategy.value]
        versions = _all_versions(store, table)
        found_corrupt: dict[int, CorruptTransactionDataError] = {}
        commits = _commits(store, (ts for vs in versions.values() for ts, _ in vs), found_corrupt if corrupt is not None else None)
        for cell, vs in versions.items():
            bad = [ts for ts, _ in vs if ts in found_corrupt]
            if bad:
                for ts in bad:
                    found_corrupt[ts].cells.append((table, cell))
                continue
            swept = [(ts, v) for ts, v in vs if 0 <= ts < limit]
            committed = [(ts, v) for ts, v in swept if commits.get(ts, ABORTED) not in (ABORTED,) and commits[ts] < limit]
            newest = max(committed) if committed else None
            found: list[Leftover] = []
            for ts, v in swept:
                commit = commits.get(ts)
                if commit is not None and commit != ABORTED and commit >= limit:
                    continue  # committed too late to be swept yet
                if newest is not None and ts == newest[0]:
                    if strategy is SweepStrategy.THOROUGH and v == b"":
                        found.append(Leftover(table, cell, ts, commit, f"THOROUGH delete at {ts} still present"))
                    continue
                if newest is None and commit is None:
                    continue  # writer undecided and nothing newer: only sweep's abort would remove it
                found.append(Leftover(table, cell, ts, commit, f"version {ts} (commit {commit}) still present"))
            if strategy is SweepStrategy.THOROUGH and newest is not None:
                if any(ts == SENTINEL_TIMESTAMP for ts, _ in vs):
                    found.append(Leftover(table, cell, SENTINEL_TIMESTAMP, None, "THOROUGH sentinel still present"))
            if found:
                reader = Reader(LONG_READER)
                gone = {f.timestamp for f in found}
                now = _read(vs, commits, reader, strategy)
                swept_view = _read([(ts, v) for ts, v in vs if ts not in gone], commits, reader, strategy)
                if now != swept_view:
                    found = [Leftover(f.table, f.cell, f.timestamp, f.commit, f.what + f"; readers see {_show(now)} "
                                      f"instead of {_show(swept_view)}", True) for f in found]
            left.extend(found)
        if corrupt is not None:
            corrupt.update(found_corrupt)
    return left


def obsolete_versions(store: AtlasStore, sweep_ts: dict[str, int], tables: Iterable[str] | None = None) -> list[str]:
    """:func:`leftover_versions` as one line each."""
    return [str(x) for x in leftover_versions(store, sweep_ts, tables)]


def _show(outcome: Outcome) -> str:
    if isinstance(outcome, bytes):
        return repr(outcome[:40])
    return str(outcome)
