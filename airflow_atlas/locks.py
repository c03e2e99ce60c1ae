"""Named leases with fencing tokens on the LWT table ``_locks``.

Layout: each lock is one cell, row ``b"lock:" + name`` and column ``b"lease"``, so locks never contend with
each other for a Paxos partition. Its value is a small JSON document ``{"holder", "token", "expires_at_ms"}``
changed only by check-and-set from the exact bytes just read, so every transition is linearizable. A
released lock keeps its cell (``holder`` null) so the fencing token keeps growing across acquisitions. The
row ``b"index"`` lists every lock name ever created (one put-unless-exists per name, written *before* the
lock cell), which is what :meth:`LockService.list_locks` reads.

Fencing token: strictly increases on every acquisition, including a takeover of an expired lease and a
re-acquisition by the same holder. A holder passes its token to whatever it protects; anything that sees a
larger token must refuse the smaller one.

Expiry is wall-clock time from ``clock`` (seconds). Leases therefore assume the machines' clocks agree to
well within a lease; callers that act on a lease should :meth:`check` or :meth:`refresh` it before
irreversible steps and leave themselves a margin.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from .errors import InvalidInputError, KeyAlreadyExistsError, LockNotHeldError, StoreUnavailableError
from .kvs.api import MAX_CELL_NAME_BYTES, Cell, KeyValueService
from .kvs.tables import SweepStrategy, TableMetadata, WriteMode
from .validation import check_float

LOCKS_TABLE = "_locks"
MAX_LOCK_WAIT_SECONDS = 86_400.0
"""The longest :meth:`LockService.acquire_waiting` is asked to wait by a sweep (setting ``lock_wait_seconds``; a day)."""
LOCKS_TABLE_METADATA = TableMetadata(strategy=SweepStrategy.NOTHING, write_mode=WriteMode.LWT)
_LOCK_ROW_PREFIX = b"lock:"
_LEASE_COLUMN = b"lease"
_INDEX_ROW = b"index"
_MAX_CAS_ATTEMPTS = 32


@dataclass(frozen=True)
class Lease:
    """A lease the caller holds: present ``token`` to fenced resources; ``expires_at`` in clock seconds."""

    name: str
    holder: str
    token: int
    expires_at: float


@dataclass(frozen=True)
class LockState:
    """What the store says about a lock. ``holder`` is None once released; ``expired`` is True when nobody
    holds a valid lease (released or past ``expires_at``)."""

    name: str
    holder: str | None
    token: int
    expires_at: float
    expired: bool

    @property
    def held(self) -> bool:
        return not self.expired


@dataclass(frozen=True)
class _Stored:
    holder: str | None
    token: int
    expires_at_ms: int

    def encode(self) -> bytes:
        return json.dumps(
            {"holder": self.holder, "token": self.token, "expires_at_ms": self.expires_at_ms},
            sort_keys=True,
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, raw: bytes) -> _Stored:
        data = json.loads(raw.decode())
        return cls(holder=data["holder"], token=int(data["token"]), expires_at_ms=int(data["expires_at_ms"]))

    def live_at(self, now_ms: int) -> bool:
        return self.holder is not None and self.expires_at_ms > now_ms


def _check_name(name: str) -> bytes:
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"a lock name is a non-empty string, got {name!r}")
    encoded = name.encode()
    if len(encoded) + len(_LOCK_ROW_PREFIX) > MAX_CELL_NAME_BYTES:
        raise InvalidInputError(f"lock name of {len(encoded)} bytes is too long")
    return encoded


def _check_holder(holder: str) -> str:
    if not isinstance(holder, str) or not holder:
        raise InvalidInputError(f"a lock holder is a non-empty string, got {holder!r}")
    return holder


def _check_lease_seconds(lease_seconds: float) -> float:
    return check_float(lease_seconds, "lease_seconds", 0.0, finite=False)


class LockService:
    """Acquire, refresh, release and inspect named leases. Thread-safe and process-safe."""

    def __init__(self, kvs: KeyValueService, clock: Callable[[], float] = time.time):
        self._kvs = kvs
        self._clock = clock

    def ensure_tables(self) -> None:
        self._kvs.create_table(LOCKS_TABLE, LOCKS_TABLE_METADATA)

    # ----- helpers -------------------------------------------------------------------------------------
    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    @staticmethod
    def _cell(name: str) -> Cell:
        return Cell(_LOCK_ROW_PREFIX + _check_name(name), _LEASE_COLUMN)

    def _read(self, cell: Cell, serial: bool = True) -> tuple[bytes | None, _Stored | None]:
        raw = self._kvs.get_lwt(LOCKS_TABLE, [cell], serial=serial).get(cell)
        return raw, (None if raw is None else _Stored.decode(raw))

    def _index(self, name: str) -> None:
        try:
            self._kvs.put_unless_exists(LOCKS_TABLE, {Cell(_INDEX_ROW, _check_name(name)): b""})
        except KeyAlreadyExistsError:
            pass

    # ----- API -----------------------------------------------------------------------------------------
    def acquire(self, name: str, holder: str, lease_seconds: float) -> Lease | None:
        """Take the lock for ``lease_seconds``; None when another holder has an unexpired lease.

        Takes over an expired or released lease; a re-acquisition by the current holder extends the lease.
        Every success (first acquisition, takeover, re-acquisition) gets a larger fencing token.
        """
        cell = self._cell(name)
        _check_holder(holder)
        lease_ms = int(_check_lease_seconds(lease_seconds) * 1000)
        for _ in range(_MAX_CAS_ATTEMPTS):
            raw, stored = self._read(cell)
            now_ms = self._now_ms()
            if stored is not None and stored.live_at(now_ms) and stored.holder != holder:
                return None
            token = 1 if stored is None else stored.token + 1
            new = _Stored(holder=holder, token=token, expires_at_ms=now_ms + lease_ms)
            if stored is None:
                self._index(name)  # index first, so a listed name always exists once the lock does
                try:
                    self._kvs.put_unless_exists(LOCKS_TABLE, {cell: new.encode()})
                except KeyAlreadyExistsError:
                    continue  # someone created it first: look again
                return Lease(name, holder, token, new.expires_at_ms / 1000)
            if self._kvs.check_and_set(LOCKS_TABLE, cell, raw, new.encode()):
                return Lease(name, holder, token, new.expires_at_ms / 1000)
        raise StoreUnavailableError(f"lock {name!r}: too much contention ({_MAX_CAS_ATTEMPTS} attempts)")

    def acquire_waiting(self, name: str, holder: str, lease_seconds: float, wait_seconds: float) -> Lease | None:
        """:meth:`acquire`, trying again (about once a second) until ``wait_seconds`` have passed; None when
        another holder still has the lock at that deadline. ``wait_seconds`` 0 (or less) tries once."""
        deadline = time.monotonic() + max(0.0, float(wait_seconds))
        while True:
            lease = self.acquire(name, holder, lease_seconds)
            left = deadline - time.monotonic()
            if lease is not None or left <= 0:
                return lease
            time.sleep(min(1.0, max(0.05, left)))

    def refresh(self, lease: Lease, lease_seconds: float) -> Lease:
        """Extend ``lease`` to ``lease_seconds`` from now (same token). Raises LockNotHeldError if the lease
        was lost: released, taken over, or already expired (an expired lease is never revived)."""
        cell = self._cell(lease.name)
        lease_ms = int(_check_lease_seconds(lease_seconds) * 1000)
        for _ in range(_MAX_CAS_ATTEMPTS):
            raw, stored = self._read(cell)
            now_ms = self._now_ms()
            self._raise_unless_held(lease, stored, now_ms)
            new = _Stored(holder=lease.holder, token=lease.token, expires_at_ms=now_ms + lease_ms)
            if self._kvs.check_and_set(LOCKS_TABLE, cell, raw, new.encode()):
                return Lease(lease.name, lease.holder, lease.token, new.expires_at_ms / 1000)
        raise StoreUnavailableError(f"lock {lease.name!r}: too much contention ({_MAX_CAS_ATTEMPTS} attempts)")

    def release(self, lease: Lease) -> bool:
        """Release the lock if ``lease`` (same holder and token) still owns it; False otherwise."""
        cell = self._cell(lease.name)
        for _ in range(_MAX_CAS_ATTEMPTS):
            raw, stored = self._read(cell)
            if stored is None or stored.holder != lease.holder or stored.token != lease.token:
                return False
            new = _Stored(holder=None, token=stored.token, expires_at_ms=min(stored.expires_at_ms, self._now_ms()))
            if self._kvs.check_and_set(LOCKS_TABLE, cell, raw, new.encode()):
                return True
        raise StoreUnavailableError(f"lock {lease.name!r}: too much contention ({_MAX_CAS_ATTEMPTS} attempts)")

    def release_held_by(self, name: str, holder: str) -> bool:
        """Release ``name`` if ``holder`` holds it, whatever the token (a retried task of the same holder may
        have re-acquired it); False when another holder has it, or nobody."""
        state = self.describe(name)
        if state is None or state.holder != holder:
            return False
        return self.release(Lease(name=name, holder=holder, token=state.token, expires_at=state.expires_at))

    def check(self, lease: Lease) -> None:
        """Raise LockNotHeldError unless ``lease`` still owns the lock and has not expired."""
        _, stored = self._read(self._cell(lease.name))
        self._raise_unless_held(lease, stored, self._now_ms())

    def describe(self, name: str, *, serial: bool = True) -> LockState | None:
        """The lock's stored state, or None if it was never acquired. ``serial=False``: a plain read, no
        Paxos (may miss an acquisition in flight; for a read-only report)."""
        _, stored = self._read(self._cell(name), serial)
        return None if stored is None else self._state(name, stored, self._now_ms())

    def list_locks(self, prefix: str = "") -> list[LockState]:
        """Every lock whose name starts with ``prefix``, ordered by name."""
        names = sorted(
            col.decode()
            for col in self._kvs.get_lwt_row(LOCKS_TABLE, _INDEX_ROW, serial=False)
            if col.decode().startswith(prefix)
        )
        if not names:
            return []
        cells = {self._cell(n): n for n in names}
        raw = self._kvs.get_lwt(LOCKS_TABLE, list(cells), serial=False)
        now_ms = self._now_ms()
        return [
            self._state(cells[c], _Stored.decode(v), now_ms) for c, v in sorted(raw.items(), key=lambda kv: cells[kv[0]])
        ]

    # ----- internals -----------------------------------------------------------------------------------
    @staticmethod
    def _state(name: str, stored: _Stored, now_ms: int) -> LockState:
        return LockState(
            name=name,
            holder=stored.holder,
            token=stored.token,
            expires_at=stored.expires_at_ms / 1000,
            expired=not stored.live_at(now_ms),
        )

    @staticmethod
    def _raise_unless_held(lease: Lease, stored: _Stored | None, now_ms: int) -> None:
        if stored is None:
            raise LockNotHeldError(f"lock {lease.name!r} does not exist")
        if stored.holder != lease.holder or stored.token != lease.token:
            who = "nobody (released)" if stored.holder is None else f"{stored.holder!r}"
            raise LockNotHeldError(
                f"lock {lease.name!r} is no longer held by {lease.holder!r} with token {lease.token}: "
                f"now {who} with token {stored.token}"
            )
        if stored.expires_at_ms <= now_ms:
            raise LockNotHeldError(
                f"lease of {lease.holder!r} on lock {lease.name!r} expired {(now_ms - stored.expires_at_ms) / 1000:.3f}s ago"
            )
