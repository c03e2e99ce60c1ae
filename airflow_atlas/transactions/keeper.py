"""RegistrationKeeper: keeps the registrations of a manager's open read-write transactions alive.

A transaction's registration is a lease (``TransactionConfig.lease_seconds``) that holds sweep below its
start timestamp. A transaction may run longer than the lease - a large commit writes and checks for
minutes - so one daemon thread per :class:`~airflow_atlas.transactions.manager.TransactionManager`
refreshes each open transaction's registration once a third of its lease is used (it wakes every sixth),
for as long as the transaction is open. The thread exits when no transaction is open and is started again
by the next one.

The keeper never revives a registration: the registry refuses to refresh one that expired (or is about
to, within its clock margin), and the keeper then records the loss on the transaction's lease
(:mod:`.lease`), so the transaction fails with TransactionLockExpiredError at its next operation; the
commit's own registration check (f) decides in any case. Transactions are held by weak reference: one dropped without commit or abort stops being refreshed
and its registration expires after one lease. The lease therefore bounds how long a *crashed* process holds
sweep back, not how long a transaction may run.
"""
from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .snapshot import SnapshotTransaction


class RegistrationKeeper:
    def __init__(self, lease_seconds: float):
        self._tick = max(0.05, float(lease_seconds) / 6.0)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._open: dict[int, weakref.ref[SnapshotTransaction]] = {}
        self._thread: threading.Thread | None = None

    def add(self, txn: SnapshotTransaction) -> None:
        with self._lock:
            self._open[txn.start_timestamp] = weakref.ref(txn)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="atlas-registration-keeper", daemon=True)
                self._thread.start()

    def remove(self, start: int) -> None:
        with self._lock:
            self._open.pop(start, None)

    @property
    def open_count(self) -> int:
        with self._lock:
            return len(self._open)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._open:
                    self._thread = None
                    return
                self._wake.wait(self._tick)
                refs = list(self._open.items())
            for start, ref in refs:
                txn = ref()
                if txn is None or not txn.keep_registration_alive():
                    self.remove(start)
