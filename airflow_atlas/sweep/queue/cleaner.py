"""SweepQueueCleaner: removes queue rows that progress has left behind (spec 000, "Cleaning the Sweep
Queue"; notes: "Cleaning, in this order, each step idempotent").

``clean(shard, strategy, old_progress, new_progress)`` - called by the sweeper *before* it persists
``new_progress`` - removes, for the shard and strategy:

1. for every fine partition F with ``fine(old_progress + 1) <= F < fine(new_progress + 1)`` listed in
   ``_sweep_timestamps``: read F's non-dedicated ``_sweep_cells`` row, collect its references
   (write_index < 0) and delete the referenced dedicated rows - whether the transaction committed or
   aborted (the reference implementation leaked the dedicated rows of aborted transactions);
2. then delete those non-dedicated rows;
3. then delete the ``_sweep_timestamps`` rows of coarse partitions C with
   ``coarse(old_progress + 1) <= C < coarse(new_progress + 1)``.

Each step is one ``kvs.delete_rows`` call (one fresh timestamp each) over all partitions of the call, in
this order, so a crash at any point leaves only rows that a re-run finds again: dedicated rows are only
deleted while their reference still exists, cells rows while their timestamps entry still exists.
Re-running is harmless; rows already gone are skipped (no needless tombstones).

``reconcile(shard, strategy, progress)`` repairs what an interrupted run (or a sweeper that persisted
progress without cleaning) left: it cleans every listed fine partition below ``fine(progress + 1)`` and
every timestamps row below ``coarse(progress + 1)``. It finds them through
:class:`~.timestamp_index.SweepableTimestampsIndex` from coarse partition 0, which walks a few coarse
rows and falls back to one scan of ``_sweep_timestamps`` (decoding row keys) when the span is large.

``queue_rows_below`` is a diagnostic (full scans of both queue tables) used by tests to prove nothing
leaked.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...encoding import LONG_MAX
from ...errors import CorruptQueueDataError
from ...kvs.api import KeyValueService
from ...kvs.consistency import Operation
from ...kvs.tables import SweepStrategy
from ...validation import check_int
from .constants import FINE_PARTITION, INITIAL_PROGRESS, MAX_SHARDS
from .partitions import coarse, fine
from .queue_tables import (
    SWEEPABLE_CELLS,
    SWEEPABLE_TIMESTAMPS,
    conservative_flag,
    decode_cells_column,
    decode_cells_row,
    decode_timestamps_row,
    dedicated_row,
    non_dedicated_row,
    timestamps_row,
)
from .timestamp_index import SweepableTimestampsIndex

_PAGE = 10_000


@dataclass
class CleanResult:
    """What one clean / reconcile call deleted."""

    cells_rows_deleted: int = 0
    dedicated_rows_deleted: int = 0
    """dedicated rows referenced by the cleaned rows (all deleted; a re-run after a crash counts them again)"""
    timestamps_rows_deleted: int = 0
    fine_partitions: list[int] = field(default_factory=list)
    coarse_partitions: list[int] = field(default_factory=list)
    unreadable_references: int = 0
    """Cells of cleaned rows whose column could not be decoded (a reference among them cannot be followed)."""

    @property
    def rows_deleted(self) -> int:
        """All rows deleted: cells rows + dedicated rows + timestamps rows."""
        return self.cells_rows_deleted + self.dedicated_rows_deleted + self.timestamps_rows_deleted

    @property
    def total(self) -> int:
        """Same as :attr:`rows_deleted`."""
        return self.rows_deleted


@dataclass
class QueueRows:
    """Queue rows of one shard and strategy found by :meth:`SweepQueueCleaner.queue_rows_below`."""

    cells_rows: list[int] = field(default_factory=list)
    """fine partitions of non-dedicated rows"""
    dedicated_rows: list[tuple[int, int]] = field(default_factory=list)
    """(start timestamp, ordinal) of dedicated rows"""
    timestamps_rows: list[int] = field(default_factory=list)
    """coarse partitions of timestamps rows"""

    def __bool__(self) -> bool:
        return bool(self.cells_rows or self.dedicated_rows or self.timestamps_rows)


def _check(shard: object, progress: object, what: str) -> None:
    check_int(shard, "shard", 0, MAX_SHARDS - 1)
    check_int(progress, what, INITIAL_PROGRESS, LONG_MAX - 1)


class SweepQueueCleaner:
    """Deletes swept queue rows (see the module docstring)."""

    def __init__(self, kvs: KeyValueService, *, index: SweepableTimestampsIndex | None = None):
        self.kvs = kvs
        self.index = index or SweepableTimestampsIndex(kvs)

    def clean(self, shard: int, strategy: SweepStrategy | str, old_progress: int, new_progress: int) -> CleanResult:
        """Delete the queue rows that moving progress from ``old_progress`` to ``new_progress`` leaves
        behind. Nothing happens unless ``new_progress > old_progress``."""
        _check(shard, old_progress, "old_progress")
        _check(shard, new_progress, "new_progress")
        conservative = conservative_flag(strategy)
        if new_progress <= old_progress:
            return CleanResult()
        return self._clean(shard, conservative, old_progress + 1, new_progress + 1)

    def reconcile(self, shard: int, strategy: SweepStrategy | str, progress: int) -> CleanResult:
        """Delete every queue row of the shard and strategy wholly below ``progress`` (leftovers of an
        interrupted clean). Idempotent."""
        _check(shard, progress, "progress")
        return self._clean(shard, conservative_flag(strategy), 0, progress + 1)

    def queue_rows_below(self, shard: int, strategy: SweepStrategy | str, progress: int) -> QueueRows:
        """Every queue row of the shard and strategy that cleaning up to ``progress`` should have removed:
        non-dedicated rows of fine partitions < fine(progress + 1), dedicated rows of start timestamps in
        them, timestamps rows of coarse partitions < coarse(progress + 1). Full scans: tests/diagnostics."""
        _check(shard, progress, "progress")
        conservative = conservative_flag(strategy)
        fine_end, coarse_end = fine(progress + 1), coarse(progress + 1)
        found = QueueRows()
        for row in self._distinct_rows(SWEEPABLE_CELLS):
            try:
                decoded = decode_cells_row(row)
            except CorruptQueueDataError:
                continue
            meta = decoded.metadata
            if meta.shard != shard or meta.conservative != conservative:
                continue
            if meta.dedicated_row:
                if decoded.timestamp_partition // FINE_PARTITION < fine_end:
                    found.dedicated_rows.append((decoded.timestamp_partition, meta.dedicated_row_number))
            elif decoded.timestamp_partition < fine_end:
                found.cells_rows.append(decoded.timestamp_partition)
        for row in self._distinct_rows(SWEEPABLE_TIMESTAMPS):
            try:
                decoded_ts = decode_timestamps_row(row)
            except CorruptQueueDataError:
                continue
            if (
                decoded_ts.shard == shard
                and decoded_ts.conservative == conservative
                and decoded_ts.coarse_partition < coarse_end
            ):
                found.timestamps_rows.append(decoded_ts.coarse_partition)
        found.cells_rows.sort()
        found.dedicated_rows.sort()
        found.timestamps_rows.sort()
        return found

    # ----- internals ---------------------------------------------------------------------------------
    def _clean(self, shard: int, conservative: bool, start_ts: int, end_ts: int) -> CleanResult:
        """Clean fine partitions in [fine(start_ts), fine(end_ts)) and coarse rows in
        [coarse(start_ts), coarse(end_ts))."""
        result = CleanResult()
        fine_lo, fine_hi = fine(start_ts), fine(end_ts)
        coarse_lo, coarse_hi = coarse(start_ts), coarse(end_ts)
        if fine_hi <= fine_lo:
            return result
        listed = list(self.index.coarse_rows(shard, conservative, coarse_lo, coarse_hi))
        partitions = [f for _, fines in listed for f in fines if fine_lo <= f < fine_hi]

        # Step 1: dedicated rows referenced from the non-dedicated rows.
        cells_rows: list[bytes] = []
        dedicated: list[bytes] = []
        for partition in partitions:
            row = non_dedicated_row(partition, shard, conservative)
            refs, present, unreadable = self._references(row)
            result.unreadable_references += unreadable
            if not present:
                continue  # already deleted (or never written): nothing to do, no new tombstone
            cells_rows.append(row)
            result.fine_partitions.append(partition)
            base = partition * FINE_PARTITION
            for modulus, rows in refs:
                dedicated.extend(dedicated_row(base + modulus, shard, conservative, n) for n in range(rows))
        if dedicated:
            # Deleted without checking each one exists: reading a 100,000-cell row to learn that would
            # cost more than a partition tombstone, and a re-run only repeats this after a crash.
            self.kvs.delete_rows(SWEEPABLE_CELLS, dedicated, operation=Operation.QUEUE_CLEANUP)
            result.dedicated_rows_deleted = len(dedicated)
        # Step 2: the non-dedicated rows.
        if cells_rows:
            self.kvs.delete_rows(SWEEPABLE_CELLS, cells_rows, operation=Operation.QUEUE_CLEANUP)
            result.cells_rows_deleted = len(cells_rows)
        # Step 3: timestamps rows of coarse partitions progress has fully left.
        ts_rows = [c for c, _ in listed if coarse_lo <= c < coarse_hi]
        if ts_rows:
            self.kvs.delete_rows(
                SWEEPABLE_TIMESTAMPS,
                [timestamps_row(shard, c, conservative) for c in ts_rows],
                operation=Operation.QUEUE_CLEANUP,
            )
            result.timestamps_rows_deleted = len(ts_rows)
            result.coarse_partitions = ts_rows
        return result

    def _references(self, row: bytes) -> tuple[list[tuple[int, int]], bool, int]:
        """(references as (timestamp_modulus, number of dedicated rows), row has any cell, undecodable cells)."""
        refs: list[tuple[int, int]] = []
        present = False
        unreadable = 0
        cursor = None
        while True:
            page = self.kvs.get_row_columns(SWEEPABLE_CELLS, row, cursor, None, limit=_PAGE)
            for col, _value in page:
                present = True
                try:
                    column = decode_cells_column(col)
                except CorruptQueueDataError:
                    unreadable += 1
                    continue
                if column.write_index < 0:
                    refs.append((column.timestamp_modulus, -column.write_index))
            if len(page) < _PAGE:
                return refs, present, unreadable
            cursor = page[-1][0] + b"\x00"

    def _distinct_rows(self, table: str) -> list[bytes]:
        rows: dict[bytes, None] = {}
        for cell, _ts, _value in self.kvs.scan(table, page_size=1000):
            rows[cell.row] = None
        return list(rows)
