"""The three sweep-queue tables: names, write modes, and the exact row/column/value encodings (spec 000).

======================  ==========  ==========================================================================
table                   write mode  contents
======================  ==========  ==========================================================================
``_sweep_cells``        LOGICAL     sweepableCells: one entry per queued write (or a reference to dedicated rows)
``_sweep_timestamps``   LOGICAL     sweepableTimestamps: which fine partitions have a sweepableCells row
``_sweep_progress``     LWT         sweepProgressPerShard: progress per (shard, strategy), and the shard count
======================  ==========  ==========================================================================

Queue cells are written with ``kvs.put`` at Atlas timestamp = the writer's start timestamp; queue rows are
removed with ``kvs.delete_rows`` (one fresh timestamp per call). The progress table is only touched by
``put_unless_exists`` / ``check_and_set`` (``check_and_set`` with ``expected=None`` inserts).

**Row hashing.** Every row key of the three tables is ``H + components`` where
``H = blake2b(components).digest()[:8]`` (BLAKE2b-512, first 8 bytes). Consecutive partitions therefore land
on unrelated Cassandra tokens (no hot spot), and the components stay readable after the prefix, so every
row key can be decoded; a decoder checks the prefix and raises CorruptQueueDataError on a mismatch.

Row components (after the prefix) and columns:

* sweepableCells row: ``VAR_LONG(timestamp_partition) + metadata(4 bytes)`` where timestamp_partition is the
  fine partition for a non-dedicated row and the full start timestamp for a dedicated row.
  Column: ``VAR_LONG(start_ts % 50_000) + VAR_SIGNED_LONG(write_index)``. Value: a
  :mod:`WriteReference <.write_reference>`, or for a reference cell (write_index -1..-64) the
  :func:`dedicated reference value <encode_dedicated_reference>`.
* sweepableTimestamps row: ``VAR_LONG(shard) + VAR_LONG(coarse partition) + (b"\\x00" thorough | b"\\x01"
  conservative)``. Column: ``VAR_LONG(fine partition)``. Value: ``b""``.
* sweepProgressPerShard row: ``VAR_SIGNED_LONG(shard) + (b"\\x00" | b"\\x01")``; named column ``b"v"``;
  value ``VAR_LONG(progress)``. The row ``shard = -1, conservative`` holds the number of shards.

VAR_LONG (of non-negative values) and VAR_SIGNED_LONG are self-delimiting and order preserving, so byte
order of sweepableCells columns is (start timestamp, write_index) order and byte order of
sweepableTimestamps columns is fine-partition order; the reader relies on that for column ranges.

All decoders accept only canonical encodings and raise :class:`~airflow_atlas.errors.CorruptQueueDataError`
for anything else (and :class:`~airflow_atlas.errors.InvalidInputError` when not given bytes).
"""
from __future__ import annotations

import hashlib
from typing import NamedTuple

from ...encoding import LONG_MAX
from ...errors import CorruptQueueDataError, InvalidInputError
from ...kvs.api import Cell
from ...kvs.tables import SweepStrategy, TableMetadata, WriteMode
from ...validation import check_int
from ._varint import read_var_long, read_var_signed_long, var_long, var_signed_long
from .constants import (
    FINE_PARTITION,
    INITIAL_PROGRESS,
    MAX_CELLS_DEDICATED,
    MAX_DEDICATED_ROWS,
    MAX_SHARDS,
    MAX_WRITES_PER_PARTITION,
)
from .metadata import METADATA_SIZE, TargetedSweepMetadata
from .partitions import fine_to_coarse

SWEEPABLE_CELLS = "_sweep_cells"
SWEEPABLE_TIMESTAMPS = "_sweep_timestamps"
SWEEP_PROGRESS = "_sweep_progress"

QUEUE_TABLES: dict[str, TableMetadata] = {
    # The queue itself is never swept (NOTHING): its rows are removed whole by the cleaner.
    SWEEPABLE_CELLS: TableMetadata(strategy=SweepStrategy.NOTHING, write_mode=WriteMode.LOGICAL),
    SWEEPABLE_TIMESTAMPS: TableMetadata(strategy=SweepStrategy.NOTHING, write_mode=WriteMode.LOGICAL),
    SWEEP_PROGRESS: TableMetadata(strategy=SweepStrategy.NOTHING, write_mode=WriteMode.LWT),
}

ROW_HASH_SIZE = 8
PROGRESS_COLUMN = b"v"
NUMBER_OF_SHARDS_SHARD = -1
"""Shard of the distinguished progress row (with conservative=True) that stores the shard count."""
TIMESTAMPS_VALUE = b""
DEDICATED_REFERENCE_VERSION = 1

