"""The open-transaction registry and the immutable timestamp.

Read-write transactions register here (a lease keyed by a timestamp) so that sweep never passes them: the
*immutable timestamp* is the lowest registered timestamp among live registrations, or a fresh timestamp when
there is none. Every version a registered transaction can still need is at or above it.

Layout: WALLCLOCK table ``_open_transactions``, column ``fixed_long(ts)`` (non-negative, so byte order is
numeric order and the oldest registration is the first column of its row), value a small JSON document
``{"holder", "registered_at_ms", "expires_at_ms"}``. Rows: ``b"open"``, and on a store served by a timestamp
server also the :data:`STRIPES` - 1 rows ``b"open/<k>"``: a registration goes to the row its start timestamp
picks (:func:`stripe_of`), so no partition takes every transaction's registry writes. Readers always read
every row (the oldest live entry is the oldest over the rows; a point lookup reads the stripe's cell and the
one in row ``open``), whoever wrote. Writers stripe only once the store is served by a timestamp server
(``striped``: the store's timestamps are the server's, known after this process's first draw, which comes
before its first registration): a process of the previous release reads row ``open`` alone, and it runs only
on a store not yet adopted - where nobody stripes. A registration striped after adoption is keyed under a
timestamp of the server, above every timestamp the cell issued, so the ordering argument below holds for a
reader that drew its fresh timestamp from the cell just before the adoption too. Expired entries are skipped and deleted lazily by
:meth:`OpenTransactionRegistry.oldest_open`. Point lookups (:meth:`OpenTransactionRegistry.get`) are exact
cell reads. On Cassandra every unregistration leaves a tombstone at the head of that row until compaction
purges it. The table has ``gc_grace_seconds = 0``, so those tombstones are purgeable at once: a read skips
them without counting them against the node's ``tombstone_failure_threshold``: ``oldest_open`` still
answers after more unregistrations than that threshold, while with Cassandra's default grace period the
same read fails with READ_TOO_MANY_TOMBSTONES and no sweep timestamp could be computed
(``tests/integration/transactions/test_registry_tombstones.py``). What remains is the cost of skipping them,
which a very high transaction rate between compactions makes grow.

Ordering argument for :meth:`OpenTransactionRegistry.immutable_timestamp`
-----------------------------------------------------------------------------
Sweep takes F = a fresh timestamp *first*, then reads the registry, and returns min(live registrations, F).
A registrant must (1) write its registration under a key K, then (2) draw its start timestamp S, with K <= S.
Take any registrant T and a computation that returned I:

* if T's registration was visible to the registry read, I <= K <= S while T is live;
* otherwise T's write (1) completed after the read started, so T's draw (2) started after F's draw finished
  (F was drawn before the read) and the timestamp service gives S > F >= I.

Either way I <= S: sweep never removes a version T can read. Drawing S *before* registering would break the
second case: T could draw S, a sweeper could draw F > S and read the registry, and only then T's
registration lands. :class:`~airflow_atlas.transactions.manager.TransactionManager` follows the rule by
registering under a timestamp it already owns before drawing the start timestamp, then re-keying the
registration to the start timestamp.

Leases are wall-clock based: ``clock`` (seconds) must agree across machines to within ``margin_seconds``.
:meth:`refresh` refuses to revive a registration with less than the margin left and fails if its own write
ended within the margin of the old expiry (a slow write long before expiry is fine), so a sweeper that saw an
entry expired (and may have passed it) can never see it live again without the transaction knowing.
"""
from __future__ import annotations

import heapq
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..encoding import fixed_long, from_fixed_long
from ..errors import InvalidInputError, LockNotHeldError
from ..kvs.api import Cell, KeyValueService
from ..kvs.tables import SweepStrategy, TableMetadata, WriteMode, validate_table_name
from .encoding import check_start_timestamp

OPEN_TRANSACTIONS_TABLE = "_open_transactions"
OPEN_TRANSACTIONS_TABLE_METADATA = TableMetadata(
    strategy=SweepStrategy.NOTHING,
    write_mode=WriteMode.WALLCLOCK,
    # Every unregister leaves a tombstone in the one row that oldest_open() scans from its start; let
    # compaction purge them at once. Safe: a registration resurrected by a missed delete carries its own
    # expiry, so at worst it holds sweep back until it expires.
    cassandra_options={"gc_grace_seconds": 0},
)
_ROW = b"open"
STRIPES = 16
"""Rows of the registry on a served store (row ``open`` is stripe 0)."""
_PAGE = 200
_TTL_SLACK_SECONDS = 3600


