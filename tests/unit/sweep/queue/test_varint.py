"""The queue's VAR_LONG / VAR_SIGNED_LONG fast paths agree with airflow_atlas.encoding."""
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_atlas.encoding import encode_var_long, encode_var_signed_long
from airflow_atlas.errors import CorruptQueueDataError
from airflow_atlas.sweep.queue._varint import read_var_long, read_var_signed_long, var_long, var_signed_long

LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
EDGES = sorted(
    {v for k in range(0, 64) for v in ((1 << k) - 1, 1 << k, (1 << k) + 1)} | {0, 50_000, 100_000, LONG_MAX}
)


def _values():
    rng = random.Random(3)
    yield from range(0, 1 << 15)
    yield from (v for v in EDGES if v <= LONG_MAX)
    yield from (rng.randrange(0, 1 << 22) for _ in range(20_000))
    yield from (rng.randrange(0, LONG_MAX) for _ in range(2_000))


def test_encoders_match_reference():
    for v in _values():
        assert var_long(v) == encode_var_long(v), v
        assert var_signed_long(v) == encode_var_signed_long(v), v
    for v in (-1, -2, -64, -65, LONG_MIN, LONG_MIN + 1):
        assert var_long(v) == encode_var_long(v)
        assert var_signed_long(v) == encode_var_signed_long(v)


def test_decoders_match_reference():
    for v in _values():
        data = b"\x07" + encode_var_long(v) + b"\x09"
        assert read_var_long(data, 1, "x") == (v, len(data) - 1)
        data = b"\x07" + encode_var_signed_long(v) + b"\x09"
        assert read_var_signed_long(data, 1, "x") == (v, len(data) - 1)
    for v in (-1, -64, -65, -100_000, LONG_MIN):
        data = encode_var_signed_long(v)
        assert read_var_signed_long(data, 0, "x") == (v, len(data))
        assert read_var_long(encode_var_long(v), 0, "x") == (v, 10)


@pytest.mark.parametrize(
    "reader, data",
    [
        (read_var_long, b""),
        (read_var_long, b"\x80"),
        (read_var_long, b"\x80\x05"),  # 5 in two bytes
        (read_var_long, b"\xc0\x00\x10"),  # 16 in three bytes
        (read_var_long, b"\xc0\x01"),
        (read_var_signed_long, b""),
        (read_var_signed_long, b"\xc0"),
        (read_var_signed_long, b"\xc0\x05"),  # 5 in two bytes
        (read_var_signed_long, b"\xe0\x00\x05"),
        (read_var_signed_long, b"\xe0\x00"),
    ],
)
def test_decoders_reject_truncated_and_non_canonical(reader, data):
    with pytest.raises(CorruptQueueDataError):
        reader(data, 0, "x")


@settings(max_examples=2000, deadline=None)
@given(st.binary(min_size=1, max_size=12))
def test_decoders_never_disagree_with_reference(data):
    for reader, encoder in ((read_var_long, encode_var_long), (read_var_signed_long, encode_var_signed_long)):
        try:
            value, end = reader(data, 0, "x")
        except CorruptQueueDataError:
            continue
        assert encoder(value) == data[:end]