_FALSE, _TRUE = b"\x00", b"\x01"
_MAX_FINE_PARTITION = LONG_MAX // FINE_PARTITION


# ----- strategy <-> conservative bit ---------------------------------------------------------------------
def conservative_flag(strategy: SweepStrategy | str) -> bool:
    """True for CONSERVATIVE, False for THOROUGH; InvalidInputError for NOTHING (it has no queue)."""
    strategy = SweepStrategy.parse(strategy)
    if not strategy.is_swept:
        raise InvalidInputError("sweep strategy NOTHING has no sweep queue: use CONSERVATIVE or THOROUGH")
    return strategy is SweepStrategy.CONSERVATIVE


def strategy_of_flag(conservative: bool) -> SweepStrategy:
    return SweepStrategy.CONSERVATIVE if conservative else SweepStrategy.THOROUGH


# ----- helpers ----------------------------------------------------------------------------------------------
def _bytes(data: object, what: str) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidInputError(f"{what} must be bytes, got {type(data).__name__}")
    return bytes(data)


_var_long = read_var_long  # canonical decoders: (data, offset, what) -> (value, next offset)
_var_signed_long = read_var_signed_long


def _flag(data: bytes, what: str) -> bool:
    if data == _TRUE:
        return True
    if data == _FALSE:
        return False
    raise CorruptQueueDataError(f"{what}: sweep_conservative must be 0x00 or 0x01, got {data.hex() or 'nothing'}")


def row_hash(components: bytes) -> bytes:
    """The 8-byte anti-hot-spotting prefix of a row with these components."""
    return hashlib.blake2b(components).digest()[:ROW_HASH_SIZE]


def hashed_row(components: bytes) -> bytes:
    """``row_hash(components) + components``."""
    return row_hash(components) + components


def unhash_row(row: bytes, what: str = "queue row") -> bytes:
    """The components of a hashed row key; CorruptQueueDataError when the prefix does not match."""
    row = _bytes(row, what)
    if len(row) <= ROW_HASH_SIZE:
        raise CorruptQueueDataError(f"{what} {row.hex()} is too short for its hash prefix")
    components = row[ROW_HASH_SIZE:]
    if row[:ROW_HASH_SIZE] != row_hash(components):
        raise CorruptQueueDataError(f"{what} {row.hex()} has a wrong hash prefix")
    return components


# ----- sweepableCells -----------------------------------------------------------------------------------------
class CellsRow(NamedTuple):
    """Decoded row of ``_sweep_cells``: fine partition (non-dedicated) or start timestamp (dedicated)."""

    timestamp_partition: int
    metadata: TargetedSweepMetadata


class CellsColumn(NamedTuple):
    """Decoded column of ``_sweep_cells``: write_index < 0 marks a reference to -write_index dedicated rows."""

    timestamp_modulus: int
    write_index: int


def cells_row(timestamp_partition: int, metadata: TargetedSweepMetadata) -> bytes:
    """Row key of ``_sweep_cells``."""
    if not isinstance(metadata, TargetedSweepMetadata):
        raise InvalidInputError(f"metadata must be a TargetedSweepMetadata, got {type(metadata).__name__}")
    hi = LONG_MAX if metadata.dedicated_row else _MAX_FINE_PARTITION
    check_int(timestamp_partition, "timestamp_partition", 0, hi)
    return hashed_row(var_long(timestamp_partition) + metadata.to_bytes())


def non_dedicated_row(fine_partition: int, shard: int, conservative: bool) -> bytes:
    """The non-dedicated ``_sweep_cells`` row of a fine partition, shard and strategy."""
    return cells_row(fine_partition, TargetedSweepMetadata(conservative, False, shard, 0))


def dedicated_row(start_ts: int, shard: int, conservative: bool, ordinal: int) -> bytes:
    """Dedicated row number ``ordinal`` of the transaction ``start_ts`` for a shard and strategy."""
    return cells_row(start_ts, TargetedSweepMetadata(conservative, True, shard, ordinal))


def decode_cells_row(row: bytes) -> CellsRow:
    components = unhash_row(row, "sweepableCells row")
    partition, offset = _var_long(components, 0, "sweepableCells row timestamp_partition")
    if partition < 0:
        raise CorruptQueueDataError(f"sweepableCells row {bytes(row).hex()}: negative timestamp_partition")
    if len(components) - offset != METADATA_SIZE:
        raise CorruptQueueDataError(
            f"sweepableCells row {bytes(row).hex()}: expected {METADATA_SIZE} metadata bytes, "
            f"found {len(components) - offset}"
        )
    metadata = TargetedSweepMetadata.from_bytes(components[offset:])
    if not metadata.dedicated_row and partition > _MAX_FINE_PARTITION:
        raise CorruptQueueDataError(f"sweepableCells row {bytes(row).hex()}: fine partition {partition} too large")
    return CellsRow(partition, metadata)