@dataclass(frozen=True)
class OpenTransaction:
    """One registration. Times are clock seconds."""

    start_ts: int
    holder: str
    registered_at: float
    expires_at: float

    def live_at(self, now: float) -> bool:
        return self.expires_at > now


def _ttl(lease_seconds: float) -> int:
    """Store-side TTL: a safety net that garbage-collects registrations of crashed processes. It is far
    longer than the lease, so an entry never vanishes while it is live (expiry is decided by the value)."""
    return int(math.ceil(lease_seconds)) + _TTL_SLACK_SECONDS


def _encode(holder: str, registered_at_ms: int, expires_at_ms: int) -> bytes:
    return json.dumps(
        {"holder": holder, "registered_at_ms": registered_at_ms, "expires_at_ms": expires_at_ms},
        sort_keys=True,
        separators=(",", ":"),
    ).encode()


def _decode(col: bytes, raw: bytes) -> OpenTransaction:
    data = json.loads(raw.decode())
    return OpenTransaction(
        start_ts=from_fixed_long(col),
        holder=data["holder"],
        registered_at=data["registered_at_ms"] / 1000,
        expires_at=data["expires_at_ms"] / 1000,
    )


class OpenTransactionRegistry:
    """Leases of running read-write transactions, and the immutable timestamp derived from them."""

    def __init__(
        self,
        kvs: KeyValueService,
        clock: Callable[[], float] = time.time,
        *,
        margin_seconds: float = 1.0,
        table: str = OPEN_TRANSACTIONS_TABLE,
        striped: Callable[[], bool] = lambda: False,
    ):
        if margin_seconds < 0:
            raise InvalidInputError(f"margin_seconds must be >= 0, got {margin_seconds}")
        self._kvs = kvs
        self.table = validate_table_name(table)
        self._clock = clock
        self.margin_seconds = float(margin_seconds)
        self._striped = striped

    def ensure_tables(self) -> None:
        self._kvs.create_table(self.table, OPEN_TRANSACTIONS_TABLE_METADATA)

    def _cell(self, start_ts: int) -> Cell:
        """Where a registration of ``start_ts`` is written now."""
        check_start_timestamp(start_ts)
        return Cell(stripe_row(stripe_of(start_ts)) if self._striped() else _ROW, fixed_long(start_ts))

    @staticmethod
    def _cells(start_ts: int) -> list[Cell]:
        """Where a registration of ``start_ts`` may be: its stripe's row, and row ``open`` (a registration made
        before the store was served, or by a process that does not stripe)."""
        col = fixed_long(check_start_timestamp(start_ts))
        row = stripe_row(stripe_of(start_ts))
        return [Cell(row, col)] if row == _ROW else [Cell(row, col), Cell(_ROW, col)]

    @staticmethod
    def _rows() -> list[bytes]:
        """Every row a registration may be in: readers always read them all, whoever wrote."""
        return [stripe_row(k) for k in range(STRIPES)]

    def register(self, start_ts: int, holder: str, lease_seconds: float) -> OpenTransaction:
        """Register (or overwrite) the lease of ``start_ts`` for ``lease_seconds`` from now."""
        if not isinstance(holder, str) or not holder:
            raise InvalidInputError(f"a registration holder is a non-empty string, got {holder!r}")
        if not lease_seconds > 0:
            raise InvalidInputError(f"lease_seconds must be positive, got {lease_seconds!r}")
        now_ms = int(self._clock() * 1000)
        expires_ms = now_ms + int(lease_seconds * 1000)
        self._kvs.put_wallclock(
            self.table,
            {self._cell(start_ts): _encode(holder, now_ms, expires_ms)},
            ttl_seconds=_ttl(lease_seconds),
        )
        return OpenTransaction(start_ts, holder, now_ms / 1000, expires_ms / 1000)

    def get(self, start_ts: int) -> OpenTransaction | None:
        """The stored registration of ``start_ts`` (expired or not), or None."""
        cells = self._cells(start_ts)
        found = self._kvs.get_lwt(self.table, cells)  # exact point reads (never a slice)
        raw = next((found[c] for c in cells if c in found), None)
        return None if raw is None else _decode(cells[0].col, raw)

    def is_live(self, start_ts: int) -> bool:
        """Whether ``start_ts`` has an unexpired registration (no margin: this is the sweeper's view)."""
        entry = self.get(start_ts)
        return entry is not None and entry.live_at(self._clock())

    def refresh(self, start_ts: int, lease_seconds: float) -> OpenTransaction:
        """Extend the lease to ``lease_seconds`` from now. Raises LockNotHeldError when the registration is
        gone, has less than ``margin_seconds`` left, or the refresh's write ended within the margin of the old
        expiry (the transaction must then treat its lease as lost, though the new value was written)."""
        began = self._clock()
        entry = self.get(start_ts)
        if entry is None:
            raise LockNotHeldError(f"transaction {start_ts} is not registered (unregistered or cleaned up)")
        if entry.expires_at - self.margin_seconds <= began:
            raise LockNotHeldError(
                f"registration of transaction {start_ts} expired at {entry.expires_at:.3f} "
                f"(now {began:.3f}, margin {self.margin_seconds}s)"
            )
        now_ms = int(self._clock() * 1000)
        expires_ms = now_ms + int(lease_seconds * 1000)
        self._kvs.put_wallclock(
            self.table,
            {self._cell(start_ts): _encode(entry.holder, int(entry.registered_at * 1000), expires_ms)},
            ttl_seconds=_ttl(lease_seconds),
        )
        after = self._clock()
        if entry.expires_at - self.margin_seconds <= after:
            # The write landed at or before ``after``; a sweeper whose clock is at most the margin ahead may
            # have seen the old lease expired before then, and passed us: the refresh does not count.
            raise LockNotHeldError(
                f"refreshing transaction {start_ts} took {after - began:.3f}s and ended within the "
                f"{self.margin_seconds}s margin of the old expiry {entry.expires_at:.3f}: the lease may have lapsed"
            )
        return OpenTransaction(start_ts, entry.holder, entry.registered_at, expires_ms / 1000)

    def unregister(self, start_ts: int) -> None:
        self._kvs.delete_wallclock(self.table, self._cells(start_ts))

    def open_transactions(self, limit: int | None = None) -> list[OpenTransaction]:
        """Live registrations, oldest first (expired ones are skipped, not deleted)."""
        now = self._clock()
        live: list[OpenTransaction] = []
        for entry in self._entries():
            if entry.live_at(now):
                live.append(entry)
                if limit is not None and len(live) >= limit:
                    break
        return live

    def oldest_open(self) -> OpenTransaction | None:
        """The live registration with the lowest timestamp; expired entries met on the way are deleted."""
        now = self._clock()
        expired: list[Cell] = []
        oldest = None
        for entry in self._entries():
            if entry.live_at(now):
                oldest = entry
                break
            expired.extend(self._cells(entry.start_ts))
        if expired:
            self._kvs.delete_wallclock(self.table, expired)
        return oldest

    def immutable_timestamp(self, fresh_ts: Callable[[], int]) -> int:
        """Lowest live registration, or a fresh timestamp when none (see the module docstring for why the
        fresh timestamp is taken before the registry is read)."""
        fresh = fresh_ts()
        oldest = self.oldest_open()
        return fresh if oldest is None else min(fresh, oldest.start_ts)

    def _entries(self) -> Iterator[OpenTransaction]:
        """Every registration, oldest first, over every row (a merge of the rows' ordered pages)."""
        rows = self._rows()
        if len(rows) == 1:
            return self._row_entries(rows[0])
        return heapq.merge(*(self._row_entries(row) for row in rows), key=lambda e: e.start_ts)

    def _row_entries(self, row: bytes) -> Iterator[OpenTransaction]:
        start_col = None
        while True:
            page = self._kvs.get_wallclock_row(self.table, row, start_col=start_col, limit=_PAGE)
            for col, raw in page:
                yield _decode(col, raw)
            if len(page) < _PAGE:
                return
            start_col = page[-1][0] + b"\x00"


def stripe_of(start_ts: int) -> int:
    """The stripe of a registration: its start timestamp mixed (Fibonacci hashing), so that consecutive
    transactions land on different rows."""
    return ((start_ts * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF) >> 60 & (STRIPES - 1)


def stripe_row(stripe: int) -> bytes:
    """The row of ``stripe`` (stripe 0 is the row ``open`` of the single-row layout)."""
    return _ROW if stripe == 0 else _ROW + b"/" + str(stripe).encode()
