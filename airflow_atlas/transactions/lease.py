"""RegistrationLease: the registration of one read-write transaction in the open-transaction registry
(:mod:`.registry`), kept as a lease for as long as the transaction is open.

While the registration is live, sweep never passes the transaction's start timestamp (the immutable timestamp
is below it), so every version the transaction can read stays. The lease is refreshed twice over: by the
transaction itself before each read and write once more than half of it is used (:meth:`keep`), and by the
manager's keeper thread once a third is used (:meth:`keep_alive`, :mod:`.keeper`). A refresh never runs
concurrently with, nor after, the release (one lock), and a lost registration is never revived: the registry
refuses to refresh one that expired (or is about to, within its clock margin), and the loss is kept here, so
the transaction fails at its next operation. :meth:`verify` - the commit protocol's steps (b') and (f), and
every read of a THOROUGH table - checks the stored registration is live with the margin to spare.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import LockNotHeldError, TransactionLockExpiredError
from .registry import OpenTransaction

if TYPE_CHECKING:
    from .manager import TransactionManager

log = logging.getLogger(__name__)


class RegistrationLease:
    """The lease of transaction ``start``'s registration (``registration``: what registering returned)."""

    def __init__(self, manager: TransactionManager, start: int, registration: OpenTransaction | None):
        self._m = manager
        self._start = start
        self._registration = registration
        self._renewed_at = manager.clock()
        # Guards the registration between the transaction's thread and the manager's keeper thread: a refresh
        # never runs concurrently with (or after) the release.
        self._lock = threading.Lock()
        self._lost: Exception | None = None
        self._registered = registration is not None

    @property
    def registered(self) -> bool:
        """Whether the transaction registered (and has not released the registration yet)."""
        return self._registered

    def keep(self) -> Exception | None:
        """Refresh the registration here once more than half of the lease is used (the keeper normally does at
        a third). Returns the loss - found by the keeper or by this refresh - or None while it is live."""
        if self._registration is None:
            return None
        lost = self._lost
        if lost is None:
            lease = self._m.config.lease_seconds
            if self._m.clock() - self._renewed_at < lease / 2:
                return None
            with self._lock:
                if self._lost is None and self._registered:
                    try:
                        self._registration = self._m.registry.refresh(self._start, lease)
                        self._renewed_at = self._m.clock()
                    except LockNotHeldError as exc:
                        self._lost = exc
                lost = self._lost
        return lost

    def keep_alive(self, is_open: Callable[[], bool]) -> bool:
        """The keeper thread's refresh, once a third of the lease is used. Returns False once there is nothing
        more to keep (the transaction closed - ``is_open`` - the registration released or lost)."""
        lease = self._m.config.lease_seconds
        with self._lock:
            if not self._registered or not is_open() or self._lost is not None:
                return False
            if self._m.clock() - self._renewed_at < lease / 3:
                return True
            try:
                self._registration = self._m.registry.refresh(self._start, lease)
                self._renewed_at = self._m.clock()
            except LockNotHeldError as exc:
                self._lost = exc
                log.warning("transaction %d lost its registration: %s", self._start, exc)
                return False
            except Exception as exc:  # a store hiccup: try again at the next tick, while the lease lasts
                log.warning("could not refresh the registration of transaction %d (will retry): %s", self._start, exc)
        return True

    def verify(self) -> None:
        """Raise TransactionLockExpiredError unless the stored registration is live with the margin to spare
        and no refresh found it lost (a refresh that found it lapsed may still have written a live value)."""
        if self._lost is not None:
            raise TransactionLockExpiredError(
                f"registration of transaction {self._start} was lost: {self._lost}; sweep may have passed its "
                "start timestamp"
            )
        entry = self._m.registry.get(self._start)
        now = self._m.clock()
        if entry is None or entry.expires_at - self._m.registry.margin_seconds <= now:
            when = "is gone" if entry is None else f"expired at {entry.expires_at:.3f} (now {now:.3f})"
            raise TransactionLockExpiredError(
                f"registration of transaction {self._start} {when}: sweep may have passed its start timestamp"
            )

    def release(self) -> None:
        """Unregister (best effort: a registration left behind lapses with its lease) and stop the keeper's
        refreshes; no refresh runs after this."""
        with self._lock:
            self._registered = False
        self._m._keeper.remove(self._start)
        self._m._best_effort(self._m.registry.unregister, self._start)
