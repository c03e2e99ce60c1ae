"""WriteReference: the value of a ``sweepableCells`` entry - which table and cell were written, and whether
the write was a delete (spec 000). The start timestamp is not stored: it follows from the row and column.

Binary format, version 1 (all lengths canonical VAR_LONGs)::

    0x01                                   format version
    VAR_LONG(len(table)) table (ASCII)     Atlas table name (a valid name, 1..47 characters + "_")
    VAR_LONG(len(row))   row               cell row name  (1..1500 bytes)
    VAR_LONG(len(col))   col               cell column    (1..1500 bytes)
    0x00 | 0x01                            1 = tombstone (delete), 0 = regular write

The encoding is a bijection: :func:`decode_write_reference` accepts exactly the outputs of
:func:`encode_write_reference` and raises :class:`~airflow_atlas.errors.CorruptQueueDataError` for any
other byte string (unknown version, truncation, bad lengths, trailing bytes, invalid names or flag).
"""
from __future__ import annotations

from typing import NamedTuple

from ...errors import CorruptQueueDataError, InvalidInputError
from ...kvs.api import MAX_CELL_NAME_BYTES, Cell, validate_cell
from ...kvs.tables import validate_table_name
from ._varint import read_var_long, var_long
from .write_info import WriteInfo

WRITE_REFERENCE_VERSION = 1
_VERSION = bytes((WRITE_REFERENCE_VERSION,))
_MAX_TABLE_NAME_BYTES = 48
_FLAGS = (b"\x00", b"\x01")
_VERSION_BYTE = bytes((WRITE_REFERENCE_VERSION,))

# Valid table names seen, by their bytes (encode: name -> prefix; decode: bytes -> name). Bounded.
_PREFIXES: dict[str, bytes] = {}
_NAMES: dict[bytes, str] = {}
_CACHE_LIMIT = 4096


class WriteReference(NamedTuple):
    """A queued write without its start timestamp."""

    table: str
    cell: Cell
    is_tombstone: bool

    def at(self, start_ts: int) -> WriteInfo:
        """The WriteInfo of this reference written by the transaction with start timestamp ``start_ts``."""
        return WriteInfo(self.table, self.cell, start_ts, self.is_tombstone)


def _table_prefix(table: str) -> bytes:
    prefix = _PREFIXES.get(table)
    if prefix is None:
        validate_table_name(table)
        name = table.encode("ascii")
        prefix = _VERSION + var_long(len(name)) + name
        if len(_PREFIXES) >= _CACHE_LIMIT:
            _PREFIXES.clear()
        _PREFIXES[table] = prefix
    return prefix


def encode_write_reference(table: str, cell: Cell, is_tombstone: bool) -> bytes:
    """Encode one queued write; raises InvalidInputError for an invalid table name, cell or flag."""
    prefix = _table_prefix(table)
    row, col = validate_cell(cell)
    if is_tombstone is not True and is_tombstone is not False:
        raise InvalidInputError(f"is_tombstone must be a bool, got {type(is_tombstone).__name__}")
    return b"".join((prefix, var_long(len(row)), row, var_long(len(col)), col, _FLAGS[is_tombstone]))


def encode_write_info(write: WriteInfo) -> bytes:
    """:func:`encode_write_reference` of a WriteInfo (its start timestamp is not part of the value)."""
    return encode_write_reference(write.table, write.cell, write.is_tombstone)


def _field(data: bytes, offset: int, what: str, max_len: int) -> tuple[bytes, int]:
    length, start = read_var_long(data, offset, f"write reference {what} length")
    if not 1 <= length <= max_len:
        raise CorruptQueueDataError(f"write reference: {what} length {length} outside 1..{max_len}")
    end = start + length
    if end > len(data):
        raise CorruptQueueDataError(f"write reference: {what} truncated ({len(data) - start} of {length} bytes)")
    return data[start:end], end


def _table_name(raw: bytes) -> str:
    name = _NAMES.get(raw)
    if name is None:
        try:
            name = validate_table_name(raw.decode("ascii"))
        except (UnicodeDecodeError, InvalidInputError) as exc:
            raise CorruptQueueDataError(f"write reference: {exc}") from None
        if len(_NAMES) >= _CACHE_LIMIT:
            _NAMES.clear()
        _NAMES[raw] = name
    return name


def _decode(data: bytes) -> tuple[str, bytes, bytes, bool]:
    # Fast path (reader hot loop): bytes whose three lengths are one-byte VAR_LONGs (names under 128
    # bytes) and well formed; everything else - including every malformed value - takes the checked path.
    if type(data) is bytes and data[:1] == _VERSION_BYTE:
        n = len(data)
        name_len = data[1] if n > 1 else 0
        if 0 < name_len <= _MAX_TABLE_NAME_BYTES:
            p = 2 + name_len
            row_len = data[p] if p < n else 0
            if 0 < row_len < 0x80:
                q = p + 1 + row_len
                col_len = data[q] if q < n else 0
                if 0 < col_len < 0x80 and q + col_len + 2 == n and data[-1] <= 1:
                    name = _NAMES.get(data[2:p])
                    if name is not None:
                        return name, data[p + 1 : q], data[q + 1 : n - 1], data[-1] == 1
    return _decode_checked(data)


def _decode_checked(data: bytes) -> tuple[str, bytes, bytes, bool]:
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
    if flag > 1:
        raise CorruptQueueDataError(f"write reference: tombstone flag must be 0 or 1, got {flag}")
    return _table_name(name), row, col, flag == 1


def decode_write_reference(data: bytes) -> WriteReference:
    """Decode a value written by :func:`encode_write_reference`; CorruptQueueDataError for anything else."""
    table, row, col, tombstone = _decode(data)
    return WriteReference(table, Cell(row, col), tombstone)


def decode_write_info(data: bytes, start_ts: int) -> WriteInfo:
    """``decode_write_reference(data).at(start_ts)`` without the intermediate object (reader hot loop)."""
    table, row, col, tombstone = _decode(data)
    return WriteInfo(table, Cell(row, col), start_ts, tombstone)
