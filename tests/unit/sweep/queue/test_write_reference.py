import pytest

from airflow_atlas.errors import CorruptQueueDataError, InvalidInputError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.sweep.queue.write_info import WriteInfo
from airflow_atlas.sweep.queue.write_reference import (
    WriteReference,
    decode_write_reference,
    encode_write_info,
    encode_write_reference,
)


def test_exact_encoding():
    data = encode_write_reference("t1", Cell(b"r", b"cc"), True)
    assert data == b"\x01" + b"\x02t1" + b"\x01r" + b"\x02cc" + b"\x01"
    assert encode_write_reference("t1", Cell(b"r", b"cc"), False)[-1] == 0


@pytest.mark.parametrize(
    "table, row, col, tomb",
    [
        ("a", b"\x00", b"\xff", False),
        ("_internal_table", b"row" * 100, b"c", True),
        ("x" * 47, b"\x00" * 1500, b"\xff" * 1500, True),
        ("t", bytes(range(256)), bytes(range(255, -1, -1)), False),
    ],
)
def test_round_trip(table, row, col, tomb):
    data = encode_write_reference(table, Cell(row, col), tomb)
    assert decode_write_reference(data) == WriteReference(table, Cell(row, col), tomb)
    info = WriteInfo(table, Cell(row, col), 123, tomb)
    assert encode_write_info(info) == data
    assert decode_write_reference(data).at(123) == info


def test_compact():
    # 1 version + 3 one-byte lengths + names + 1 flag
    assert len(encode_write_reference("tbl", Cell(b"row1", b"c"), False)) == 1 + 3 + 3 + 4 + 1 + 1


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x02\x02t1\x01r\x02cc\x01",  # unknown version
        b"\x01\x02t1\x01r\x02cc",  # no flag
        b"\x01\x02t1\x01r\x02cc\x02",  # bad flag
        b"\x01\x02t1\x01r\x02cc\x01\x00",  # trailing
        b"\x01\x02t1\x01r\x05cc\x01",  # length past the end
        b"\x01\x02T1\x01r\x02cc\x01",  # invalid table name
        b"\x01\x00\x01r\x02cc\x01",  # empty table name
        b"\x01\x02t1\x00\x02cc\x01",  # empty row
        b"\x01\x80\x02t1\x01r\x02cc\x01",  # non-canonical length
        b"\x01\x02\xff\xfe\x01r\x02cc\x01",  # not ascii
        b"\x01\xff\x80\xff\xff\xff\xff\xff\xff\xff\xff",  # negative length
    ],
)
def test_decode_rejects_garbage(data):
    with pytest.raises(CorruptQueueDataError):
        decode_write_reference(data)


@pytest.mark.parametrize(
    "args",
    [("Bad", Cell(b"r", b"c"), False), ("t", Cell(b"", b"c"), False), ("t", Cell(b"r", b"c"), 1),
     ("t", Cell(b"r" * 1501, b"c"), False), ("t", ("r", "c"), False)],
)
def test_encode_validates(args):
    with pytest.raises(InvalidInputError):
        encode_write_reference(*args)


def test_fast_path_agrees_with_the_checked_decoder():
    """The reader's fast path (short names, cached table) returns what the checked decoder returns and
    lets every malformed value through to it: single-byte mutations of valid encodings, both paths."""
    import random

    from airflow_atlas.sweep.queue import write_reference as wr

    rng = random.Random(7)
    valid = [
        encode_write_reference(t, Cell(r, c), f)
        for t, r, c, f in [("t1", b"r", b"cc", True), ("orders", b"row-17", b"col", False), ("x" * 47, b"\x00", b"\x80", True)]
        + [("t1", b"r" * 127, b"c" * 127, False), ("t1", b"r" * 128, b"c", False)]
    ]
    for data in valid:
        wr._decode_checked(data)  # caches the table name: the fast path is live from here on

    def outcome(fn, data):
        try:
            return fn(data)
        except CorruptQueueDataError:
            return "corrupt"

    cases = list(valid)
    for _ in range(3000):
        data = bytearray(rng.choice(valid))
        i = rng.randrange(len(data))
        data[i] = rng.choice([0, 1, 2, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        if rng.random() < 0.2:
            data = data[: rng.randrange(len(data) + 1)] if rng.random() < 0.5 else data + b"\x00"
        cases.append(bytes(data))
    for data in cases:
        assert outcome(wr._decode, data) == outcome(wr._decode_checked, data), data
    for data in valid:
        assert wr._decode(data) == wr._decode_checked(data) != "corrupt"
