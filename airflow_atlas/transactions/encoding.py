"""Pure byte encodings of the transactions tables (spec 004).

``_transactions`` (v1): row ``VAR_LONG(start)``, column ``b"t"``, value ``VAR_LONG(commit)`` with ``-1`` for an
aborted transaction.

``_transactions2`` (v2, "tickets"): the positive longs are cut into partitions of ``PQ`` timestamps, each spread
over ``NP`` rows so that consecutive start timestamps land in different rows (no hot-spotting):

* row    = ``fixed_long(reverse_bits64((ts // PQ) * NP + (ts % PQ) % NP))``
* column = ``VAR_LONG((ts % PQ) // NP)``
* value  = ``VAR_LONG(commit - start)`` for a commit, the empty byte string for an abort.

Nothing here touches a store; :mod:`airflow_atlas.transactions.service` does the I/O.
"""
from __future__ import annotations

from ..encoding import (
    LONG_MAX,
    fixed_long,
    from_fixed_long,
    from_var_long,
    reverse_bits64,
    var_long,
)
from ..errors import InvalidInputError
from ..kvs.api import Cell
from ..validation import check_int

ABORTED = -1
"""Commit timestamp recorded for a transaction that was rolled back."""

# ----- v1 ----------------------------------------------------------------------------------------------
V1_COLUMN = b"t"

# ----- v2 (tickets) -------------------------------------------------------------------------------------
PARTITIONING_QUANTUM = 25_000_000
"""PQ: timestamps per partition."""
ROWS_PER_QUANTUM = 16
"""NP: rows each partition is spread over."""


def check_start_timestamp(start: int) -> int:
    """Start timestamps are non-negative longs (the tickets encoding is defined for them only)."""
    return check_int(start, "start timestamp", 0, LONG_MAX)


def check_commit_timestamp(start: int, commit: int) -> int:
    """A commit timestamp is ABORTED (-1) or a long at or above the start timestamp."""
    check_int(commit, "commit timestamp")
    if commit != ABORTED and not start <= commit <= LONG_MAX:
        raise InvalidInputError(
            f"commit timestamp {commit} of transaction {start} must be -1 (aborted) or in {start}..{LONG_MAX}"
        )
    return commit


# ----- v1 ----------------------------------------------------------------------------------------------
def v1_cell(start: int) -> Cell:
    return Cell(var_long(check_start_timestamp(start)), V1_COLUMN)


def v1_start_of(cell: Cell) -> int:
    """Decode the start timestamp a ``_transactions`` cell stands for (InvalidInputError for anything else)."""
    start = from_var_long(cell.row)
    if start < 0 or cell.col != V1_COLUMN:
        raise InvalidInputError(f"not a _transactions cell: row {cell.row.hex()} column {cell.col.hex()}")
    return start


def v1_encode_value(commit: int) -> bytes:
    return var_long(commit)


def v1_decode_value(value: bytes) -> int:
    return from_var_long(value)


# ----- v2 ----------------------------------------------------------------------------------------------
def ticket_row_number(ts: int) -> int:
    """The logical row R of a start timestamp: ``(ts // PQ) * NP + (ts % PQ) % NP``."""
    check_start_timestamp(ts)
    return (ts // PARTITIONING_QUANTUM) * ROWS_PER_QUANTUM + (ts % PARTITIONING_QUANTUM) % ROWS_PER_QUANTUM


def ticket_column_number(ts: int) -> int:
    """The logical column C of a start timestamp: ``(ts % PQ) // NP``."""
    check_start_timestamp(ts)
    return (ts % PARTITIONING_QUANTUM) // ROWS_PER_QUANTUM


def ticket_timestamp(row_number: int, column_number: int) -> int:
    """Inverse of (row, column): ``(R // NP) * PQ + C * NP + R % NP``."""
    return (
        (row_number // ROWS_PER_QUANTUM) * PARTITIONING_QUANTUM
        + column_number * ROWS_PER_QUANTUM
        + row_number % ROWS_PER_QUANTUM
    )


def v2_encode_row(ts: int) -> bytes:
    return fixed_long(reverse_bits64(ticket_row_number(ts)))


def v2_encode_column(ts: int) -> bytes:
    return var_long(ticket_column_number(ts))


def v2_cell(start: int) -> Cell:
    return Cell(v2_encode_row(start), v2_encode_column(start))


def v2_start_of(cell: Cell) -> int:
    """Decode the start timestamp a ``_transactions2`` cell stands for."""
    row_number = reverse_bits64(from_fixed_long(cell.row))
    column_number = from_var_long(cell.col)
    if row_number < 0 or not 0 <= column_number < PARTITIONING_QUANTUM // ROWS_PER_QUANTUM:
        raise InvalidInputError(f"not a _transactions2 cell: row {cell.row.hex()} column {cell.col.hex()}")
    ts = ticket_timestamp(row_number, column_number)
    if ts > LONG_MAX:  # a row number no start timestamp has (e.g. garbage): not a timestamp at all
        raise InvalidInputError(f"not a _transactions2 cell: row {cell.row.hex()} stands for no timestamp")
    return ts


def v2_encode_value(start: int, commit: int) -> bytes:
    check_commit_timestamp(start, commit)
    if commit == ABORTED:
        return b""
    return var_long(commit - start)


def v2_decode_value(start: int, value: bytes) -> int:
    if value == b"":
        return ABORTED
    return start + from_var_long(value)
