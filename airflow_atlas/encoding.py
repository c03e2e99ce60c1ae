"""Byte encodings from the spec: VAR_LONG, VAR_SIGNED_LONG, fixed longs and bit reversal.

VAR_LONG follows AtlasDB's ``EncodingUtils.encodeVarLong``: non-negative values are order-preserving
in byte order; negative values take 10 bytes (``VAR_LONG(-1) == ff80ffffffffffffffff``).
VAR_SIGNED_LONG is order-preserving over all signed longs.
"""
from __future__ import annotations

from .errors import InvalidInputError

_MASK64 = (1 << 64) - 1
LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1


def _check_long(value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInputError(f"expected an integer, got {type(value).__name__}")
    if not LONG_MIN <= value <= LONG_MAX:
        raise InvalidInputError(f"{value} does not fit in a signed 64-bit long")


def _var_long_size(value: int) -> int:
    """Encoded size of a VAR_LONG (AtlasDB sizeOfVarLong)."""
    if value < 0:
        return 10
    if value < (1 << 7):
        return 1
    if value < (1 << 14):
        return 2
    if value < (1 << 21):
        return 3
    if value < (1 << 28):
        return 4
    if value < (1 << 35):
        return 5
    if value < (1 << 42):
        return 6
    if value < (1 << 49):
        return 7
    if value < (1 << 56):
        return 8
    return 9


def encode_var_long(value: int) -> bytes:
    _check_long(value)
    size = _var_long_size(value)
    u = value & _MASK64
    out = bytearray(size)
    if size == 10:
        out[0] = 0xFF
        out[1] = 0x80
        for i in range(8):
            out[9 - i] = (u >> (8 * i)) & 0xFF
        return bytes(out)
    if size == 9:
        out[0] = 0xFF
        for i in range(8):
            out[8 - i] = (u >> (8 * i)) & 0xFF
        return bytes(out)
    # size 1..8: a prefix of (size - 1) one-bits then a zero bit, then the value, big-endian.
    total_bits = size * 8
    prefix = ((1 << (size - 1)) - 1) << (total_bits - size + 1)
    word = prefix | u
    return word.to_bytes(size, "big")


def decode_var_long(data: bytes, offset: int = 0) -> tuple[int, int]:
    """Decode a VAR_LONG at ``offset``; returns (value, bytes consumed)."""
    if offset >= len(data):
        raise InvalidInputError("VAR_LONG: no bytes to decode")
    first = data[offset]
    if first == 0xFF:
        if offset + 1 >= len(data):
            raise InvalidInputError("VAR_LONG: truncated")
        if data[offset + 1] & 0x80:
            size = 10
            body = data[offset + 2 : offset + 10]
        else:
            size = 9
            body = data[offset + 1 : offset + 9]
        if len(body) != 8:
            raise InvalidInputError("VAR_LONG: truncated")
        if size == 10 and data[offset + 1] != 0x80:
            raise InvalidInputError("VAR_LONG: malformed 10-byte prefix")
        u = int.from_bytes(body, "big")
        value = u - (1 << 64) if u >= (1 << 63) else u
        if size == 9 and value < 0:
            raise InvalidInputError("VAR_LONG: 9-byte form must hold a non-negative value")
        if size == 10 and value >= 0:
            raise InvalidInputError("VAR_LONG: 10-byte form must hold a negative value")
        return value, size
    size = 1
    while size < 9 and first & (0x80 >> (size - 1)):
        size += 1
    if offset + size > len(data):
        raise InvalidInputError("VAR_LONG: truncated")
    word = int.from_bytes(data[offset : offset + size], "big")
    value = word & ((1 << (size * 8 - size)) - 1)
    return value, size


def var_long(value: int) -> bytes:
    return encode_var_long(value)


def from_var_long(data: bytes) -> int:
    value, used = decode_var_long(data)
    if used != len(data):
        raise InvalidInputError(f"VAR_LONG: {len(data) - used} trailing bytes")
    return value


def _varint_size(u: int) -> int:
    """Protobuf varint size of an unsigned 64-bit value (1..10 bytes)."""
    size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


def _fill_prefixed(value: int, out: bytearray, header_bits: int) -> None:
    """Write ``header_bits - 1`` one-bits then a zero bit, then OR in ``value`` big-endian."""
    end = 0
    if header_bits > 8:
        out[0] = 0xFF
        end = 1
        header_bits -= 8
    out[end] = (0xFF << (9 - header_bits)) & 0xFF
    index = len(out)
    while index > end:
        index -= 1
        out[index] |= value & 0xFF
        value >>= 8


def encode_var_signed_long(value: int) -> bytes:
    """Order-preserving variable-length encoding of any signed long (AtlasDB VAR_SIGNED_LONG).

    A sign bit (1 for non-negative), a unary length, then the magnitude; negative values are the
    bitwise complement, so byte order equals numeric order over all longs.
    """
    _check_long(value)
    negative = value < 0
    magnitude = ~value if negative else value  # v ^ (v >> 63)
    size = _varint_size((magnitude << 1) & _MASK64)
    out = bytearray(size)
    _fill_prefixed(magnitude, out, size + 1)
    if negative:
        out = bytearray(b ^ 0xFF for b in out)
    return bytes(out)


def decode_var_signed_long(data: bytes, offset: int = 0) -> tuple[int, int]:
    """Decode a VAR_SIGNED_LONG at ``offset``; returns (value, bytes consumed)."""
    if offset >= len(data):
        raise InvalidInputError("VAR_SIGNED_LONG: no bytes to decode")
    negative = (data[offset] & 0x80) == 0
    flip = 0xFF if negative else 0x00
    first = data[offset] ^ flip
    bits_before_zero = 0
    while bits_before_zero < 8 and first & (0x80 >> bits_before_zero):
        bits_before_zero += 1
    if bits_before_zero == 8:
        if offset + 1 >= len(data):
            raise InvalidInputError("VAR_SIGNED_LONG: truncated")
        second = data[offset + 1] ^ flip
        if second & 0x80:
            bits_before_zero += 1
            if second & 0x40:
                bits_before_zero += 1
                if second & 0x20:
                    raise InvalidInputError("VAR_SIGNED_LONG: too big")
    size = bits_before_zero
    if size == 0 or offset + size > len(data):
        raise InvalidInputError("VAR_SIGNED_LONG: malformed or truncated")
    index = size // 8
    mask = size % 8
    result = 0
    while index < size:
        b = (data[offset + index] ^ flip) & (0xFF >> mask)
        result = (result << 8) | b
        mask = 0
        index += 1
    if result > LONG_MAX:
        raise InvalidInputError("VAR_SIGNED_LONG: out of range")
    return (~result if negative else result), size


def var_signed_long(value: int) -> bytes:
    return encode_var_signed_long(value)


def from_var_signed_long(data: bytes) -> int:
    value, used = decode_var_signed_long(data)
    if used != len(data):
        raise InvalidInputError(f"VAR_SIGNED_LONG: {len(data) - used} trailing bytes")
    return value


def fixed_long(value: int) -> bytes:
    """8-byte big-endian two's complement (AtlasDB PtBytes.toBytes(long))."""
    _check_long(value)
    return (value & _MASK64).to_bytes(8, "big")


def from_fixed_long(data: bytes) -> int:
    if len(data) != 8:
        raise InvalidInputError(f"fixed long needs 8 bytes, got {len(data)}")
    u = int.from_bytes(data, "big")
    return u - (1 << 64) if u >= (1 << 63) else u


def reverse_bits64(value: int) -> int:
    """Java's Long.reverse on a signed long; returns a signed long."""
    u = value & _MASK64
    r = int(f"{u:064b}"[::-1], 2)
    return r - (1 << 64) if r >= (1 << 63) else r
