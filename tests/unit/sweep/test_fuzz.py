"""Decoders of queue data must never raise anything but CorruptQueueDataError / InvalidInputError."""
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_atlas.errors import CorruptQueueDataError, InvalidInputError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.sweep.queue import queue_tables as q
from airflow_atlas.sweep.queue.metadata import TargetedSweepMetadata
from airflow_atlas.sweep.queue.write_reference import decode_write_reference, encode_write_reference

DECODERS = [
    TargetedSweepMetadata.from_bytes,
    decode_write_reference,
    q.decode_cells_row,
    q.decode_cells_column,
    q.decode_timestamps_row,
    q.decode_timestamps_column,
    q.decode_progress_row,
    q.decode_progress_value,
    q.decode_dedicated_reference,
    q.unhash_row,
]

# ATLAS_FUZZ_EXAMPLES=20000 for a longer local run
SETTINGS = settings(
    max_examples=int(os.environ.get("ATLAS_FUZZ_EXAMPLES", "400")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _only_expected_errors(data: bytes) -> None:
    for decoder in DECODERS:
        try:
            decoder(data)
        except (CorruptQueueDataError, InvalidInputError):
            pass


@SETTINGS
@given(st.binary(max_size=64))
def test_random_bytes(data):
    _only_expected_errors(data)


@SETTINGS
@given(st.binary(min_size=0, max_size=40))
def test_random_components_with_valid_hash_prefix(components):
    # get past the hash check so the component decoders see the garbage
    _only_expected_errors(q.hashed_row(components))


_valid = st.one_of(
    st.builds(lambda f, s, c: q.non_dedicated_row(f, s, c), st.integers(0, 2**40), st.integers(0, 255), st.booleans()),
    st.builds(lambda t, s, c, n: q.dedicated_row(t, s, c, n), st.integers(0, 2**62), st.integers(0, 255),
              st.booleans(), st.integers(0, 63)),
    st.builds(lambda m, i: q.cells_column(m, i), st.integers(0, 49_999), st.integers(-64, 99_999)),
    st.builds(lambda s, c, b: q.timestamps_row(s, c, b), st.integers(0, 255), st.integers(0, 2**40), st.booleans()),
    st.builds(lambda s, c: q.progress_row(s, c), st.integers(-1, 255), st.booleans()),
    st.builds(
        lambda r, c, t: encode_write_reference("tbl_x", Cell(r, c), t),
        st.binary(min_size=1, max_size=300),
        st.binary(min_size=1, max_size=300),
        st.booleans(),
    ),
)


@SETTINGS
@given(_valid, st.data())
def test_mutated_valid_encodings(data, draw):
    mutated = bytearray(data)
    for _ in range(draw.draw(st.integers(1, 4))):
        kind = draw.draw(st.sampled_from(["flip", "cut", "insert"]))
        if kind == "flip" and mutated:
            i = draw.draw(st.integers(0, len(mutated) - 1))
            mutated[i] ^= draw.draw(st.integers(1, 255))
        elif kind == "cut" and mutated:
            del mutated[draw.draw(st.integers(0, len(mutated) - 1)):]
        else:
            mutated.insert(draw.draw(st.integers(0, len(mutated))), draw.draw(st.integers(0, 255)))
    _only_expected_errors(bytes(mutated))
    # and if the hash prefix is fixed up, the component decoders still only raise the expected errors
    if len(mutated) > 8:
        _only_expected_errors(q.hashed_row(bytes(mutated[8:])))


@SETTINGS
@given(st.binary(min_size=1, max_size=200), st.binary(min_size=1, max_size=200), st.booleans())
def test_write_reference_bijection(row, col, tomb):
    data = encode_write_reference("some_table", Cell(row, col), tomb)
    ref = decode_write_reference(data)
    assert encode_write_reference(ref.table, ref.cell, ref.is_tombstone) == data


# ----- the shared encodings, the transactions tables and the reader's entry point --------------------------------
from airflow_atlas import encoding as E  # noqa: E402
from airflow_atlas.sweep.queue.write_reference import decode_write_info  # noqa: E402
from airflow_atlas.transactions import encoding as T  # noqa: E402

OTHER_DECODERS = [
    E.decode_var_long,
    E.from_var_long,
    E.decode_var_signed_long,
    E.from_var_signed_long,
    E.from_fixed_long,
    T.v1_decode_value,
    lambda data: T.v2_decode_value(123_456, data),
    lambda data: decode_write_info(data, 7),
]


@SETTINGS
@given(st.binary(max_size=24))
def test_encoding_and_transactions_decoders_raise_only_their_errors(data):
    for decoder in OTHER_DECODERS:
        try:
            decoder(data)
        except (CorruptQueueDataError, InvalidInputError):
            pass
    for row_len in (8, len(data)):  # _transactions2 cells: the row must be a fixed long
        try:
            start = T.v2_start_of(Cell(data[:row_len], data[row_len:] or b"\x00"))
        except InvalidInputError:
            continue
        assert 0 <= start <= E.LONG_MAX


@SETTINGS
@given(st.integers(E.LONG_MIN, E.LONG_MAX), st.integers(E.LONG_MIN, E.LONG_MAX))
def test_var_long_and_var_signed_long_round_trip_every_long(a, b):
    for value in (a, b):
        assert E.from_var_long(E.var_long(value)) == value
        assert E.from_var_signed_long(E.var_signed_long(value)) == value
        assert E.from_fixed_long(E.fixed_long(value)) == value
    # VAR_SIGNED_LONG sorts like the numbers over all longs (negative ones included)
    assert (a < b) == (E.var_signed_long(a) < E.var_signed_long(b))


@SETTINGS
@given(st.binary(max_size=12), st.integers(0, E.LONG_MAX))
def test_decoded_var_longs_re_encode_to_their_bytes_or_are_non_canonical(data, start):
    """Whatever the reference decoder accepts decodes to a long; a value a transactions table could hold
    decodes to one outcome only."""
    try:
        value, used = E.decode_var_long(data)
    except InvalidInputError:
        return
    assert E.LONG_MIN <= value <= E.LONG_MAX and 1 <= used <= 10
    canonical = E.var_long(value)
    assert canonical == data[:used] or len(canonical) < used  # only longer (non-canonical) forms differ
