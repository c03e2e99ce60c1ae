"""LeaseKeeper: refreshes a shard lock's lease in the background while a sweep runs.

A lease outlives one iteration and is refreshed every third of its length. If a refresh finds the lease
lost (expired and taken over, or released), the keeper records it and :meth:`check` raises
LockNotHeldError, so the sweep stops before cleaning the queue or persisting progress.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from ..errors import LockNotHeldError

if TYPE_CHECKING:
    from ..locks import Lease, LockService

log = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(self, locks: LockService, lease: Lease, lease_seconds: float) -> None:
        self._locks = locks
        self.lease = lease
        self._lease_seconds = float(lease_seconds)
        self._stop = threading.Event()
        self._lost: Exception | None = None
        self._lost_event = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-keeper:{lease.name}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        interval = max(0.05, self._lease_seconds / 3.0)
        while not self._stop.wait(interval):
            try:
                self.lease = self._locks.refresh(self.lease, self._lease_seconds)
            except LockNotHeldError as exc:
                self._lost = exc
                self._lost_event.set()
                log.error("lease %s lost while sweeping: %s", self.lease.name, exc)
                return
            except Exception as exc:  # store hiccup: keep trying until the lease would expire
                log.warning("could not refresh lease %s (will retry): %s", self.lease.name, exc)

    def pause(self, seconds: float) -> None:
        """Sleep up to ``seconds`` between iterations (the sweep's pacing), cut short when the lease is lost
        (the next :meth:`check` then stops the run at once instead of after the wait)."""
        self._lost_event.wait(seconds)

    def raise_if_lost(self) -> None:
        """Raise LockNotHeldError if a refresh found the lease lost (no request: between the chunks of a
        paced batch's deletes, sweep/batch_deletes.py)."""
        if self._lost is not None:
            raise LockNotHeldError(f"lease {self.lease.name} was lost: {self._lost}")

    def check(self) -> None:
        """Raise LockNotHeldError if the lease was lost; otherwise confirm it with the lock service."""
        self.raise_if_lost()
        self._locks.check(self.lease)


class FixedLease:
    """A caller-managed lease (e.g. acquired by a separate Airflow task): checked, never refreshed here.
    Same interface as :class:`LeaseKeeper` (``lease``, :meth:`check`, a context manager)."""

    def __init__(self, locks: LockService, lease: Lease) -> None:
        self._locks = locks
        self.lease = lease

    def __enter__(self) -> FixedLease:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def pause(self, seconds: float) -> None:
        """Sleep ``seconds`` (nothing refreshes this lease, so nothing can cut the wait short)."""
        time.sleep(seconds)

    def raise_if_lost(self) -> None:
        """Nothing refreshes this lease, so nothing finds it lost between checks."""

    def check(self) -> None:
        self._locks.check(self.lease)
