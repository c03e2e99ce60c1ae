"""One store's leadership inside a timestamp server: take it, renew it, serve from memory while it holds.

A server instance holds, per store it serves, a :class:`StoreLeadership`. As **leader** it hands out
timestamps from the block ``(issued, bound]`` it persisted, under a **lease**: it serves only while less than
``lease`` seconds (its own clock) have passed since the *start* of its last successful renewal. As
**standby** it watches the store's :class:`~.record.ServerRecord`; when the record's ``seq`` has not changed
for :func:`takeover_wait` seconds since it first saw that value, the leader's lease has certainly run out,
and it takes over with one check-and-set: epoch + 1, bound + one block, itself as leader. It then serves from
the old bound + 1: above everything any earlier leader could have handed out, since no leader hands out
anything above the bound it persisted.

Why a lease and not a linearizable read per batch: a read per batch is one Paxos read on one cell for every
coalesced batch of every client - the single-cell path the server exists to remove. The lease costs one
check-and-set per renewal interval per store, off every request's path, and assumes only that clock *rates*
differ by less than :data:`CLOCK_DRIFT` between machines (no synchronised wall clocks). The clock is
``CLOCK_BOOTTIME``, which keeps counting while a machine is suspended, and a process paused (SIGSTOP, a GC
pause, a stalled VM) sees its lease expired when it resumes, because the check is made after a request
arrives. The full argument, including a lost network and an old leader resumed after a takeover, is in
docs/ARCHITECTURE.md ("The timestamp server").
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..encoding import LONG_MAX
from ..errors import AtlasError, StoreUnavailableError
from ..kvs.api import KeyValueService
from .record import RECORD_CELL, TIMESTAMP_TABLE, ServerRecord, read_record

BLOCK = 1_000_000
"""Timestamps reserved ahead with one check-and-set (as TimeLock's persistent upper limit)."""
MAX_REQUEST = 1 << 62
"""The most timestamps one request may ask for (a request for more than is left extends the bound by what it
needs, as one check-and-set of the cell did: a draw may skip whole partitions of timestamps)."""
CLOCK_DRIFT = 0.05
"""The assumed bound on how much two machines' clock *rates* differ (5%: NTP keeps them within parts per
million; the margin covers a badly behaved hypervisor)."""
DEFAULT_LEASE_SECONDS = 2.0
"""Lease length: a standby takes over about 2.3 s after the leader's last renewal (the 5 s goal of issue 45)."""


def clock() -> float:
    """Seconds on a clock that never goes back and keeps counting through a suspend (Linux CLOCK_BOOTTIME)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic()


def takeover_wait(lease_seconds: float) -> float:
    """How long a standby must see an unchanged record before taking over: the leader's lease, measured on a
    clock up to :data:`CLOCK_DRIFT` faster, has run out by then on the leader's own clock."""
    return lease_seconds * (1 + CLOCK_DRIFT) / (1 - CLOCK_DRIFT) + 0.05


class NotLeaderError(AtlasError):
    """This instance does not lead the store; ``leader`` is the address the store records ("" if none)."""

    def __init__(self, message: str, leader: str):
        super().__init__(message)
        self.leader = leader


class StoreNotServedError(AtlasError):
    """The store was never adopted by a timestamp server (its timestamps come from its cell)."""


@dataclass(frozen=True)
class LeadershipState:
    role: str
    epoch: int
    issued: int
    bound: int
    leader: str
    lease_remaining: float


class StoreLeadership:
    """Leadership of one store's timestamps by this instance (``holder``: ``address#incarnation``).
    Thread-safe: requests call :meth:`issue`, the server's maintenance loop calls :meth:`tick`."""

    def __init__(self, kvs: KeyValueService, holder: str, lease_seconds: float,
                 now: Callable[[], float] = clock):
        self._kvs = kvs
        self._holder = holder
        self._lease = float(lease_seconds)
        self._lease_ms = int(round(self._lease * 1000))
        self._now = now
        self._lock = threading.Lock()  # guards the fields below
        self._store_lock = threading.Lock()  # one check-and-set of the record at a time
        self._record: ServerRecord | None = None
        self._raw: bytes | None = None  # the record's bytes as last written or read (the next CAS's expectation)
        self._leading = False
        self._lease_start = float("-inf")
        self._next = 0  # leader: the next timestamp to hand out
        self._block_end = 0  # leader: the bound this instance persisted under its epoch (never another's)
        self._seen: tuple[int, int] | None = None  # standby: (epoch, seq) last seen, and since when
        self._seen_since = 0.0
        self._watched_at = float("-inf")
        self.last_request = now()

    # ----- requests ------------------------------------------------------------------------------------
    def issue(self, count: int) -> tuple[int, int]:
        """``(start, epoch)`` of ``count`` fresh timestamps. NotLeaderError when another instance leads;
        StoreUnavailableError while this one cannot prove its lease."""
        self.last_request = self._now()
        with self._lock:
            if self._leading and self._next - 1 > LONG_MAX - count - BLOCK:
                raise AtlasError(f"the timestamp space is exhausted (issued up to {self._next - 1})")
        for _ in range(3):
            with self._lock:
                if self._leading and self._now() - self._lease_start < self._lease:
                    if self._next + count - 1 <= self._bound():
                        start = self._next
                        self._next += count
                        return start, self._epoch()
                elif not self._leading and self._now() - self._watched_at < self._lease / 8:
                    break  # a standby answered "not leader" a moment ago: do not read the record per request
            # The block is used up, the lease ran out (a stalled renewal, a pause) or nobody leads: fix, retry.
            self._renew_or_take(count)
        with self._lock:
            if not self._leading:
                raise NotLeaderError(self._not_leader_message(), self._leader_address())
        raise StoreUnavailableError("the timestamp server could not renew its lease on the store in time")

    def issued(self) -> int:
        with self._lock:
            if self._leading and self._now() - self._lease_start < self._lease:
                return self._next - 1
        self._renew_or_take()
        with self._lock:
            if not self._leading:
                raise NotLeaderError(self._not_leader_message(), self._leader_address())
            return self._next - 1

    # ----- the maintenance loop ------------------------------------------------------------------------
    def tick(self) -> None:
        """Renew when a quarter of the lease has passed (extending the bound when half a block is left); as a
        standby, watch the record and take over when it has not changed for :func:`takeover_wait`."""
        with self._lock:
            due = self._leading and self._now() - self._lease_start >= self._lease / 4
            leading = self._leading
        if due or not leading:
            self._renew_or_take()

    def release(self) -> None:
        """Stop serving, then record that nobody leads (a standby takes over at once)."""
        with self._lock:
            was = self._leading
            self._leading = False
        if was and self._record is not None:
            with self._store_lock:
                try:
                    self._cas(self._record.released())
                except AtlasError:
                    pass  # the lease runs out by itself

    def state(self) -> LeadershipState:
        with self._lock:
            remaining = max(0.0, self._lease - (self._now() - self._lease_start)) if self._leading else 0.0
            record = self._record
            return LeadershipState(
                "leader" if self._leading else "standby",
                record.epoch if record else 0,
                self._next - 1 if self._leading else 0,
                record.bound if record else 0,
                record.leader_address if record else "",
                remaining,
            )

    # ----- the record ----------------------------------------------------------------------------------
    def _renew_or_take(self, need: int = 0) -> None:
        with self._store_lock:
            with self._lock:
                leading = self._leading
            if leading:
                self._renew(need)
            else:
                self._watch_and_take()

    def _renew(self, need: int = 0) -> None:
        """Renew the lease; extend the bound by a block when less than half a block (or ``need``) is left."""
        record = self._record
        assert record is not None
        bound = record.bound
        with self._lock:
            if bound - self._next + 1 < max(BLOCK // 2, need):
                bound = max(bound, self._next - 1) + max(BLOCK, need)
        started = self._now()
        if self._cas(record.renewed(bound=bound)):
            with self._lock:
                self._lease_start = started
                self._block_end = bound
        else:
            with self._lock:
                self._leading = False  # another instance took over: never serve this epoch again
                self._seen = None

    def _watch_and_take(self) -> None:
        self._watched_at = self._now()
        record, raw = read_record(self._kvs, serial=True)
        if record is None:
            raise StoreNotServedError(
                f"{self._kvs.describe()} is not served by a timestamp server: adopt it first "
                "(`atlas-sweep timestamps adopt`, docs/RUNBOOK.md)"
            )
        now = self._now()
        self._record, self._raw = record, raw
        if record.leader and record.leader != self._holder:
            key = (record.epoch, record.seq)
            if self._seen != key:
                self._seen, self._seen_since = key, now
                return
            if now - self._seen_since < takeover_wait(record.lease_ms / 1000):
                return
        # Nobody leads, this incarnation led before (it knows it stopped serving), or the leader went silent.
        started = self._now()
        taken = record.taken_by(self._holder, self._lease_ms, record.bound + BLOCK)
        if self._cas(taken):
            with self._lock:
                self._leading = True
                self._lease_start = started
                self._next = record.bound + 1
                self._block_end = taken.bound
                self._seen = None

    def _cas(self, new: ServerRecord) -> bool:
        """Check-and-set the record from the bytes last seen to ``new``. A lost reply is settled by a SERIAL
        read (the write either applied or did not); the cached record is what the store holds afterwards."""
        encoded = new.encode()
        try:
            applied = self._kvs.check_and_set(TIMESTAMP_TABLE, RECORD_CELL, self._raw, encoded)
        except StoreUnavailableError:
            applied = read_record(self._kvs, serial=True)[1] == encoded
        if applied:
            self._record, self._raw = new, encoded
        else:
            self._record, self._raw = read_record(self._kvs, serial=True)
        return applied

    def _bound(self) -> int:
        # What this instance itself persisted: after a lost check-and-set the cached record is another
        # leader's, whose bound must never let this one hand out more.
        return self._block_end

    def _epoch(self) -> int:
        return self._record.epoch if self._record is not None else 0

    def _leader_address(self) -> str:
        return self._record.leader_address if self._record is not None else ""

    def _not_leader_message(self) -> str:
        leader = self._leader_address()
        return f"this instance does not lead the store's timestamps ({'leader: ' + leader if leader else 'no leader yet'})"
