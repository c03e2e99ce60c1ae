"""WriteReference: the value of a ``sweepableCells`` entry - which table and cell were written, and whether
the write was a delete (spec 000). The start timestamp is not stored: it follows from the row and column.

Binary format, version 1 (all lengths canonical VAR_LONGs)::

    0x01                                   format version
    VAR_LONG(len(table)) table (UTF-8)     Atlas table name
    VAR_LONG(len(row))   row               cell row name  (1..1500 bytes)
    VAR_LONG(len(col))   col               cell column    (1..1500 bytes)
    0x00 | 0x01                            1 = tombstone (delete), 0 = regular write

The encoding is a bijection: :func:`decode_write_reference` accepts exactly the outputs of
:func:`encode_write_reference` and raises :class:`~airflow_atlas.errors.CorruptQueueDataError` for any
other byte string (unknown version, truncation, bad lengths, trailing bytes, invalid names or flag).
"""
from __future__ import annotations

from typing import NamedTuple

from ..encoding import decode_var_long, encode_var_long
from ..errors import CorruptQueueDataError, InvalidInputError
from ..kvs.api import MAX_CELL_NAME_BYTES, Cell, validate_cell, validate_table_name
from .write_info import WriteInfo

WRITE_REFERENCE_VERSION = 1
_MAX_TABLE_NAME_BYTES = 48


class WriteReference(NamedTuple):
    """A queued write without its start timestamp."""

    table: str
    cell: Cell
    is_tombstone: bool

    def at(self, start_ts: int) -> WriteInfo:
        """The WriteInfo of this reference written by the transaction with start timestamp ``start_ts``."""
        return WriteInfo(self.table, self.cell, start_ts, self.is_tombstone)


def encode_write_reference(table: str, cell: Cell, is_tombstone: bool) -> bytes:
    """Encode one queued write; raises InvalidInputError for an invalid table name, cell or flag."""
    validate_table_name(table)
    row, col = validate_cell(cell)
    if not isinstance(is_tombstone, bool):
        raise InvalidInputError(f"is_tombstone must be a bool, got {type(is_tombstone).__name__}")
    name = table.encode("ascii")
    return b"".join(
        (
            bytes((WRITE_REFERENCE_VERSION,)),
            encode_var_long(len(name)),
            name,
            encode_var_long(len(row)),
            row,
            encode_var_long(len(col)),
            col,
            b"\x01" if is_tombstone else b"\x00",
        )
    )


def encode_write_info(write: WriteInfo) -> bytes:
    """:func:`encode_write_reference` of a WriteInfo (its start timestamp is not part of the value)."""
    return encode_write_reference(write.table, write.cell, write.is_tombstone)


def _field(data: bytes, offset: int, what: str, max_len: int) -> tuple[bytes, int]:
    try:
        length, used = decode_var_long(data, offset)
    except InvalidInputError as exc:
        raise CorruptQueueDataError(f"write reference: bad {what} length: {exc}") from None
    if length < 0 or length > max_len:
        raise CorruptQueueDataError(f"write reference: {what} length {length} outside 0..{max_len}")
    if used != len(encode_var_long(length)):
        raise CorruptQueueDataError(f"write reference: non-canonical {what} length")
    start = offset + used
    end = start + length
    if end > len(data):
        raise CorruptQueueDataError(f"write reference: {what} truncated ({len(data) - start} of {length} bytes)")
    return data[start:end], end


def decode_write_reference(data: bytes) -> WriteReference:
    """Decode a value written by :func:`encode_write_reference`; CorruptQueueDataError for anything else."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidInputError(f"write reference must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if not data:
        raise CorruptQueueDataError("write reference: empty value")
    if data[0] != WRITE_REFERENCE_VERSION:
        raise CorruptQueueDataError(f"write reference: unknown format version {data[0]}")
    name, offset = _field(data, 1, "table name", _MAX_TABLE_NAME_BYTES)
    row, offset = _field(data, offset, "row", MAX_CELL_NAME_BYTES)
    col, offset = _field(data, offset, "column", MAX_CELL_NAME_BYTES)
    if offset + 1 != len(data):
        raise CorruptQueueDataError(
            f"write reference: expected 1 flag byte at offset {offset}, found {len(data) - offset} bytes"
        )
    flag = data[offset]
    if flag not in (0, 1):
        raise CorruptQueueDataError(f"write reference: tombstone flag must be 0 or 1, got {flag}")
    try:
        table = validate_table_name(name.decode("ascii"))
        cell = validate_cell(Cell(row, col))
    except (UnicodeDecodeError, InvalidInputError) as exc:
        raise CorruptQueueDataError(f"write reference: {exc}") from None
    return WriteReference(table, cell, flag == 1)