def cells_column(timestamp_modulus: int, write_index: int) -> bytes:
    """Column of ``_sweep_cells``: ``VAR_LONG(start_ts % 50_000) + VAR_SIGNED_LONG(write_index)``."""
    check_int(timestamp_modulus, "timestamp_modulus", 0, FINE_PARTITION - 1)
    check_int(write_index, "write_index", -MAX_DEDICATED_ROWS, MAX_CELLS_DEDICATED - 1)
    return var_long(timestamp_modulus) + var_signed_long(write_index)


def cells_column_start(timestamp_modulus: int) -> bytes:
    """Byte string that sorts before every column of ``timestamp_modulus`` and after every column of a
    smaller modulus: the inclusive start / exclusive end of a column range. ``timestamp_modulus`` may be
    50_000 (an end bound past the whole row)."""
    check_int(timestamp_modulus, "timestamp_modulus", 0, FINE_PARTITION)
    return var_long(timestamp_modulus)


def decode_cells_column(col: bytes) -> CellsColumn:
    """The decoded column (CorruptQueueDataError when it is not a valid column)."""
    return CellsColumn(*cells_column_fields(col))


def cells_column_fields(col: bytes) -> tuple[int, int]:
    """``(timestamp_modulus, write_index)`` of a column, as a plain tuple (reader hot loop)."""
    # Fast path: a canonical 1-3 byte timestamp modulus and a write index of 0..63 (one byte). Anything
    # else - dedicated references, longer indices, every malformed column - is checked below.
    if type(col) is bytes and col:
        n, b = len(col), col[0]
        if b < 0x80:
            modulus, offset = b, 1
        elif b < 0xC0 and n > 2:
            modulus, offset = ((b & 0x3F) << 8) | col[1], 2
            if modulus < 0x80:
                offset = 0
        elif b < 0xE0 and n > 3:
            modulus, offset = ((b & 0x1F) << 16) | (col[1] << 8) | col[2], 3
            if not 0x4000 <= modulus < FINE_PARTITION:
                offset = 0
        else:
            offset = 0
        if offset and offset + 1 == n and col[offset] & 0xC0 == 0x80:
            return modulus, col[offset] & 0x3F
    return _decode_cells_column_checked(col)


def _decode_cells_column_checked(col: bytes) -> tuple[int, int]:
    col = _bytes(col, "sweepableCells column")
    modulus, offset = _var_long(col, 0, "sweepableCells column timestamp_modulus")
    if not 0 <= modulus < FINE_PARTITION:
        raise CorruptQueueDataError(f"sweepableCells column {col.hex()}: timestamp_modulus {modulus} out of range")
    if offset >= len(col):
        raise CorruptQueueDataError(f"sweepableCells column {col.hex()}: missing write_index")
    index, offset = _var_signed_long(col, offset, "sweepableCells column write_index")
    if offset != len(col):
        raise CorruptQueueDataError(f"sweepableCells column {col.hex()}: {len(col) - offset} trailing bytes")
    if not -MAX_DEDICATED_ROWS <= index < MAX_CELLS_DEDICATED:
        raise CorruptQueueDataError(f"sweepableCells column {col.hex()}: write_index {index} out of range")
    return modulus, index


def encode_dedicated_reference(total_writes: int) -> bytes:
    """Value of a reference cell: ``0x01 + VAR_LONG(total number of writes in the dedicated rows)``.

    The spec leaves the value of a reference cell free (the reference stored a dummy WriteReference);
    storing the count lets the reader notice dedicated rows that are shorter than written."""
    check_int(total_writes, "total_writes", 1, MAX_WRITES_PER_PARTITION)
    return bytes((DEDICATED_REFERENCE_VERSION,)) + var_long(total_writes)


def decode_dedicated_reference(value: bytes) -> int:
    value = _bytes(value, "dedicated reference")
    if not value or value[0] != DEDICATED_REFERENCE_VERSION:
        raise CorruptQueueDataError(f"dedicated reference value {value.hex() or '(empty)'}: unknown format")
    total, offset = _var_long(value, 1, "dedicated reference count")
    if offset != len(value) or not 1 <= total <= MAX_WRITES_PER_PARTITION:
        raise CorruptQueueDataError(f"dedicated reference value {value.hex()}: bad write count")
    return total


# ----- sweepableTimestamps ----------------------------------------------------------------------------------------
class TimestampsRow(NamedTuple):
    """Decoded row of ``_sweep_timestamps``."""

    shard: int
    coarse_partition: int
    conservative: bool


