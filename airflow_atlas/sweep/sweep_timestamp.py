"""The sweep timestamp (spec 000, issue 4 section 4).

THOROUGH sweeps below the *immutable timestamp* (the lowest start timestamp of any open read-write
transaction, or a fresh timestamp when none is open). CONSERVATIVE sweeps below the lower of that and
the *unreadable timestamp* (the timestamp that was fresh one unreadable-window ago, read from the punch
table), because read-only transactions do not register and are only protected by that window.

A write with start timestamp >= the sweep timestamp waits for a later iteration. A sweep timestamp
computed earlier stays safe to use later: every transaction that registers afterwards registers under a
timestamp it owned before drawing its start timestamp (see ``transactions/registry.py``), so it is
above any sweep timestamp computed before it registered, and read-only readers younger than the window
are above the punch it was derived from. (The immutable timestamp itself may dip briefly while a
transaction registers provisionally; that is safe, it only makes sweep more cautious.) So an Airflow run
may compute the sweep timestamps once and hand them to every shard task.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import InvalidInputError
from ..kvs.tables import SweepStrategy

if TYPE_CHECKING:
    from ..timestamps import TimestampSource
    from ..transactions.punch import PunchTable
    from ..transactions.registry import OpenTransactionRegistry


class SweepTimestampProvider:
    def __init__(
        self,
        timestamps: TimestampSource,
        registry: OpenTransactionRegistry,
        punch: PunchTable,
        unreadable_window_seconds: float,
        *,
        punch_every_seconds: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._timestamps = timestamps
        self._registry = registry
        self._punch = punch
        self.unreadable_window_seconds = float(unreadable_window_seconds)
        self._punch_every = punch_every_seconds
        self._clock = clock
        self._last_punch = float("-inf")
        self._lock = threading.Lock()

    def _maybe_punch(self) -> None:
        """Record (now -> fresh timestamp) so the unreadable timestamp advances even with no writers."""
        now = self._clock()
        with self._lock:
            if now - self._last_punch < self._punch_every:
                return
            self._last_punch = now
        self._punch.punch(self._timestamps.fresh_timestamp())

    def immutable_timestamp(self) -> int:
        return self._registry.immutable_timestamp(self._timestamps.fresh_timestamp)

    def unreadable_timestamp(self) -> int:
        return self._punch.unreadable_timestamp(self.unreadable_window_seconds)

    def sweep_timestamp(self, strategy: SweepStrategy | str) -> int:
        strategy = SweepStrategy.parse(strategy)
        if not strategy.is_swept:
            raise InvalidInputError("tables with sweep strategy NOTHING are never swept")
        self._maybe_punch()
        immutable = self.immutable_timestamp()
        if strategy is SweepStrategy.THOROUGH:
            return immutable
        return min(immutable, self.unreadable_timestamp())

    def all(self) -> dict[str, int]:
        """Sweep timestamps of both sweepable strategies, from one reading of the immutable timestamp."""
        self._maybe_punch()
        immutable = self.immutable_timestamp()
        return {
            SweepStrategy.CONSERVATIVE.value: min(immutable, self.unreadable_timestamp()),
            SweepStrategy.THOROUGH.value: immutable,
        }

    def explain(self, strategy: SweepStrategy | str, *, read_only: bool = False) -> dict:
        """Why the sweep timestamp is where it is: the oldest open transaction or the read-only window.

        ``read_only``: draw no timestamp and punch nothing - ``fresh_ts`` is the highest timestamp issued as
        a plain (non-serial) read sees it, and the immutable timestamp is computed from it: no Paxos at
        all, for a status that must answer when Paxos does not (it may lag a reservation in flight; the
        caller says so). Sweep never uses it."""
        strategy = SweepStrategy.parse(strategy)
        if read_only:
            fresh = self._timestamps.current_bound(serial=False)
            oldest = self._registry.oldest_open()
            immutable = self._registry.immutable_timestamp(lambda: fresh)
        else:
            self._maybe_punch()
            fresh = self._timestamps.fresh_timestamp()
            oldest = self._registry.oldest_open()
            immutable = self.immutable_timestamp()
        unreadable = self.unreadable_timestamp() if strategy is SweepStrategy.CONSERVATIVE else None
        sweep_ts = immutable if unreadable is None else min(immutable, unreadable)
        if oldest is not None and oldest.start_ts <= sweep_ts:
            limited_by = "open_transaction"
        elif unreadable is not None and unreadable < immutable:
            limited_by = "read_only_window"
        else:
            limited_by = "none"
        now = self._clock()
        return {
            "strategy": strategy.value,
            "sweep_ts": sweep_ts,
            "fresh_ts": fresh,
            "immutable_ts": immutable,
            "unreadable_ts": unreadable,
            "unreadable_window_seconds": self.unreadable_window_seconds if unreadable is not None else None,
            "limited_by": limited_by,
            "oldest_open_transaction": None
            if oldest is None
            else {
                "start_ts": oldest.start_ts,
                "holder": oldest.holder,
                "age_seconds": max(0.0, now - oldest.registered_at),
                "expires_in_seconds": oldest.expires_at - now,
            },
        }
