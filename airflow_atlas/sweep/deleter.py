"""SweepDeleter: turns "the newest sweepable write of each cell" into sentinels and ranged tombstones.

Per spec 000 step 5, one ranged tombstone per (table, cell), at the greatest sweepable start timestamp:

* CONSERVATIVE: write the garbage-collection sentinel FIRST, then delete ``[0, ts - 1]`` (keeps the
  sentinel and the write). A reader that finds the sentinel knows older versions may be gone. Both go
  through ``add_gc_sentinels_and_delete_all_timestamps``: on Cassandra a cell's sentinel and tombstone
  are one single-partition mutation (atomic, so the tombstone is never visible without the sentinel);
  the embedded store writes all sentinels, then all tombstones, in one transaction.
* THOROUGH: delete ``[-1, ts - 1]`` (the sentinel too, keeps the write); when the newest write is a delete
  (a tombstone), ALSO delete ``[-1, ts]`` - second, so that if only the first call lands, older data can
  never reappear (the write that shadows it is still there).

Any failure raises: the caller must not advance progress past an unswept entry.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..kvs.api import SENTINEL_TIMESTAMP, Cell, KeyValueService
from ..kvs.consistency import Operation
from ..kvs.tables import SweepStrategy


@dataclass
class DeleteCounts:
    cells_tombstoned: int = 0
    sentinels_written: int = 0
    range_deletes: int = 0


class SweepDeleter:
    def __init__(self, kvs: KeyValueService):
        self._kvs = kvs

    def sweep_cells(
        self, table: str, strategy: SweepStrategy, newest: Mapping[Cell, tuple[int, bool]], *, dry_run: bool = False
    ) -> DeleteCounts:
        """``newest`` maps each cell to (greatest sweepable start ts, whether that write was a delete)."""
        counts = DeleteCounts()
        if not newest:
            return counts
        if strategy is SweepStrategy.CONSERVATIVE:
            ranges = {cell: (0, ts - 1) for cell, (ts, _) in newest.items() if ts - 1 >= 0}
            counts.sentinels_written = len(newest)
            counts.range_deletes = len(ranges)
            counts.cells_tombstoned = len(newest)
            if not dry_run:
                self._kvs.add_gc_sentinels_and_delete_all_timestamps(table, list(newest), ranges)
            return counts
        if strategy is SweepStrategy.THOROUGH:
            exclusive = {cell: (SENTINEL_TIMESTAMP, ts - 1) for cell, (ts, _) in newest.items()}
            inclusive = {cell: (SENTINEL_TIMESTAMP, ts) for cell, (ts, tomb) in newest.items() if tomb}
            counts.range_deletes = len(exclusive) + len(inclusive)
            counts.cells_tombstoned = len(newest)
            if not dry_run:
                self._kvs.delete_all_timestamps(table, exclusive, operation=Operation.SWEEP_DELETE)
                if inclusive:
                    self._kvs.delete_all_timestamps(table, inclusive, operation=Operation.SWEEP_DELETE)
            return counts
        raise ValueError(f"strategy {strategy} is not swept")