def timestamps_row(shard: int, coarse_partition: int, conservative: bool) -> bytes:
    """Row key of ``_sweep_timestamps`` for a shard, coarse partition and strategy."""
    check_int(shard, "shard", 0, MAX_SHARDS - 1)
    check_int(coarse_partition, "coarse partition", 0, LONG_MAX)
    if not isinstance(conservative, bool):
        raise InvalidInputError("conservative must be a bool")
    return hashed_row(var_long(shard) + var_long(coarse_partition) + (_TRUE if conservative else _FALSE))


def decode_timestamps_row(row: bytes) -> TimestampsRow:
    components = unhash_row(row, "sweepableTimestamps row")
    shard, offset = _var_long(components, 0, "sweepableTimestamps row shard")
    if not 0 <= shard < MAX_SHARDS:
        raise CorruptQueueDataError(f"sweepableTimestamps row {bytes(row).hex()}: shard {shard} out of range")
    if offset >= len(components):
        raise CorruptQueueDataError(f"sweepableTimestamps row {bytes(row).hex()}: truncated")
    partition, offset = _var_long(components, offset, "sweepableTimestamps row timestamp_partition")
    if partition < 0:
        raise CorruptQueueDataError(f"sweepableTimestamps row {bytes(row).hex()}: negative coarse partition")
    return TimestampsRow(shard, partition, _flag(components[offset:], "sweepableTimestamps row"))


def timestamps_column(fine_partition: int) -> bytes:
    """Column of ``_sweep_timestamps``: ``VAR_LONG(fine partition)``."""
    check_int(fine_partition, "fine partition", 0, _MAX_FINE_PARTITION)
    return var_long(fine_partition)


def decode_timestamps_column(col: bytes) -> int:
    col = _bytes(col, "sweepableTimestamps column")
    fine_partition, offset = _var_long(col, 0, "sweepableTimestamps column")
    if offset != len(col):
        raise CorruptQueueDataError(f"sweepableTimestamps column {col.hex()}: trailing bytes")
    if not 0 <= fine_partition <= _MAX_FINE_PARTITION:
        raise CorruptQueueDataError(f"sweepableTimestamps column {col.hex()}: fine partition out of range")
    return fine_partition


def timestamps_cell(shard: int, fine_partition: int, conservative: bool) -> Cell:
    """The ``_sweep_timestamps`` cell announcing the non-dedicated row of ``fine_partition``."""
    return Cell(timestamps_row(shard, fine_to_coarse(fine_partition), conservative), timestamps_column(fine_partition))


# ----- sweepProgressPerShard ----------------------------------------------------------------------------------------
class ProgressRow(NamedTuple):
    """Decoded row of ``_sweep_progress`` (shard -1 with conservative=True is the shard-count row)."""

    shard: int
    conservative: bool


def progress_row(shard: int, conservative: bool) -> bytes:
    check_int(shard, "shard", NUMBER_OF_SHARDS_SHARD, MAX_SHARDS - 1)
    if not isinstance(conservative, bool):
        raise InvalidInputError("conservative must be a bool")
    return hashed_row(var_signed_long(shard) + (_TRUE if conservative else _FALSE))


def progress_cell(shard: int, conservative: bool) -> Cell:
    return Cell(progress_row(shard, conservative), PROGRESS_COLUMN)


NUMBER_OF_SHARDS_CELL = progress_cell(NUMBER_OF_SHARDS_SHARD, True)


def decode_progress_row(row: bytes) -> ProgressRow:
    components = unhash_row(row, "sweepProgress row")
    shard, offset = _var_signed_long(components, 0, "sweepProgress row shard")
    if not NUMBER_OF_SHARDS_SHARD <= shard < MAX_SHARDS:
        raise CorruptQueueDataError(f"sweepProgress row {bytes(row).hex()}: shard {shard} out of range")
    return ProgressRow(shard, _flag(components[offset:], "sweepProgress row"))


def encode_progress_value(value: int) -> bytes:
    """``VAR_LONG(value)``; values are progress timestamps (>= -1) or the shard count."""
    check_int(value, "progress value", INITIAL_PROGRESS, LONG_MAX)
    return var_long(value)


def decode_progress_value(value: bytes) -> int:
    value = _bytes(value, "progress value")
    result, offset = _var_long(value, 0, "progress value")
    if offset != len(value):
        raise CorruptQueueDataError(f"progress value {value.hex()}: trailing bytes")
    if result < INITIAL_PROGRESS:
        raise CorruptQueueDataError(f"progress value {value.hex()}: {result} is below {INITIAL_PROGRESS}")
    return result
