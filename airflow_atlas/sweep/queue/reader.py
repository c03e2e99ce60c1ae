"""SweepQueueReader: reads one batch of queued writes of a shard and strategy (spec 000, "Reading from the
Sweep Queue").

``read_batch(shard, strategy, min_exclusive, max_exclusive, batch_limit)``:

1. Find the first fine partition F listed in ``_sweep_timestamps`` with
   ``fine(min_exclusive + 1) <= F <= fine(max_exclusive - 1)``, starting with the coarse partition of
   ``min_exclusive + 1`` and moving up one coarse partition at a time until ``coarse(max_exclusive - 1)``
   is passed (see :mod:`.timestamp_index` for how far jumps are done with a scan). None found: the batch
   has ``fine_partition=None``; there is nothing in ``(min_exclusive, max_exclusive)``.
2. Read the non-dedicated ``_sweep_cells`` row of F, only columns of start timestamps in
   ``[min_exclusive + 1, max_exclusive - 1]`` (a column range, since columns sort by start timestamp),
   page by page (``get_row_columns`` with a limit: a 50,000-transaction row is never loaded whole when
   the batch limit is 10,000). A reference cell (write_index < 0) is replaced by the entries of its
   dedicated rows, each read completely.
3. Stop at the end of the row, at ``max_exclusive``, or at the first cell of a *new* start timestamp once
   ``batch_limit`` entries were read: a start timestamp is never split between batches.

**Empty fine partitions.** A fine partition listed in ``_sweep_timestamps`` whose row has nothing in the
range (a writer died after the timestamps put, or a cleaner died after deleting the cells row) does not
stall the shard: the reader moves on to the next listed partition and records the skipped one in
``SweepBatch.skipped_fine_partitions``.

**Corrupt cells.** Undecodable columns or values are not fatal: each is recorded in
``SweepBatch.corrupt`` (hex of row and column, the reason, the start timestamp when known) and skipped,
so the sweeper can quarantine and alert instead of crashing the shard on every iteration. A fine
partition that holds only corrupt cells is returned (with no entries) rather than skipped, so the
corruption is seen.

**Incomplete references.** A reference whose dedicated rows are missing, or hold fewer entries than it
records, is an expected state after a crash and is *not* corruption: a writer that died while
enqueueing (its transaction never committed and none of its data was written, because enqueueing comes
first), or a cleaner that died after deleting the dedicated rows and before the cells row (the entries
were swept already). Neither leaves data that sweeping must reach, so these are recorded apart, in
``SweepBatch.incomplete_references``, for logging only; the entries that do exist are returned.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, TypeVar

from ...encoding import LONG_MAX
from ...errors import CorruptQueueDataError, InvalidInputError
from ...kvs.api import KeyValueService
from ...kvs.tables import SweepStrategy
from ...validation import check_int
from ._varint import read_var_signed_long
from .constants import (
    DEFAULT_BATCH_LIMIT,
    FINE_PARTITION,
    INITIAL_PROGRESS,
    MAX_BATCH_LIMIT,
    MAX_CELLS_DEDICATED,
    MAX_CELLS_GENERIC,
    MAX_SHARDS,
)
from .partitions import fine
from .queue_tables import (
    SWEEPABLE_CELLS,
    cells_column_fields,
    cells_column_start,
    conservative_flag,
    decode_cells_column,
    decode_dedicated_reference,
    dedicated_row,
    non_dedicated_row,
)
from .timestamp_index import SweepableTimestampsIndex
from .write_info import WriteInfo
from .write_reference import decode_write_info

DEFAULT_PAGE_SIZE = 5_000
"""Most columns asked from the store per ``get_row_columns`` call."""

UNDECODABLE = "undecodable"
MISSING_DEDICATED_ROW = "missing_dedicated_row"
INCOMPLETE_DEDICATED_ROWS = "incomplete_dedicated_rows"


class CorruptQueueCell(NamedTuple):
    """A queue cell the reader could not (fully) use. ``kind`` is ``undecodable`` (column, value or
    timestamps column cannot be decoded; listed in ``SweepBatch.corrupt``), or, for
    ``SweepBatch.incomplete_references``, ``missing_dedicated_row`` (a reference names a dedicated row
    that does not exist) or ``incomplete_dedicated_rows`` (its rows hold fewer entries than recorded).
    A NamedTuple: ``_asdict()`` gives a JSON-able record for quarantine or logs."""

    table: str
    row_hex: str
    col_hex: str | None
    reason: str
    kind: str = UNDECODABLE
    start_ts: int | None = None


@dataclass
class SweepBatch:
    """One batch read from the queue of ``shard``/``strategy`` for start timestamps in
    ``(min_exclusive, max_exclusive)``.

    * ``entries``: the writes, ordered by start timestamp (then write index); all entries of a start
      timestamp are in the same batch.
    * ``fine_partition``: the fine partition the entries come from, None when no partition in range has
      anything (then ``read_to_end`` is True).
    * ``read_to_end``: nothing remains in ``fine_partition`` below ``max_exclusive`` (the row was finished
      or reading stopped at ``max_exclusive``); False when the batch limit stopped reading.
    * ``last_start_ts``: greatest start timestamp among ``entries`` (None when empty).
    * ``entries_read`` = ``len(entries)``; ``dedicated_rows_read``; ``cells_read`` counts every
      ``_sweep_cells`` cell fetched (references and corrupt cells included).
    * ``corrupt``: undecodable cells, skipped (see :class:`CorruptQueueCell`): quarantine and alert.
    * ``incomplete_references``: references with missing or short dedicated rows - benign crash states
      (see the module docstring): log, do not alert.
    * ``skipped_fine_partitions``: listed partitions before ``fine_partition`` that had nothing in range.
    """

    shard: int
    strategy: SweepStrategy
    min_exclusive: int
    max_exclusive: int
    entries: list[WriteInfo] = field(default_factory=list)
    fine_partition: int | None = None
    read_to_end: bool = True
    last_start_ts: int | None = None
    entries_read: int = 0
    dedicated_rows_read: int = 0
    cells_read: int = 0
    corrupt: list[CorruptQueueCell] = field(default_factory=list)
    incomplete_references: list[CorruptQueueCell] = field(default_factory=list)
    skipped_fine_partitions: list[int] = field(default_factory=list)

    @property
    def start_timestamps(self) -> list[int]:
        """Distinct start timestamps of the entries, ascending."""
        return sorted({e.start_ts for e in self.entries})

    @property
    def progress_if_all_swept(self) -> int:
        """The progress the sweeper may persist if every entry of this batch gets swept (spec 000,
        "Calculating Sweep Progress"): ``max_exclusive - 1`` when nothing was found; when the partition
        was read to the end, ``min(max_exclusive, first timestamp of the next fine partition) - 1``;
        otherwise ``last_start_ts``. Never below ``min_exclusive``."""
        if self.fine_partition is None:
            value = self.max_exclusive - 1
        elif self.read_to_end:
            value = min(self.max_exclusive, (self.fine_partition + 1) * FINE_PARTITION) - 1
        else:
            value = self.last_start_ts if self.last_start_ts is not None else self.min_exclusive
        return max(self.min_exclusive, value)


def _check_args(shard: object, strategy: object, min_exclusive: object, max_exclusive: object) -> bool:
    """Validate the common arguments; returns the conservative flag of the strategy."""
    check_int(shard, "shard", 0, MAX_SHARDS - 1)
    conservative = conservative_flag(strategy)  # type: ignore[arg-type]
    for name, value, lo in (("min_exclusive", min_exclusive, INITIAL_PROGRESS), ("max_exclusive", max_exclusive, 0)):
        check_int(value, name, lo, LONG_MAX)
    return conservative


def _column_range(partition: int, lo: int, hi: int) -> tuple[bytes | None, bytes | None]:
    """Column range of a non-dedicated row of ``partition`` holding start timestamps in ``[lo, hi]``."""
    start = cells_column_start(lo % FINE_PARTITION) if fine(lo) == partition else None
    end = cells_column_start(hi % FINE_PARTITION + 1) if fine(hi) == partition else None
    return start, end


class SweepQueueReader:
    """Reads batches of queued writes (see the module docstring)."""

    def __init__(
        self,
        kvs: KeyValueService,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        index: SweepableTimestampsIndex | None = None,
    ):
        if not isinstance(page_size, int) or page_size < MAX_CELLS_GENERIC + 1:
            raise InvalidInputError(f"page_size must be an integer >= {MAX_CELLS_GENERIC + 1}, got {page_size!r}")
        self.kvs = kvs
        self.page_size = page_size
        self.index = index or SweepableTimestampsIndex(kvs)

    def read_batch(
        self,
        shard: int,
        strategy: SweepStrategy | str,
        min_exclusive: int,
        max_exclusive: int,
        batch_limit: int = DEFAULT_BATCH_LIMIT,
    ) -> SweepBatch:
        """Read the next batch of the shard and strategy with start timestamps in
        ``(min_exclusive, max_exclusive)``; see the module docstring."""
        conservative = _check_args(shard, strategy, min_exclusive, max_exclusive)
        check_int(batch_limit, "batch_limit", 1, MAX_BATCH_LIMIT)

        batch = SweepBatch(shard, SweepStrategy.CONSERVATIVE if conservative else SweepStrategy.THOROUGH,
                           min_exclusive, max_exclusive)
        lo, hi = min_exclusive + 1, max_exclusive - 1
        if hi < lo:
            return batch

        def on_corrupt(table: str, row: bytes, col: bytes | None, reason: str) -> None:
            batch.corrupt.append(CorruptQueueCell(table, row.hex(), None if col is None else col.hex(), reason))

        for partition in self.index.fine_partitions(shard, conservative, fine(lo), fine(hi), on_corrupt):
            corrupt_before = len(batch.corrupt)
            self._read_partition(batch, conservative, partition, lo, hi, batch_limit)
            if batch.entries or len(batch.corrupt) > corrupt_before:
                batch.fine_partition = partition
                break
            batch.skipped_fine_partitions.append(partition)
        else:
            batch.read_to_end = True
        batch.entries_read = len(batch.entries)
        batch.last_start_ts = batch.entries[-1].start_ts if batch.entries else None
        return batch

    # ----- internals ---------------------------------------------------------------------------------
    def _read_partition(
        self, batch: SweepBatch, conservative: bool, partition: int, lo: int, hi: int, limit: int
    ) -> None:
        row = non_dedicated_row(partition, batch.shard, conservative)
        start, end = _column_range(partition, lo, hi)
        base = partition * FINE_PARTITION
        entries = batch.entries
        append = entries.append
        last_ts: int | None = None
        cursor = start
        ahead: _Background | None = None
        try:
            while True:
                page_size = min(self.page_size, max(limit - len(entries), 0) + MAX_CELLS_GENERIC + 1)
                page = None
                if ahead is not None:  # waited for even when not used: no read outlives the batch's
                    fetched = ahead.result()
                    page = fetched if ahead.args[2] == cursor and ahead.args[4] == page_size else None
                if page is None:
                    page = self.kvs.get_row_columns(SWEEPABLE_CELLS, row, cursor, end, limit=page_size)
                ahead = None
                if len(page) == page_size and len(entries) + len(page) < limit:
                    # More follows and this page will not fill the batch: fetch the next page while decoding
                    # this one (sized as the next loop would size it if every cell here is one entry).
                    after = page[-1][0] + b"\x00"
                    next_size = min(self.page_size, max(limit - len(entries) - len(page), 0) + MAX_CELLS_GENERIC + 1)
                    ahead = _Background(self.kvs.get_row_columns, (SWEEPABLE_CELLS, row, after, end, next_size))
                batch.cells_read += len(page)
                for col, value in page:
                    try:
                        modulus, write_index = cells_column_fields(col)
                    except CorruptQueueDataError as exc:
                        batch.corrupt.append(CorruptQueueCell(SWEEPABLE_CELLS, row.hex(), col.hex(), str(exc)))
                        continue
                    ts = base + modulus
                    if not lo <= ts <= hi:  # cannot happen with a correct column range; never return it
                        continue
                    if ts != last_ts:
                        if len(entries) >= limit:
                            batch.cells_read -= len(page) - 1 - page.index((col, value))  # the cells after this one: unread
                            batch.read_to_end = False
                            return
                        last_ts = ts
                    if write_index >= 0:
                        try:
                            append(decode_write_info(value.contents, ts))
                        except CorruptQueueDataError as exc:
                            batch.corrupt.append(
                                CorruptQueueCell(SWEEPABLE_CELLS, row.hex(), col.hex(), str(exc), UNDECODABLE, ts)
                            )
                    else:
                        self._read_dedicated(batch, conservative, ts, -write_index, value.contents, row, col)
                if len(page) < page_size:
                    break
                cursor = page[-1][0] + b"\x00"
            batch.read_to_end = True
        finally:
            if ahead is not None:  # a page fetched ahead that the batch did not need (it filled, or an error)
                ahead.result()

    def _read_dedicated(
        self, batch: SweepBatch, conservative: bool, ts: int, rows: int, reference: bytes, row: bytes, col: bytes
    ) -> None:
        total: int | None
        try:
            total = decode_dedicated_reference(reference)
        except CorruptQueueDataError as exc:
            total = None
            batch.corrupt.append(CorruptQueueCell(SWEEPABLE_CELLS, row.hex(), col.hex(), str(exc), UNDECODABLE, ts))
        keys = [dedicated_row(ts, batch.shard, conservative, ordinal) for ordinal in range(rows)]
        found = self.kvs.get_rows_columns(SWEEPABLE_CELLS, keys)
        prefix = cells_column_start(ts % FINE_PARTITION)
        cut = len(prefix)
        entries = batch.entries
        seen = 0
        missing = False
        for ordinal, key in enumerate(keys):
            columns = found.get(key)
            if not columns:
                missing = True
                batch.incomplete_references.append(
                    CorruptQueueCell(
                        SWEEPABLE_CELLS,
                        key.hex(),
                        None,
                        f"transaction {ts} references {rows} dedicated rows but dedicated row {ordinal} is missing "
                        f"(a writer died while enqueueing - that transaction never committed - or a cleaner died "
                        f"after deleting the dedicated rows - those entries were swept)",
                        MISSING_DEDICATED_ROW,
                        ts,
                    )
                )
                continue
            batch.dedicated_rows_read += 1
            batch.cells_read += len(columns)
            seen += len(columns)
            for dcol, dvalue in columns:
                # every column of a dedicated row is VAR_LONG(ts % 50_000) + VAR_SIGNED_LONG(0..99_999)
                try:
                    if dcol[:cut] != prefix:
                        raise CorruptQueueDataError(f"dedicated row column does not belong to start timestamp {ts}")
                    index, end = read_var_signed_long(dcol, cut, "dedicated row write_index")
                    if end != len(dcol) or not 0 <= index < MAX_CELLS_DEDICATED:
                        raise CorruptQueueDataError("dedicated row column has a bad write_index")
                    entries.append(decode_write_info(dvalue.contents, ts))
                except CorruptQueueDataError as exc:
                    batch.corrupt.append(
                        CorruptQueueCell(SWEEPABLE_CELLS, key.hex(), dcol.hex(), str(exc), UNDECODABLE, ts)
                    )
        if total is not None and not missing and seen != total:
            batch.incomplete_references.append(
                CorruptQueueCell(
                    SWEEPABLE_CELLS,
                    row.hex(),
                    col.hex(),
                    f"transaction {ts}: the reference records {total} writes but its dedicated rows hold {seen}",
                    INCOMPLETE_DEDICATED_ROWS,
                    ts,
                )
            )

    # ----- counting (status, sensors, drain forecasts) -----------------------------------------------
    # Additive helpers used by TargetedSweeper.has_sweepable_work / sweepable_entries and
    # airflow_atlas.status. They read only non-dedicated rows: a reference cell's value records how
    # many writes its dedicated rows hold, so counting never opens a dedicated row.

    DEFAULT_COUNT_CAP = 100_000
    """Where backlog counts stop by default (THE home of this cap: status, metrics and the CLI use it)."""
    """Default ``cap`` of :meth:`count_entries`."""

    def _count_range(
        self, shard: int, strategy: SweepStrategy | str, min_exclusive: int, max_exclusive: int | None
    ) -> tuple[bool, int, int]:
        """Validated ``(conservative, lo, hi)`` for the start timestamps ``(min_exclusive, max_exclusive)``
        (``max_exclusive=None``: no upper bound)."""
        check_int(shard, "shard", 0, MAX_SHARDS - 1)
        conservative = conservative_flag(strategy)
        if max_exclusive is None:
            max_exclusive = LONG_MAX
        for name, value, lo in (("min_exclusive", min_exclusive, INITIAL_PROGRESS), ("max_exclusive", max_exclusive, 0)):
            check_int(value, name, lo, LONG_MAX)
        return conservative, min_exclusive + 1, max_exclusive - 1

    @staticmethod
    def _column_bounds(partition: int, lo: int, hi: int) -> tuple[bytes | None, bytes | None]:
        start = cells_column_start(lo % FINE_PARTITION) if fine(lo) == partition else None
        end = cells_column_start(hi % FINE_PARTITION + 1) if fine(hi) == partition else None
        return start, end

    def next_fine_partition(
        self, shard: int, strategy: SweepStrategy | str, min_exclusive: int, max_exclusive: int
    ) -> int | None:
        """The first fine partition holding at least one queue cell (entry, reference or corrupt cell) with
        a start timestamp in ``(min_exclusive, max_exclusive)``, or None when that range is empty. Listed
        partitions whose cells row has nothing in range are passed over, as :meth:`read_batch` does."""
        conservative, lo, hi = self._count_range(shard, strategy, min_exclusive, max_exclusive)
        if hi < lo:
            return None
        for partition in self.index.fine_partitions(shard, conservative, fine(lo), fine(hi)):
            start, end = self._column_bounds(partition, lo, hi)
            row = non_dedicated_row(partition, shard, conservative)
            if self.kvs.get_row_columns(SWEEPABLE_CELLS, row, start, end, limit=1):
                return partition
        return None

    def oldest_start_ts(self, shard: int, strategy: SweepStrategy | str, min_exclusive: int, max_exclusive: int) -> int | None:
        """The smallest start timestamp of a queue cell of the shard and strategy in ``(min_exclusive,
        max_exclusive)`` (one cell read per listed partition), or None when nothing is queued there. An
        undecodable cell counts at its partition's first timestamp in range (work still queued)."""
        conservative, lo, hi = self._count_range(shard, strategy, min_exclusive, max_exclusive)
        if hi < lo:
            return None
        for partition in self.index.fine_partitions(shard, conservative, fine(lo), fine(hi)):
            start, end = self._column_bounds(partition, lo, hi)
            page = self.kvs.get_row_columns(SWEEPABLE_CELLS, non_dedicated_row(partition, shard, conservative), start, end, limit=1)
            if not page:
                continue
            try:
                ts = partition * FINE_PARTITION + decode_cells_column(page[0][0]).timestamp_modulus
            except CorruptQueueDataError:
                return max(lo, partition * FINE_PARTITION)
            return min(max(ts, lo), hi)
        return None

    def count_entries(
        self,
        shard: int,
        strategy: SweepStrategy | str,
        min_exclusive: int,
        max_exclusive: int | None = None,
        cap: int = DEFAULT_COUNT_CAP,
    ) -> int:
        """How many queued writes of the shard and strategy have a start timestamp in
        ``(min_exclusive, max_exclusive)`` (``max_exclusive=None``: no upper bound), counting at most
        ``cap``: the result is ``min(count, cap)``, so ``result == cap`` means "at least cap".

        An inline cell counts 1, a reference cell the number of writes it records; an undecodable cell
        counts 1 (the sweeper will quarantine it, but it is work still queued)."""
        check_int(cap, "cap", 1)
        conservative, lo, hi = self._count_range(shard, strategy, min_exclusive, max_exclusive)
        if hi < lo:
            return 0
        total = 0
        for partition in self.index.fine_partitions(shard, conservative, fine(lo), fine(hi)):
            row = non_dedicated_row(partition, shard, conservative)
            cursor, end = self._column_bounds(partition, lo, hi)
            base = partition * FINE_PARTITION
            while True:
                page = self.kvs.get_row_columns(SWEEPABLE_CELLS, row, cursor, end, limit=self.page_size)
                for col, value in page:
                    try:
                        column = decode_cells_column(col)
                    except CorruptQueueDataError:
                        total += 1
                    else:
                        if not lo <= base + column.timestamp_modulus <= hi:
                            continue
                        if column.write_index >= 0:
                            total += 1
                        else:
                            try:
                                total += decode_dedicated_reference(value.contents)
                            except CorruptQueueDataError:
                                total += 1
                    if total >= cap:
                        return cap
                if len(page) < self.page_size:
                    break
                cursor = page[-1][0] + b"\x00"
        return total


