"""TargetedSweepMetadata: the 4-byte ``metadata`` row component of ``sweepableCells`` (spec 000).

Bit layout, most significant bit of byte 0 first::

    byte 0:  C D S7 S6 S5 S4 S3 S2      C = conservative, D = dedicated row, S = shard (8 bits)
    byte 1:  S1 S0 N5 N4 N3 N2 N1 N0    N = dedicated row number (6 bits)
    byte 2:  0 0 0 0 0 0 0 0            16 unused bits, always zero
    byte 3:  0 0 0 0 0 0 0 0

i.e. ``byte0 = conservative << 7 | dedicated << 6 | shard >> 2`` and
``byte1 = (shard & 3) << 6 | dedicated_row_number``.

A non-dedicated row always has ``dedicated_row_number == 0``. :meth:`TargetedSweepMetadata.from_bytes`
rejects anything else (wrong length, non-zero unused bits, an ordinal on a non-dedicated row) with
:class:`~airflow_atlas.errors.CorruptQueueDataError`, so a future format is never misread silently.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import CorruptQueueDataError, InvalidInputError
from ...validation import check_int
from .constants import MAX_DEDICATED_ROWS, MAX_SHARDS

METADATA_SIZE = 4


@dataclass(frozen=True)
class TargetedSweepMetadata:
    """Which queue a ``sweepableCells`` row belongs to and, for dedicated rows, its ordinal.

    Raises InvalidInputError on construction when a field is out of range.
    """

    conservative: bool
    dedicated_row: bool
    shard: int
    dedicated_row_number: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.conservative, bool) or not isinstance(self.dedicated_row, bool):
            raise InvalidInputError("conservative and dedicated_row must be booleans")
        for name, value, bound in (
            ("shard", self.shard, MAX_SHARDS),
            ("dedicated_row_number", self.dedicated_row_number, MAX_DEDICATED_ROWS),
        ):
            check_int(value, name, 0, bound - 1)
        if not self.dedicated_row and self.dedicated_row_number != 0:
            raise InvalidInputError(
                f"a non-dedicated row has dedicated_row_number 0, got {self.dedicated_row_number}"
            )

    def to_bytes(self) -> bytes:
        """The 4 persisted bytes."""
        byte0 = (self.conservative << 7) | (self.dedicated_row << 6) | (self.shard >> 2)
        byte1 = ((self.shard & 0b11) << 6) | self.dedicated_row_number
        return bytes((byte0, byte1, 0, 0))

    @classmethod
    def from_bytes(cls, data: bytes) -> TargetedSweepMetadata:
        """Decode 4 persisted bytes; raises CorruptQueueDataError when they are not a valid encoding."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidInputError(f"metadata must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) != METADATA_SIZE:
            raise CorruptQueueDataError(f"sweep metadata must be {METADATA_SIZE} bytes, got {len(data)}: {data.hex()}")
        byte0, byte1, byte2, byte3 = data
        if byte2 or byte3:
            raise CorruptQueueDataError(f"sweep metadata {data.hex()} has non-zero unused bits")
        conservative = bool(byte0 & 0x80)
        dedicated = bool(byte0 & 0x40)
        shard = ((byte0 & 0x3F) << 2) | (byte1 >> 6)
        number = byte1 & 0x3F
        if not dedicated and number:
            raise CorruptQueueDataError(
                f"sweep metadata {data.hex()}: non-dedicated row with dedicated row number {number}"
            )
        return cls(conservative, dedicated, shard, number)
