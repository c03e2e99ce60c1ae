"""Fast paths for the VAR_LONG / VAR_SIGNED_LONG encodings of the sweep queue (hot loops: 100,000 queue
entries per batch). Small non-negative values - lengths, timestamp moduli, write indices - are handled
inline; everything else falls back to :mod:`airflow_atlas.encoding`, which defines the formats.

Decoders accept only the canonical (shortest) encoding and raise
:class:`~airflow_atlas.errors.CorruptQueueDataError` for anything else, so a value has exactly one byte
form. ``tests/unit/sweep/queue/test_varint.py`` checks the fast paths against the reference encoders.
"""
from __future__ import annotations

from ...encoding import (
    decode_var_long,
    decode_var_signed_long,
    encode_var_long,
    encode_var_signed_long,
)
from ...errors import CorruptQueueDataError, InvalidInputError


def var_long(value: int) -> bytes:
    """``encode_var_long(value)``."""
    if 0 <= value < 0x80:
        return bytes((value,))
    if 0 <= value < 0x4000:
        return bytes((0x80 | (value >> 8), value & 0xFF))
    if 0 <= value < 0x200000:
        return bytes((0xC0 | (value >> 16), (value >> 8) & 0xFF, value & 0xFF))
    return encode_var_long(value)


def var_signed_long(value: int) -> bytes:
    """``encode_var_signed_long(value)``."""
    if 0 <= value < 0x40:
        return bytes((0x80 | value,))
    if 0 <= value < 0x2000:
        return bytes((0xC0 | (value >> 8), value & 0xFF))
    if 0 <= value < 0x100000:
        return bytes((0xE0 | (value >> 16), (value >> 8) & 0xFF, value & 0xFF))
    return encode_var_signed_long(value)


def read_var_long(data: bytes, offset: int, what: str) -> tuple[int, int]:
    """Decode a canonical VAR_LONG at ``offset``; returns (value, offset after it)."""
    n = len(data)
    if offset >= n:
        raise CorruptQueueDataError(f"{what}: missing VAR_LONG")
    b = data[offset]
    if b < 0x80:
        return b, offset + 1
    if b < 0xC0:
        if offset + 2 > n:
            raise CorruptQueueDataError(f"{what}: truncated VAR_LONG")
        value = ((b & 0x3F) << 8) | data[offset + 1]
        if value < 0x80:
            raise CorruptQueueDataError(f"{what}: non-canonical VAR_LONG")
        return value, offset + 2
    if b < 0xE0:
        if offset + 3 > n:
            raise CorruptQueueDataError(f"{what}: truncated VAR_LONG")
        value = ((b & 0x1F) << 16) | (data[offset + 1] << 8) | data[offset + 2]
        if value < 0x4000:
            raise CorruptQueueDataError(f"{what}: non-canonical VAR_LONG")
        return value, offset + 3
    try:
        value, used = decode_var_long(data, offset)
    except InvalidInputError as exc:
        raise CorruptQueueDataError(f"{what}: {exc}") from None
    if encode_var_long(value) != data[offset : offset + used]:
        raise CorruptQueueDataError(f"{what}: non-canonical VAR_LONG")
    return value, offset + used


def read_var_signed_long(data: bytes, offset: int, what: str) -> tuple[int, int]:
    """Decode a canonical VAR_SIGNED_LONG at ``offset``; returns (value, offset after it)."""
    n = len(data)
    if offset >= n:
        raise CorruptQueueDataError(f"{what}: missing VAR_SIGNED_LONG")
    b = data[offset]
    if b & 0x80:  # non-negative
        if not b & 0x40:
            return b & 0x3F, offset + 1
        if not b & 0x20:
            if offset + 2 > n:
                raise CorruptQueueDataError(f"{what}: truncated VAR_SIGNED_LONG")
            value = ((b & 0x1F) << 8) | data[offset + 1]
            if value < 0x40:
                raise CorruptQueueDataError(f"{what}: non-canonical VAR_SIGNED_LONG")
            return value, offset + 2
        if not b & 0x10:
            if offset + 3 > n:
                raise CorruptQueueDataError(f"{what}: truncated VAR_SIGNED_LONG")
            value = ((b & 0x0F) << 16) | (data[offset + 1] << 8) | data[offset + 2]
            if value < 0x2000:
                raise CorruptQueueDataError(f"{what}: non-canonical VAR_SIGNED_LONG")
            return value, offset + 3
    try:
        value, used = decode_var_signed_long(data, offset)
    except InvalidInputError as exc:
        raise CorruptQueueDataError(f"{what}: {exc}") from None
    if encode_var_signed_long(value) != data[offset : offset + used]:
        raise CorruptQueueDataError(f"{what}: non-canonical VAR_SIGNED_LONG")
    return value, offset + used
