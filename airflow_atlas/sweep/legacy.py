"""LegacySweeper: the scan-based sweep of one table (spec 000, "Legacy Sweep").

It scans every version of every cell, looks up commit timestamps in bulk, and deletes exactly the
versions targeted sweep would remove, one by one:

* every version of a cell older than the newest version whose writer started and committed below the
  sweep timestamp (the newest such version is kept);
* versions written by aborted transactions, and by transactions with no commit entry (which it aborts
  first, as targeted sweep does) below the sweep timestamp;
* CONSERVATIVE: writes a sentinel for every cell it deletes from, and keeps existing sentinels;
* THOROUGH: deletes sentinels, and the kept newest version too when it is a delete (empty value).

It is the baseline the benchmarks compare against (it must read the whole table, values included) and
the migration tool for data written before the sweep queue existed. A range (Cassandra token range or
embedded key range) lets Spark sweep a table in parallel; ``start_after_row`` resumes a stopped sweep.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import InvalidInputError
from ..kvs.api import SENTINEL_TIMESTAMP, Cell, ScanRange
from ..kvs.consistency import Operation
from ..kvs.tables import SweepStrategy
from ..serialisation import flatten
from .commits import RollbackGuard, resolve_commits
from .counts import ScanCounts

if TYPE_CHECKING:
    from ..store import AtlasStore

ABORTED = -1


@dataclass
class LegacySweepResult:
    table: str
    strategy: str
    sweep_ts: int
    scan_range: list | None = None
    counts: ScanCounts = field(default_factory=ScanCounts)
    """What it read and wrote (flat in the JSON)."""
    last_row: str | None = None  # hex of the last row fully processed (resume point)
    finished: bool = False
    duration_seconds: float = 0.0
    dry_run: bool = False

    _dump, _load = flatten("counts", ScanCounts)


def _group_cells(versions: Iterator[tuple[Cell, int, bytes]]) -> Iterator[tuple[Cell, list[tuple[int, bytes]]]]:
    current: Cell | None = None
    bucket: list[tuple[int, bytes]] = []
    for cell, ts, value in versions:
        if cell != current:
            if current is not None:
                yield current, bucket
            current, bucket = cell, []
        bucket.append((ts, value))
    if current is not None:
        yield current, bucket


class LegacySweeper:
    def __init__(self, store: AtlasStore) -> None:
        self._store = store
        self._kvs = store.kvs

    def sweep_table(
        self,
        table: str,
        *,
        scan_range: ScanRange | None = None,
        start_after_row: bytes | None = None,
        batch_size: int = 1000,
        sweep_ts: int | None = None,
        dry_run: bool = False,
        max_cells: int | None = None,
    ) -> LegacySweepResult:
        if batch_size < 1:
            raise InvalidInputError("batch_size must be at least 1")
        strategy = self._kvs.get_metadata(table).strategy  # raises TableNotFoundError
        if not strategy.is_swept:
            raise InvalidInputError(f"table {table!r} has sweep strategy NOTHING: it is never swept")
        if sweep_ts is None:
            sweep_ts = self._store.sweep_timestamps.sweep_timestamp(strategy)
        started = time.monotonic()
        result = LegacySweepResult(
            table=table,
            strategy=strategy.value,
            sweep_ts=sweep_ts,
            scan_range=None if scan_range is None else [scan_range.kind, _jsonable(scan_range.start), _jsonable(scan_range.end)],
            dry_run=dry_run,
        )
        pending: list[tuple[Cell, list[tuple[int, bytes]]]] = []
        versions = self._kvs.scan(table, scan_range, start_after_row=start_after_row, page_size=max(batch_size, 100))
        stopped_early = False
        for cell, cell_versions in _group_cells(versions):
            if pending and pending[-1][0].row != cell.row and len(pending) >= batch_size:
                self._sweep_batch(table, strategy, sweep_ts, pending, result, dry_run)
                pending = []
                if max_cells is not None and result.counts.cells_examined >= max_cells:
                    stopped_early = True
                    break
            pending.append((cell, cell_versions))
        if pending and not stopped_early:
            self._sweep_batch(table, strategy, sweep_ts, pending, result, dry_run)
        result.finished = not stopped_early
        result.duration_seconds = round(time.monotonic() - started, 6)
        return result

    def _sweep_batch(
        self,
        table: str,
        strategy: SweepStrategy,
        sweep_ts: int,
        cells: list[tuple[Cell, list[tuple[int, bytes]]]],
        result: LegacySweepResult,
        dry_run: bool,
    ) -> None:
        starts = {ts for _, versions in cells for ts, _ in versions if 0 <= ts < sweep_ts}
        commits = self._commit_timestamps(sorted(starts), result, dry_run)
        deletes: list[tuple[Cell, int]] = []
        sentinel_cells: list[Cell] = []
        result.counts += ScanCounts(cells_examined=len(cells), versions_examined=sum(len(v) for _, v in cells))
        for cell, versions in cells:
            has_sentinel = any(ts == SENTINEL_TIMESTAMP for ts, _ in versions)
            # the newest version whose writer started and committed below the sweep timestamp
            newest: tuple[int, bytes] | None = None
            for ts, value in versions:
                if ts < 0 or ts >= sweep_ts:
                    continue
                commit = commits.get(ts, ABORTED)
                if commit != ABORTED and commit < sweep_ts and (newest is None or ts > newest[0]):
                    newest = (ts, value)
            doomed: list[int] = []
            for ts, _ in versions:
                if ts < 0 or ts >= sweep_ts:
                    continue
                commit = commits.get(ts, ABORTED)
                if commit == ABORTED:
                    doomed.append(ts)
                elif commit < sweep_ts and newest is not None and ts < newest[0]:
                    doomed.append(ts)
            if strategy is SweepStrategy.THOROUGH:
                if has_sentinel:
                    doomed.append(SENTINEL_TIMESTAMP)
                if newest is not None and newest[1] == b"":
                    doomed.append(newest[0])
            elif strategy is SweepStrategy.CONSERVATIVE and newest is not None and not has_sentinel:
                # a sentinel marks that older versions may be gone (targeted sweep writes one per swept cell)
                sentinel_cells.append(cell)
            deletes.extend((cell, ts) for ts in doomed)
            if cells and cell is cells[-1][0]:
                result.last_row = cell.row.hex()
        result.counts += ScanCounts(versions_deleted=len(deletes), sentinels_written=len(sentinel_cells))
        if dry_run:
            return
        if sentinel_cells:
            self._kvs.add_gc_sentinels(table, sentinel_cells, operation=Operation.SENTINEL)  # before any delete
        if deletes:
            self._kvs.delete(table, deletes, operation=Operation.SWEEP_DELETE)
            # counted for compaction (sweep/history.py) under a fresh timestamp drawn after the deletes
            self._store.history.record_tombstones({table: len(deletes)}, self._store.timestamps.fresh_timestamp(),
                                                  {"source": "full_sweep"})

    def _commit_timestamps(self, starts: list[int], result: LegacySweepResult, dry_run: bool) -> dict[int, int]:
        """Commit timestamps in bulk; transactions with no entry are aborted (put -1 unless exists)."""
        commits, aborted_now = resolve_commits(
            self._store.transaction_service, starts, dry_run=dry_run, guard=RollbackGuard.from_config(self._store.config)
        )
        result.counts += ScanCounts(transactions_aborted=aborted_now)
        return commits


def _jsonable(value: object) -> object:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return value
