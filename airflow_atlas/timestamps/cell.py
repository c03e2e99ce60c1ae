"""The cell timestamp service: strictly increasing Atlas timestamps drawn from the store itself.

This is how the embedded store (one machine) issues timestamps, and how a Cassandra store did before it was
adopted by a timestamp server (:mod:`.record`, :mod:`.server`); on an adopted store it refuses to draw
(:class:`~.record.StoreServedByServerError`).

One cell of the LWT table ``_timestamp`` holds the highest timestamp ever issued (an 8-byte ``fixed_long``;
absent = nothing issued yet, so the first timestamp is 1). A draw of ``n`` timestamps is one linearizable
check-and-set from the value read at SERIAL consistency to that value plus ``n``; the caller owns the block
``(old, old + n]``. Because every draw is a successful CAS on the same cell, draws are totally ordered by
the CAS order, which respects real time: a draw that starts after another finished returns larger numbers,
whichever process or machine made them. The bound is persisted before it is handed out, so a restarted
service (a new object on the same store) continues above everything issued before.

Nothing is cached between calls on purpose: a block kept in memory would let a later draw (in real time) in
this process return a number smaller than one another process drew in between.
"""
from __future__ import annotations

import random
import time

from ..encoding import LONG_MAX, fixed_long, from_fixed_long
from ..errors import AtlasError, StoreUnavailableError
from ..kvs.api import KeyValueService
from ..validation import check_int
from .record import BOUND_CELL, TIMESTAMP_TABLE, TIMESTAMP_TABLE_METADATA, StoreServedByServerError, marker_bound

_MAX_STORE_ERRORS = 3


class TimestampService:
    """Issues fresh timestamps from the store ``kvs``. Thread-safe and process-safe.

    ``max_attempts`` bounds the CAS retries of one draw under contention (each retry sleeps a small jittered
    backoff); past it the draw fails with :class:`StoreUnavailableError`.
    """

    def __init__(
        self,
        kvs: KeyValueService,
        *,
        max_attempts: int = 200,
        backoff_base_seconds: float = 0.001,
        backoff_cap_seconds: float = 0.05,
    ):
        self._kvs = kvs
        self._max_attempts = max_attempts
        self._backoff_base = backoff_base_seconds
        self._backoff_cap = backoff_cap_seconds
        self._rng = random.Random()

    served = False
    """Never: these timestamps come from the store's cell."""

    def ensure_tables(self) -> None:
        """Create ``_timestamp`` if it does not exist (idempotent)."""
        self._kvs.create_table(TIMESTAMP_TABLE, TIMESTAMP_TABLE_METADATA)

    def fresh_timestamp(self) -> int:
        """One timestamp larger than every timestamp issued before this call started."""
        return self.fresh_timestamps(1)[0]

    def fresh_timestamps(self, n: int) -> range:
        """A contiguous block of ``n`` fresh timestamps, reserved in one check-and-set."""
        check_int(n, "the number of timestamps to draw", 1)
        store_errors = 0
        for attempt in range(self._max_attempts):
            try:
                current = self._kvs.get_lwt(TIMESTAMP_TABLE, [BOUND_CELL], serial=True).get(BOUND_CELL)
                issued = self._issued(current)
                if issued > LONG_MAX - n:
                    raise AtlasError(f"the timestamp space is exhausted (issued up to {issued})")
                upper = issued + n
                if self._kvs.check_and_set(TIMESTAMP_TABLE, BOUND_CELL, current, fixed_long(upper)):
                    return range(issued + 1, upper + 1)
            except StoreUnavailableError:
                # e.g. a Paxos timeout under contention. Retrying is safe: a block is only handed out after a
                # CAS known to have applied; a CAS that applied unseen just wastes its block.
                store_errors += 1
                if store_errors > _MAX_STORE_ERRORS:
                    raise
            # Somebody else drew in between: back off a little (full jitter) and read again.
            time.sleep(self._rng.uniform(0, min(self._backoff_cap, self._backoff_base * (2 ** min(attempt, 16)))))
        raise StoreUnavailableError(
            f"could not reserve {n} timestamp(s) after {self._max_attempts} contended attempts on {TIMESTAMP_TABLE}"
        )

    def current_bound(self, *, serial: bool = True) -> int:
        """The highest timestamp issued so far (0 when none); a linearizable read, issues nothing.
        ``serial=False``: a plain read, no Paxos - it may miss a block being reserved right now (a read-only
        report's fallback when Paxos fails)."""
        return self._issued(self._kvs.get_lwt(TIMESTAMP_TABLE, [BOUND_CELL], serial=serial).get(BOUND_CELL))

    def _issued(self, current: bytes | None) -> int:
        if marker_bound(current) is not None:
            raise StoreServedByServerError(
                f"the timestamps of {self._kvs.describe()} are served by a timestamp server (the store was adopted: "
                "`atlas-sweep timestamps adopt`); this process draws from the store's cell - open the store with "
                "this release's AtlasStore, which finds the server (docs/RUNBOOK.md, \"The timestamp server\")"
            )
        return 0 if current is None else from_fixed_long(current)
