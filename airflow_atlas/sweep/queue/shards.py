"""Shard assignment of a write: a strong, stable hash of (table, row, column) modulo the shard count.

The hash is BLAKE2b (8-byte digest, fixed personalisation) over the *length-prefixed* table name (UTF-8),
row and column, so ``(b"ab", b"c")`` and ``(b"a", b"bc")`` differ and ``row == column`` is not special
(the reference XOR-ed the row and column hashes and sent every such cell to shard 0). Python's ``hash()``
is salted per process and must never be used here.

The value is stable across processes and versions. (A change would not break correctness - the reader
visits every shard - but it would move where writes land, so keep it fixed.)
"""
from __future__ import annotations

import hashlib
import struct

from ...errors import InvalidInputError
from ...kvs.api import Cell
from ...validation import check_int
from .constants import MAX_SHARDS

_PERSON = b"atlas-sweep-shd1"  # 16 bytes max for blake2b personalisation
_LEN = struct.Struct(">I")


def write_hash(table: str, cell: Cell) -> int:
    """The unsigned 64-bit hash that decides the shard of a write."""
    if not isinstance(table, str):
        raise InvalidInputError(f"table must be a str, got {type(table).__name__}")
    row, col = cell
    name = table.encode("utf-8")
    h = hashlib.blake2b(digest_size=8, person=_PERSON)
    for part in (name, row, col):
        h.update(_LEN.pack(len(part)))
        h.update(part)
    return int.from_bytes(h.digest(), "big")


def shard_for(table: str, cell: Cell, num_shards: int) -> int:
    """The shard (``0 .. num_shards - 1``) of a write to ``cell`` of ``table``."""
    check_int(num_shards, "number of shards", 1, MAX_SHARDS)
    if num_shards == 1:
        return 0
    return write_hash(table, cell) % num_shards