DEFAULT_COUNT_CAP = SweepQueueReader.DEFAULT_COUNT_CAP


T = TypeVar("T")


class _Background(Generic[T]):
    """``fn(*args)`` run in a daemon thread; :meth:`result` waits and returns its value, or None when it
    raised (the caller then does the work in the foreground and meets the error there)."""

    def __init__(self, fn: Callable[..., T], args: tuple[object, ...]) -> None:
        self.args = args
        self._fn = fn
        self._value: T | None = None
        self._done = threading.Event()
        threading.Thread(target=self._run, name="atlas-sweep-read-ahead", daemon=True).start()

    def _run(self) -> None:
        try:
            self._value = self._fn(*self.args)
        except BaseException:  # noqa: BLE001 - redone in the foreground, where the error surfaces
            self._value = None
        finally:
            self._done.set()

    def result(self) -> T | None:
        self._done.wait()
        return self._value


class BatchReadAhead:
    """One :meth:`SweepQueueReader.read_batch` started early in a background thread (read-ahead), so the
    next batch's queue reads overlap the current batch's deletes.

    ``key`` names the exact read (the caller's identity of the run, shard, strategy, min/max exclusive,
    batch limit); :meth:`take` returns the batch only for exactly that key, else None (the caller reads
    normally). A read-ahead that failed is also None: the caller then reads at the usual time and sees any
    error there, so errors surface exactly as without read-ahead. Nothing is written by a read-ahead."""

    def __init__(self, reader: SweepQueueReader, key: tuple, args: tuple):
        self.key = key
        self._read = _Background(reader.read_batch, args)

    def take(self, key: tuple) -> SweepBatch | None:
        """The batch read ahead when ``key`` is the key it was started with, else None; waits for the read
        either way (:meth:`wait`)."""
        batch = self._read.result()
        return batch if key == self.key else None

    def wait(self) -> None:
        """Wait until the read has ended (its batch is dropped): no read of a run may outlive the run, whose
        store may be closed next - an embedded store's connection closed under a running read crashed the
        process (a segmentation fault in sqlite3, a clean-clone test run of 2026-11-27)."""
        self._read.result()
