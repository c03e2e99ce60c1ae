"""What an Atlas table holds: versioned cells ``(row bytes, column bytes, timestamp int, value bytes)``.

The timestamp is the Atlas (logical) timestamp: the start timestamp of the transaction that wrote the cell,
or -1 for a garbage-collection sentinel (an empty value); LWT and WALLCLOCK cells live at -1 too. A leaf of
``kvs/`` (only the errors below it), so the argument checks (:mod:`._common`) and the contract
(:mod:`.api`, which re-exports every name here) both build on it.
"""
from __future__ import annotations

from typing import NamedTuple

from ..errors import InvalidInputError

SENTINEL_TIMESTAMP = -1
"""Atlas timestamp of a garbage-collection sentinel (an empty value)."""

LWT_TIMESTAMP = -1
"""``column2`` of every cell of an LWT table (as the spec's ``_transactions`` table does)."""

MAX_TIMESTAMP = (1 << 63) - 1
MAX_CELL_NAME_BYTES = 1500
"""Row and column names are each limited; a Cell persists in at most ~3,000 bytes (spec 000)."""
MAX_VALUE_BYTES = 8 * 1024 * 1024
"""Largest single value; Cassandra rejects mutations over half a 32 MiB commitlog segment."""


class Cell(NamedTuple):
    row: bytes
    col: bytes


class Value(NamedTuple):
    timestamp: int
    contents: bytes


class ScanRange(NamedTuple):
    """An opaque slice of a table's rows for scans and parallel legacy sweep.

    Cassandra: ``kind == "token"``, ``start`` exclusive and ``end`` inclusive Murmur3 tokens (ints).
    Embedded: ``kind == "key"``, ``start`` inclusive and ``end`` exclusive row keys (bytes, ``None`` = open).
    """

    kind: str
    start: object
    end: object


def validate_cell(cell: Cell) -> Cell:
    # Fast path for the hot loops (sweep, commits): an exact Cell of valid bytes is returned as it is.
    if type(cell) is Cell:
        row, col = cell
        if (
            type(row) is bytes
            and type(col) is bytes
            and 0 < len(row) <= MAX_CELL_NAME_BYTES
            and 0 < len(col) <= MAX_CELL_NAME_BYTES
        ):
            return cell
    if not isinstance(cell, tuple) or len(cell) != 2:
        raise InvalidInputError(f"a cell is a (row, column) pair of bytes, got {cell!r}")
    row, col = cell
    if not isinstance(row, (bytes, bytearray)) or not isinstance(col, (bytes, bytearray)):
        raise InvalidInputError(f"cell row and column must be bytes, got {type(row).__name__}/{type(col).__name__}")
    if not row or not col:
        raise InvalidInputError("cell row and column must not be empty")
    if len(row) > MAX_CELL_NAME_BYTES or len(col) > MAX_CELL_NAME_BYTES:
        raise InvalidInputError(f"cell names are limited to {MAX_CELL_NAME_BYTES} bytes each")
    return Cell(bytes(row), bytes(col))


def validate_value(value: bytes, *, what: str = "value") -> bytes:
    if not isinstance(value, (bytes, bytearray)):
        raise InvalidInputError(f"{what} must be bytes, got {type(value).__name__}")
    if len(value) > MAX_VALUE_BYTES:
        raise InvalidInputError(f"{what} of {len(value)} bytes exceeds the limit of {MAX_VALUE_BYTES} bytes")
    return bytes(value)
