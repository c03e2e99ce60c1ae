"""SweepQueueWriter: puts the writes of a committing transaction into the sweep queue (spec 000,
"Writing to the Sweep Queue"). It is the engine's :class:`~airflow_atlas.sweep.queue.write_info.SweepQueueHook`.

One ``enqueue`` call receives every write of one transaction (so one start timestamp) *before* any of
them is written to the store. It

1. drops writes to tables whose sweep strategy is NOTHING,
2. partitions the rest by (shard, strategy) - shard = :func:`~.shards.shard_for` over the persisted shard
   count, strategy from the table metadata,
3. puts one ``_sweep_timestamps`` cell per partition (kvs call 1),
4. puts the ``_sweep_cells`` cells of the non-dedicated rows (kvs call 2): a partition of <= 50 writes
   gets one cell per write (write_index 0, 1, 2 ...); a larger one gets a single reference cell with
   write_index ``-ceil(n / 100_000)``,
5. puts the dedicated rows of the large partitions (kvs call 3, only when there are any): row
   timestamp_partition = the full start timestamp, metadata dedicated with ordinal ``i // 100_000``,
   write_index ``i % 100_000``.

The order of the calls is the crash-safety argument: a visible ``_sweep_cells`` row always has its
``_sweep_timestamps`` entry, and a dedicated row always has its reference (so the cleaner can find and
delete it). A writer that dies in between leaves a timestamps entry without cells (the reader skips it)
or a reference without (complete) dedicated rows (the reader reports it; the transaction never
committed, because enqueueing precedes the data write). Every cell is deterministic for the same
input, so re-running a failed ``enqueue`` rewrites identical cells.

All ``_sweep_cells`` cells are written at Atlas timestamp = the transaction's start timestamp. The
``_sweep_timestamps`` cell of a fine partition is written at the partition's first timestamp
(``fine * 50_000``) by every transaction of that partition, so it stays ONE version instead of growing a
version per transaction (on Cassandra each version is a clustering row the reader would page through).
That is safe: the cell's value is always empty, the cleaner removes it with a partition tombstone at a
fresh timestamp (above every start timestamp), and no transaction can start in a fine partition after
progress - and so cleaning - has passed it (its start would be below the sweep timestamp).

Caches (both per writer instance, thread-safe enough for CPython: a lost race only costs one extra read):

* table strategy: read once from ``kvs.get_metadata`` and kept for ``strategy_ttl_seconds`` (default 60 s;
  :meth:`SweepQueueWriter.invalidate_caches` drops it). A ``strategy_of`` callable, when given, is used
  instead of the metadata and is not cached by the writer.
* shard count: kept for ``shard_count_ttl_seconds`` (default 5 s). A stale count is harmless: the count
  only grows and the reader visits every shard below the current count, so writes routed with an older,
  smaller count land in shards that are still read.
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from math import ceil

from ...encoding import LONG_MAX
from ...errors import InvalidInputError
from ...kvs.api import Cell, KeyValueService
from ...kvs.consistency import Operation
from ...kvs.tables import SweepStrategy, validate_table_name
from ._varint import var_signed_long
from .constants import (
    FINE_PARTITION,
    MAX_CELLS_DEDICATED,
    MAX_CELLS_GENERIC,
    MAX_DEDICATED_ROWS,
    MAX_WRITES_PER_PARTITION,
)
from .partitions import fine
from .progress import ShardProgress
from .queue_tables import (
    SWEEPABLE_CELLS,
    SWEEPABLE_TIMESTAMPS,
    TIMESTAMPS_VALUE,
    cells_column,
    cells_column_start,
    dedicated_row,
    encode_dedicated_reference,
    non_dedicated_row,
    timestamps_cell,
)
from .shards import shard_for
from .write_info import WriteInfo
from .write_reference import encode_write_reference

StrategyOf = Callable[[str], SweepStrategy]


class SweepQueueWriter:
    """Enqueues the writes of committing transactions (implements ``SweepQueueHook``)."""

    def __init__(
        self,
        kvs: KeyValueService,
        progress: ShardProgress,
        strategy_of: StrategyOf | None = None,
        *,
        shard_count_ttl_seconds: float = 5.0,
        strategy_ttl_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.kvs = kvs
        self.progress = progress
        self._strategy_of = strategy_of
        self._shard_ttl = float(shard_count_ttl_seconds)
        self._strategy_ttl = float(strategy_ttl_seconds)
        self._clock = clock
        self._lock = threading.Lock()
        self._shards: tuple[int, float] | None = None  # (count, read at)
        self._strategies: dict[str, tuple[SweepStrategy, float]] = {}

    # ----- caches -------------------------------------------------------------------------------------
    def invalidate_caches(self) -> None:
        """Forget the cached shard count and table strategies (read again on the next enqueue)."""
        with self._lock:
            self._shards = None
            self._strategies.clear()

    def number_of_shards(self) -> int:
        """The persisted shard count, cached for ``shard_count_ttl_seconds``."""
        now = self._clock()
        cached = self._shards
        if cached is not None and now - cached[1] < self._shard_ttl:
            return cached[0]
        count = self.progress.get_number_of_shards()
        with self._lock:
            self._shards = (count, now)
        return count

    def strategy(self, table: str) -> SweepStrategy:
        """The sweep strategy of ``table`` (``strategy_of`` if given, else cached table metadata)."""
        if self._strategy_of is not None:
            return SweepStrategy.parse(self._strategy_of(table))
        now = self._clock()
        cached = self._strategies.get(table)
        if cached is not None and now - cached[1] < self._strategy_ttl:
            return cached[0]
        strategy = SweepStrategy.parse(self.kvs.get_metadata(table).strategy)
        with self._lock:
            self._strategies[table] = (strategy, now)
        return strategy

    # ----- enqueue ------------------------------------------------------------------------------------
    def enqueue(self, writes: Sequence[WriteInfo]) -> None:
        """Queue all writes of one transaction (same start timestamp) before they are written.

        Raises InvalidInputError for malformed writes, mixed start timestamps, or a (shard, strategy)
        partition of more than 6.4M writes (64 dedicated rows of 100,000); nothing is written then.
        Errors of the store propagate (the transaction must not commit)."""
        writes = list(writes)
        if not writes:
            return
        start_ts = self._validate(writes)
        partitions = self._partition(writes)
        if not partitions:
            return
        timestamp_cells: dict[Cell, bytes] = {}
        row_cells: dict[Cell, bytes] = {}
        dedicated_cells: dict[Cell, bytes] = {}
        fine_partition = fine(start_ts)
        column_prefix = cells_column_start(start_ts % FINE_PARTITION)
        for (shard, conservative), part in sorted(partitions.items()):
            timestamp_cells[timestamps_cell(shard, fine_partition, conservative)] = TIMESTAMPS_VALUE
            row = non_dedicated_row(fine_partition, shard, conservative)
            if len(part) <= MAX_CELLS_GENERIC:
                for index, (_write, value) in enumerate(part):
                    row_cells[Cell(row, column_prefix + var_signed_long(index))] = value
                continue
            rows_needed = ceil(len(part) / MAX_CELLS_DEDICATED)
            row_cells[Cell(row, cells_column(start_ts % FINE_PARTITION, -rows_needed))] = encode_dedicated_reference(
                len(part)
            )
            dedicated = [dedicated_row(start_ts, shard, conservative, ordinal) for ordinal in range(rows_needed)]
            for index, (_write, value) in enumerate(part):
                ordinal, position = divmod(index, MAX_CELLS_DEDICATED)
                dedicated_cells[Cell(dedicated[ordinal], column_prefix + var_signed_long(position))] = value
        self.kvs.put(
            SWEEPABLE_TIMESTAMPS, timestamp_cells, fine_partition * FINE_PARTITION, operation=Operation.QUEUE_WRITE
        )
        self.kvs.put(SWEEPABLE_CELLS, row_cells, start_ts, operation=Operation.QUEUE_WRITE)
        if dedicated_cells:
            self.kvs.put(SWEEPABLE_CELLS, dedicated_cells, start_ts, operation=Operation.QUEUE_WRITE)

    # ----- internals ----------------------------------------------------------------------------------
    @staticmethod
    def _validate(writes: list[WriteInfo]) -> int:
        """Check the WriteInfo type and the common start timestamp (cells and names are checked when
        their values are encoded); returns the start timestamp."""
        start_ts = writes[0].start_ts if isinstance(writes[0], WriteInfo) else None
        for position, write in enumerate(writes):
            if not isinstance(write, WriteInfo):
                raise InvalidInputError(f"write #{position} is a {type(write).__name__}, not a WriteInfo")
            ts = write.start_ts
            if type(ts) is not int or not 0 <= ts < LONG_MAX:
                raise InvalidInputError(f"write #{position}: start timestamp {ts!r} is not a valid timestamp")
            if ts != start_ts:
                raise InvalidInputError(
                    f"all writes of one enqueue call belong to one transaction: start timestamps {start_ts} and {ts}"
                )
        return start_ts

    def _partition(self, writes: list[WriteInfo]) -> dict[tuple[int, bool], list[tuple[WriteInfo, bytes]]]:
        """(shard, conservative) -> [(write, encoded WriteReference)], in input order; NOTHING dropped."""
        strategies: dict[str, SweepStrategy] = {}
        for table in dict.fromkeys(w.table for w in writes):
            validate_table_name(table)
            strategies[table] = self.strategy(table)
        shards = self.number_of_shards()
        partitions: dict[tuple[int, bool], list[tuple[WriteInfo, bytes]]] = defaultdict(list)
        for write in writes:
            strategy = strategies[write.table]
            if not strategy.is_swept:
                continue
            value = encode_write_reference(write.table, write.cell, write.is_tombstone)  # validates
            shard = 0 if shards == 1 else shard_for(write.table, write.cell, shards)
            partitions[(shard, strategy is SweepStrategy.CONSERVATIVE)].append((write, value))
        for (shard, conservative), part in partitions.items():
            if len(part) > MAX_WRITES_PER_PARTITION:
                raise InvalidInputError(
                    f"transaction {writes[0].start_ts} enqueues {len(part):,} writes into shard {shard} "
                    f"({'CONSERVATIVE' if conservative else 'THOROUGH'}); the sweep queue holds at most "
                    f"{MAX_WRITES_PER_PARTITION:,} writes per transaction, shard and strategy "
                    f"({MAX_DEDICATED_ROWS} dedicated rows of {MAX_CELLS_DEDICATED:,}): raise the number of "
                    f"shards or split the transaction"
                )
        return partitions
