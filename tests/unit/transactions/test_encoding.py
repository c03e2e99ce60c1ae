"""The transactions tables' encodings against spec 004 (v1 table, tickets formulas), plus properties."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_atlas.encoding import LONG_MAX, fixed_long, from_var_long, reverse_bits64, var_long
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.transactions import encoding as enc
from airflow_atlas.transactions.encoding import ABORTED
from airflow_atlas.transactions.encoding import PARTITIONING_QUANTUM as PQ
from airflow_atlas.transactions.encoding import ROWS_PER_QUANTUM as NP

timestamps = st.integers(min_value=0, max_value=LONG_MAX)


@pytest.mark.parametrize(
    "value, encoded",
    [(20, "14"), (33, "21"), (42, "2a"), (3141592, "e02fefd8"), (3141595, "e02fefdb"), (-1, "ff80ffffffffffffffff")],
)
def test_spec_var_long_vectors(value, encoded):
    assert var_long(value).hex() == encoded
    assert from_var_long(bytes.fromhex(encoded)) == value


@pytest.mark.parametrize(
    "start, commit, key, value",
    [
        (20, 33, "14", "21"),
        (28, 42, "1c", "2a"),
        (37, -1, "25", "ff80ffffffffffffffff"),
        (3141592, 3141595, "e02fefd8", "e02fefdb"),
    ],
)
def test_spec_v1_table_rows(start, commit, key, value):
    """The spec's physical _transactions table: key, column1 = 0x74 ('t'), value."""
    cell = enc.v1_cell(start)
    assert cell == Cell(bytes.fromhex(key), b"\x74")
    assert enc.v1_encode_value(commit).hex() == value
    assert enc.v1_start_of(cell) == start
    assert enc.v1_decode_value(bytes.fromhex(value)) == commit


def test_tickets_constants():
    assert (PQ, NP) == (25_000_000, 16)
    assert PQ % NP == 0


@pytest.mark.parametrize("ts", [0, 1, 15, 16, 17, 3141592, PQ - 1, PQ, PQ + 1, 7 * PQ + 123_457, LONG_MAX])
def test_tickets_formulas(ts):
    row = (ts // PQ) * NP + (ts % PQ) % NP
    column = (ts % PQ) // NP
    assert enc.ticket_row_number(ts) == row
    assert enc.ticket_column_number(ts) == column
    cell = enc.v2_cell(ts)
    assert cell.row == fixed_long(reverse_bits64(row))
    assert cell.col == var_long(column)
    # decode as the spec describes: P = R / NP, O1 = C * NP, O2 = R % NP, ts = P * PQ + O1 + O2
    assert (row // NP) * PQ + column * NP + row % NP == ts
    assert enc.v2_start_of(cell) == ts


def test_tickets_spread_consecutive_timestamps_over_rows():
    rows = {enc.v2_encode_row(ts) for ts in range(1000, 1000 + NP)}
    assert len(rows) == NP
    # and the NP rows of one partition are far apart in byte space (bit reversal: distinct leading bytes)
    assert len({r[0] for r in rows}) == NP
    # the next NP timestamps reuse those rows, one column further
    assert enc.v2_cell(1000 + NP).row == enc.v2_cell(1000).row
    assert from_var_long(enc.v2_cell(1000 + NP).col) == from_var_long(enc.v2_cell(1000).col) + 1


def test_v2_values():
    assert enc.v2_encode_value(100, ABORTED) == b""
    assert enc.v2_decode_value(100, b"") == ABORTED
    assert enc.v2_encode_value(3141592, 3141595) == var_long(3)
    assert enc.v2_decode_value(3141592, var_long(3)) == 3141595


@pytest.mark.parametrize("bad", [-1, -5, 1 << 63, "7", 1.5, True])
def test_bad_start_timestamps_rejected(bad):
    with pytest.raises(InvalidInputError):
        enc.v2_cell(bad)
    with pytest.raises(InvalidInputError):
        enc.v1_cell(bad)


@pytest.mark.parametrize("start, commit", [(10, 9), (10, -2), (10, 1 << 63)])
def test_bad_commit_timestamps_rejected(start, commit):
    with pytest.raises(InvalidInputError):
        enc.check_commit_timestamp(start, commit)


def test_v2_start_of_rejects_foreign_cells():
    with pytest.raises(InvalidInputError):
        enc.v2_start_of(Cell(fixed_long(reverse_bits64(3)), var_long(PQ // NP)))


@given(timestamps)
def test_tickets_round_trip(ts):
    assert enc.v2_start_of(enc.v2_cell(ts)) == ts
    assert enc.ticket_timestamp(enc.ticket_row_number(ts), enc.ticket_column_number(ts)) == ts
    assert 0 <= enc.ticket_column_number(ts) < PQ // NP


@given(timestamps, timestamps)
def test_tickets_are_a_bijection(a, b):
    if a != b:
        assert enc.v2_cell(a) != enc.v2_cell(b)


@given(timestamps, st.integers(min_value=0, max_value=LONG_MAX))
def test_v2_value_round_trip(start, delta):
    commit = min(LONG_MAX, start + delta)
    assert enc.v2_decode_value(start, enc.v2_encode_value(start, commit)) == commit
    assert enc.v2_decode_value(start, enc.v2_encode_value(start, ABORTED)) == ABORTED


@given(timestamps, st.one_of(st.just(ABORTED), timestamps))
def test_v1_round_trip(start, commit):
    cell = enc.v1_cell(start)
    assert enc.v1_start_of(cell) == start
    assert enc.v1_decode_value(enc.v1_encode_value(commit)) == commit


@given(timestamps, timestamps)
def test_var_long_preserves_order_of_non_negative_longs(a, b):
    assert (a < b) == (var_long(a) < var_long(b))
    assert (a == b) == (var_long(a) == var_long(b))


@given(timestamps, timestamps)
def test_tickets_order_within_a_row(a, b):
    """Within one row, columns (VAR_LONG offsets) sort like the timestamps: range scans work per row."""
    if enc.ticket_row_number(a) == enc.ticket_row_number(b):
        assert (a < b) == (enc.v2_encode_column(a) < enc.v2_encode_column(b))
