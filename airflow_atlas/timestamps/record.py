"""The timestamp server's record in a store, and the marker that takes a store away from the cell.

A Cassandra store's timestamps come from exactly one of two places, never both (mixing them breaks real-time
order: a draw from the cell knows nothing of a block a server holds in memory):

- **the cell** (:mod:`.cell`): ``_timestamp`` ``ts/upper`` holds the highest timestamp issued, an 8-byte
  ``fixed_long`` (absent: nothing issued). The embedded store always works this way (one machine).
- **a timestamp server** (:mod:`.server`): once a store is *adopted*, ``ts/upper`` holds :data:`MARKER_PREFIX`
  followed by the ``fixed_long`` bound at adoption. That value is not 8 bytes long, so a process of the
  previous release, which reads ``ts/upper`` as a ``fixed_long``, fails ("fixed long needs 8 bytes") instead
  of drawing, and this release's cell service refuses it with :class:`StoreServedByServerError`. Adoption is
  one-way.

The server's state is the cell ``ts/server`` of the same table, a :class:`ServerRecord`: the leadership
``epoch``, the persisted ``bound`` (no timestamp above it was ever handed out), the lease ``seq`` (bumped by
every renewal, so a standby sees that the leader lives), the lease length and the leader's address. Every
change is a check-and-set from the exact value read, so two servers never both extend the bound or both win
one epoch. The argument that no client ever gets a timestamp twice or out of real-time order is in
docs/ARCHITECTURE.md ("The timestamp server").

Adoption (:func:`adopt`) is two check-and-sets, each idempotent and crash-safe: ``ts/upper`` -> marker with the
bound read (the cell's value from then on never changes), then ``ts/server`` absent -> a record with that
bound and no leader. A crash between them leaves the marker, from which the record is made on the next try.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, replace

from ..encoding import fixed_long, from_fixed_long
from ..errors import AtlasError, CorruptTransactionDataError
from ..kvs.api import Cell, KeyValueService
from ..kvs.tables import SweepStrategy, TableMetadata, WriteMode

TIMESTAMP_TABLE = "_timestamp"
TIMESTAMP_TABLE_METADATA = TableMetadata(strategy=SweepStrategy.NOTHING, write_mode=WriteMode.LWT)
BOUND_CELL = Cell(b"ts", b"upper")
"""The cell's bound (cell mode), or the marker (served mode)."""
RECORD_CELL = Cell(b"ts", b"server")
"""The timestamp server's :class:`ServerRecord` (served mode only)."""
MARKER_PREFIX = b"atlas: timestamps served by a timestamp server; bound at adoption "
"""``ts/upper`` of an adopted store: this, then the 8-byte bound at adoption."""

_RECORD_VERSION = 1
_RECORD_HEAD = struct.Struct(">BqqqI")  # version, epoch, bound, seq, lease_ms; then the leader's address


class StoreServedByServerError(AtlasError):
    """A cell draw on a store whose timestamps a timestamp server serves (configuration error, not retried)."""


@dataclass(frozen=True)
class ServerRecord:
    """``ts/server``: who leads the store's timestamps, under which epoch, up to which bound."""

    epoch: int
    bound: int
    seq: int
    lease_ms: int
    leader: str
    """The leader's holder id, ``address#incarnation`` ("" = nobody leads)."""

    def encode(self) -> bytes:
        return _RECORD_HEAD.pack(_RECORD_VERSION, self.epoch, self.bound, self.seq, self.lease_ms) + (
            self.leader.encode("utf-8")
        )

    @classmethod
    def decode(cls, data: bytes) -> ServerRecord:
        if len(data) < _RECORD_HEAD.size or data[0] != _RECORD_VERSION:
            raise CorruptTransactionDataError(
                f"{TIMESTAMP_TABLE} ts/server holds {len(data)} bytes that are not a timestamp server record "
                f"(version {_RECORD_VERSION})"
            )
        _, epoch, bound, seq, lease_ms = _RECORD_HEAD.unpack_from(data)
        return cls(epoch, bound, seq, lease_ms, data[_RECORD_HEAD.size:].decode("utf-8"))

    @property
    def leader_address(self) -> str:
        """The leader's address (``host:port``), "" when nobody leads."""
        return self.leader.partition("#")[0]

    def renewed(self, *, bound: int | None = None) -> ServerRecord:
        return replace(self, seq=self.seq + 1, bound=self.bound if bound is None else bound)

    def taken_by(self, leader: str, lease_ms: int, bound: int) -> ServerRecord:
        return ServerRecord(self.epoch + 1, bound, 0, lease_ms, leader)

    def released(self) -> ServerRecord:
        return replace(self, seq=self.seq + 1, leader="")


def marker(bound: int) -> bytes:
    return MARKER_PREFIX + fixed_long(bound)


def marker_bound(value: bytes | None) -> int | None:
    """The bound recorded at adoption when ``value`` (``ts/upper``) is the marker, else None."""
    if value is not None and value.startswith(MARKER_PREFIX):
        return from_fixed_long(value[len(MARKER_PREFIX):])
    return None


def is_adopted(kvs: KeyValueService, *, serial: bool = False) -> bool:
    """Whether the store's timestamps are served by a timestamp server (False also before ``init``)."""
    if not kvs.table_exists(TIMESTAMP_TABLE):
        return False
    return marker_bound(kvs.get_lwt(TIMESTAMP_TABLE, [BOUND_CELL], serial=serial).get(BOUND_CELL)) is not None


def read_record(kvs: KeyValueService, *, serial: bool = True) -> tuple[ServerRecord | None, bytes | None]:
    """The record and its stored bytes (the expected value of the next check-and-set); (None, None) when
    absent. A store that was adopted but has no record yet (a crash inside :func:`adopt`) gets it here."""
    raw = kvs.get_lwt(TIMESTAMP_TABLE, [RECORD_CELL], serial=serial).get(RECORD_CELL)
    if raw is not None:
        return ServerRecord.decode(raw), raw
    bound = marker_bound(kvs.get_lwt(TIMESTAMP_TABLE, [BOUND_CELL], serial=True).get(BOUND_CELL))
    if bound is None:
        return None, None
    _create_record(kvs, bound)
    raw = kvs.get_lwt(TIMESTAMP_TABLE, [RECORD_CELL], serial=True).get(RECORD_CELL)
    return (ServerRecord.decode(raw), raw) if raw is not None else (None, None)


def _create_record(kvs: KeyValueService, bound: int) -> None:
    kvs.check_and_set(TIMESTAMP_TABLE, RECORD_CELL, None, ServerRecord(0, bound, 0, 0, "").encode())


def adopt(kvs: KeyValueService) -> int:
    """Move the store's timestamps from the cell to a timestamp server (idempotent; see the module docstring).
    Returns the bound at adoption: every timestamp the cell ever issued is at or below it."""
    kvs.create_table(TIMESTAMP_TABLE, TIMESTAMP_TABLE_METADATA)
    for _ in range(100):
        current = kvs.get_lwt(TIMESTAMP_TABLE, [BOUND_CELL], serial=True).get(BOUND_CELL)
        bound = marker_bound(current)
        if bound is None:
            issued = 0 if current is None else from_fixed_long(current)
            if not kvs.check_and_set(TIMESTAMP_TABLE, BOUND_CELL, current, marker(issued)):
                continue  # a cell draw in between: read again
            bound = issued
        _create_record(kvs, bound)  # a no-op when it exists
        return bound
    raise AtlasError(f"could not adopt the store: {TIMESTAMP_TABLE} ts/upper kept changing (100 attempts)")
