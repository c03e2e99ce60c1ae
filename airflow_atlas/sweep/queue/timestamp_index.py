"""Reading ``_sweep_timestamps``: which fine partitions of a shard and strategy have a ``_sweep_cells`` row.

Used by the reader (find the next non-empty fine partition), the cleaner (which fine partitions and coarse
rows to delete) and reconcile (leftovers below progress).

How coarse partitions are visited (spec 000, "Reading from the Sweep Queue", step 1): one row per coarse
partition, in ascending order. Rows are fetched with ``kvs.get_rows_columns`` in growing groups (1, then
8, 64, then 256 rows per call; the backend reads a group concurrently), so the common case - the next
row is in the current coarse partition - costs one single-row read. When more than ``scan_threshold``
coarse partitions (default 1024, i.e. 10^10 timestamps) remain to be visited, walking them would cost
thousands of reads (e.g. the first iteration of a shard whose progress is -1 while timestamps are around
10^12), so the index instead scans ``_sweep_timestamps`` once (it is small: the cleaner deletes rows of
every coarse partition that progress has left) and decodes the row keys, which carry shard, coarse
partition and strategy after their hash prefix. Both ways return the same rows; the part of the queue
below the sweep timestamp no longer changes, so the scan is not racing with writers there.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from ...errors import CorruptQueueDataError
from ...kvs.api import KeyValueService
from .partitions import fine_to_coarse
from .queue_tables import (
    SWEEPABLE_TIMESTAMPS,
    decode_timestamps_column,
    decode_timestamps_row,
    timestamps_row,
)

OnCorrupt = Callable[[str, bytes, "bytes | None", str], None]
"""Callback ``(table, row, column or None, reason)`` for a queue cell that cannot be decoded."""

DEFAULT_SCAN_THRESHOLD = 1024
_GROUP_SIZES = (1, 8, 64, 256)


def _ignore(table: str, row: bytes, col: bytes | None, reason: str) -> None:
    return None


class SweepableTimestampsIndex:
    """Lists the non-empty rows of ``_sweep_timestamps`` for one shard and strategy."""

    def __init__(self, kvs: KeyValueService, *, scan_threshold: int = DEFAULT_SCAN_THRESHOLD):
        self.kvs = kvs
        self.scan_threshold = scan_threshold
        self.last_used_scan = False  # diagnostics / tests: whether the last listing fell back to a scan

    def coarse_rows(
        self,
        shard: int,
        conservative: bool,
        min_coarse: int,
        max_coarse: int,
        on_corrupt: OnCorrupt | None = None,
    ) -> Iterator[tuple[int, list[int]]]:
        """Yield ``(coarse partition, sorted fine partitions)`` for every existing row with
        ``min_coarse <= coarse <= max_coarse``, in ascending coarse order. Lazily: stop iterating to stop
        reading. Undecodable columns are reported to ``on_corrupt`` and skipped (a row holding only such
        columns is still yielded, with no fine partitions, so the cleaner can delete it)."""
        on_corrupt = on_corrupt or _ignore
        self.last_used_scan = False
        coarse = min_coarse
        step = 0
        while coarse <= max_coarse:
            if step > 0 and max_coarse - coarse + 1 > self.scan_threshold:
                self.last_used_scan = True
                yield from self._scan(shard, conservative, coarse, max_coarse, on_corrupt)
                return
            size = _GROUP_SIZES[min(step, len(_GROUP_SIZES) - 1)]
            step += 1
            group = range(coarse, min(coarse + size, max_coarse + 1))
            keys = [timestamps_row(shard, c, conservative) for c in group]
            found = self.kvs.get_rows_columns(SWEEPABLE_TIMESTAMPS, keys)
            for c, key in zip(group, keys, strict=True):
                columns = found.get(key)
                if columns:
                    yield c, self._decode_columns(c, key, (col for col, _ in columns), on_corrupt)
            coarse = group.stop

    def fine_partitions(
        self,
        shard: int,
        conservative: bool,
        min_fine: int,
        max_fine: int,
        on_corrupt: OnCorrupt | None = None,
    ) -> Iterator[int]:
        """Yield, ascending, every fine partition ``min_fine <= F <= max_fine`` listed for the shard and
        strategy."""
        if max_fine < min_fine:
            return
        for _, fines in self.coarse_rows(
            shard, conservative, fine_to_coarse(min_fine), fine_to_coarse(max_fine), on_corrupt
        ):
            for f in fines:
                if min_fine <= f <= max_fine:
                    yield f

    # ----- internals ---------------------------------------------------------------------------------
    @staticmethod
    def _decode_columns(coarse: int, row: bytes, columns: Iterable[bytes], on_corrupt: OnCorrupt) -> list[int]:
        fines = set()
        for col in columns:
            try:
                f = decode_timestamps_column(col)
            except CorruptQueueDataError as exc:
                on_corrupt(SWEEPABLE_TIMESTAMPS, row, col, str(exc))
                continue
            if fine_to_coarse(f) != coarse:
                on_corrupt(
                    SWEEPABLE_TIMESTAMPS,
                    row,
                    col,
                    f"fine partition {f} is not in the row's coarse partition {coarse}",
                )
                continue
            fines.add(f)
        return sorted(fines)

    def _scan(
        self, shard: int, conservative: bool, min_coarse: int, max_coarse: int, on_corrupt: OnCorrupt
    ) -> Iterator[tuple[int, list[int]]]:
        rows: dict[int, tuple[bytes, set[bytes]]] = {}
        for cell, _ts, _value in self.kvs.scan(SWEEPABLE_TIMESTAMPS, page_size=1000):
            try:
                decoded = decode_timestamps_row(cell.row)
            except CorruptQueueDataError:
                continue  # not attributable to any shard; queue_rows_below / operators see it by scanning
            if (
                decoded.shard != shard
                or decoded.conservative != conservative
                or not min_coarse <= decoded.coarse_partition <= max_coarse
            ):
                continue
            rows.setdefault(decoded.coarse_partition, (cell.row, set()))[1].add(cell.col)
        for c in sorted(rows):
            key, columns = rows[c]
            yield c, self._decode_columns(c, key, sorted(columns), on_corrupt)
