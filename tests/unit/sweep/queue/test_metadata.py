import itertools

import pytest

from airflow_atlas.errors import CorruptQueueDataError, InvalidInputError
from airflow_atlas.sweep.queue.metadata import TargetedSweepMetadata as M


def test_bit_layout_examples():
    assert M(False, False, 0, 0).to_bytes() == bytes([0, 0, 0, 0])
    assert M(True, False, 0, 0).to_bytes() == bytes([0b1000_0000, 0, 0, 0])
    assert M(False, True, 0, 0).to_bytes() == bytes([0b0100_0000, 0, 0, 0])
    # shard 255 = 0b11111111: top six bits in byte 0, low two at the top of byte 1
    assert M(False, False, 255, 0).to_bytes() == bytes([0b0011_1111, 0b1100_0000, 0, 0])
    assert M(False, False, 1, 0).to_bytes() == bytes([0, 0b0100_0000, 0, 0])
    assert M(False, False, 4, 0).to_bytes() == bytes([0b0000_0001, 0, 0, 0])
    assert M(False, True, 0, 63).to_bytes() == bytes([0b0100_0000, 0b0011_1111, 0, 0])
    assert M(True, True, 0b1010_0110, 0b10_1101).to_bytes() == bytes([0b1110_1001, 0b1010_1101, 0, 0])


def test_exhaustive_round_trip():
    seen = set()
    for conservative, dedicated, shard in itertools.product((False, True), (False, True), range(256)):
        for number in range(64) if dedicated else (0,):
            meta = M(conservative, dedicated, shard, number)
            data = meta.to_bytes()
            assert len(data) == 4 and data[2:] == b"\x00\x00"
            assert data[0] == (conservative << 7) | (dedicated << 6) | (shard >> 2)
            assert data[1] == ((shard & 3) << 6) | number
            assert M.from_bytes(data) == meta
            seen.add(data)
    assert len(seen) == 2 * 256 * (1 + 64)


def test_every_two_byte_prefix_decodes_or_is_rejected():
    for b0, b1 in itertools.product(range(256), repeat=2):
        data = bytes([b0, b1, 0, 0])
        dedicated = bool(b0 & 0x40)
        if not dedicated and b1 & 0x3F:
            with pytest.raises(CorruptQueueDataError):
                M.from_bytes(data)
        else:
            assert M.from_bytes(data).to_bytes() == data


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\x00\x00\x00", b"\x00\x00\x00\x00\x00", b"\x00\x00\x00\x01", b"\x00\x00\x80\x00",
     b"\x00\x01\x00\x00"],
)
def test_from_bytes_rejects_bad_input(data):
    with pytest.raises(CorruptQueueDataError):
        M.from_bytes(data)


def test_from_bytes_type():
    with pytest.raises(InvalidInputError):
        M.from_bytes("abcd")


@pytest.mark.parametrize(
    "args",
    [(True, False, 256, 0), (True, False, -1, 0), (True, True, 0, 64), (True, True, 0, -1),
     (True, False, 0, 1), (1, False, 0, 0), (True, None, 0, 0), (True, False, 1.0, 0)],
)
def test_constructor_validates(args):
    with pytest.raises(InvalidInputError):
        M(*args)
