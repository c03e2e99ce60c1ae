"""Decoding of transactions-table entries (transactions/service.py): garbage or impossible values raise
CorruptTransactionDataError naming the table and the start timestamp, and are never taken for a commit."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_atlas.encoding import LONG_MAX, var_long
from airflow_atlas.errors import CorruptTransactionDataError
from airflow_atlas.transactions import encoding as enc
from airflow_atlas.transactions.service import TransactionServiceV1, TransactionServiceV2

V1 = TransactionServiceV1(None)  # _decode does no I/O
V2 = TransactionServiceV2(None)


def v1(start, raw):
    return V1._decode(start, raw, enc.v1_decode_value)


def v2(start, raw):
    return V2._decode(start, raw, lambda value: enc.v2_decode_value(start, value))


def test_valid_entries_decode():
    assert v1(10, var_long(12)) == 12 and v1(10, var_long(10)) == 10 and v1(10, var_long(-1)) == -1
    assert v2(10, var_long(2)) == 12 and v2(10, b"") == -1


@pytest.mark.parametrize(
    "decode, raw, words",
    [
        (v1, b"\xc0", "cannot be decoded"),  # truncated VAR_LONG
        (v1, b"", "cannot be decoded"),
        (v1, var_long(7) + b"\x00", "cannot be decoded"),  # trailing bytes
        (v1, var_long(-5), "decodes to -5"),  # negative but not ABORTED: was taken for a commit
        (v1, var_long(3), "decodes to 3"),  # below the start timestamp: was taken for a commit
        (v2, b"\xff\xff\xff", "cannot be decoded"),
        (v2, var_long(LONG_MAX), "decodes to"),  # start + delta overflows a long
    ],
)
def test_garbage_names_table_and_start_timestamp(decode, raw, words):
    with pytest.raises(CorruptTransactionDataError) as info:
        decode(1000, raw)
    text = str(info.value)
    assert "start timestamp 1000" in text and words in text
    assert ("_transactions2" if decode is v2 else "_transactions:") in text


@settings(max_examples=300, deadline=None)
@given(st.integers(0, LONG_MAX), st.binary(max_size=12))
def test_any_bytes_decode_to_a_possible_outcome_or_a_clear_error(start, raw):
    for decode in (v1, v2):
        try:
            commit = decode(start, raw)
        except CorruptTransactionDataError as exc:
            assert f"start timestamp {start}" in str(exc)
        else:
            assert commit == -1 or start <= commit <= LONG_MAX


@pytest.mark.parametrize("service, cell_of", [(V1, enc.v1_cell), (V2, enc.v2_cell)])
def test_the_error_names_the_cell_and_what_to_do(service, cell_of):
    """Issue 16 item 9: the corrupt entry is named (transaction and cell) with what to do, as attributes
    too (for history and status)."""
    with pytest.raises(CorruptTransactionDataError) as info:
        service.decode_entry(25_000_017, b"\xff\xff\xff")
    exc, cell = info.value, cell_of(25_000_017)
    assert exc.start_ts == 25_000_017 and exc.table == service.table
    assert (exc.row_hex, exc.col_hex, exc.value_hex) == (cell.row.hex(), cell.col.hex(), "ffffff")
    assert cell.row.hex() in str(exc) and "What to do" in str(exc) and "atlas-sweep verify" in str(exc)
    assert exc.to_json()["start_ts"] == 25_000_017
