"""The commit protocol of a read-write transaction (:class:`CommitProtocol`, run by
:meth:`~airflow_atlas.transactions.snapshot.SnapshotTransaction.commit` on its buffered writes and its
registration's lease), and why it is safe without commit locks.

Commit, in this order (see :meth:`CommitProtocol.commit`):
(a) write-write conflict check, (b) enqueue the writes to the sweep queue (and scrub queue for hard deletes),
(b') check the registration is still live (the reference's order; saves writing cells that must abort),
(c) write the cells at S, (d) post-write conflict check, (e) draw the commit timestamp C, (f) check the
registration is still live, (g) put-unless-exists(S, C), (h) unregister.

Why at most one of two concurrent writers of a cell commits
----------------------------------------------------------
Let A and B both write cell c and be concurrent: neither committed before the other started
(C_A > S_B and C_B > S_A). Each writes its version (c) before its post-write check (d) reads c, and records
its commit (g) only after (d). If B's (d) read does not see A's version, A's write had not completed when
B's read began; B's own write completed before that read, so A's (d) read, which starts after A's write
completes, sees B's version. So at least one of them, say X, sees the other, Y, in (d). X then acts on Y:

* Y committed: C_Y > S_X (concurrency), so X raises TransactionConflictError and never commits;
* Y pending: X puts ABORTED for Y. If that succeeds, Y's own put-unless-exists (g) fails and Y never
  commits. If it fails, Y committed in between, with C_Y > S_X: X raises the conflict;
* Y aborted: Y never commits.

In every case at most one of A and B commits (both may abort, and retry). Pending versions are rolled back in
(d) whatever their start timestamp: ignoring a pending writer with a larger start timestamp in the hope that
it "resolves against us" is unsafe, because that writer's own (d) may have run before our version landed.
(a) is only an early exit that saves writing cells that would conflict anyway.

Crash safety (a process dying at any step): before (g) there is no commit entry, so whatever cells (c)
wrote are versions of a transaction without an entry, which readers and sweep roll back (put-unless-exists
(S, ABORTED)) once the registration lapses, and sweep finds every one of them because (b) put them in the
sweep queue before (c) wrote any. After (g) the transaction is committed whatever happens next; an
unregistration (h) that never ran lapses with the lease. A failure of (g) itself is resolved by a serial
read of the entry before anything is reported (``_record_commit``).

Timestamps ordering (start below commit, "committed after our start" = C > S) comes from the timestamp
service being strictly increasing across processes.

The conflict checks read the versions they walk through :class:`~airflow_atlas.transactions.conflicts.VersionWalk`
(few requests for many cells; the same answers as one read per cell).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import KeyAlreadyExistsError, StoreUnavailableError, TransactionAbortedError, TransactionConflictError
from ..kvs.api import MAX_TIMESTAMP, SENTINEL_TIMESTAMP, Cell
from ..sweep.queue.write_info import WriteInfo
from .conflicts import VersionWalk
from .encoding import ABORTED
from .lease import RegistrationLease

if TYPE_CHECKING:
    from .manager import TransactionManager


class CommitProtocol:
    """The commit of transaction ``start``'s writes, steps (a)-(h), under its registration's ``lease``. One use:
    the transaction keeps its state and aborts (recording ABORTED) if :meth:`commit` raises before (g)."""

    def __init__(self, manager: TransactionManager, start: int, lease: RegistrationLease, *, hard_delete: bool):
        self._m = manager
        self._start = start
        self._lease = lease
        self._hard_delete = hard_delete

    def commit(self, writes: dict[str, dict[Cell, bytes]], committed: Callable[[int], None]) -> int:
        """Steps (a)-(h) for ``writes`` (table -> cells, none empty; the lease was kept just before); calls
        ``committed(commit timestamp)`` at the commit point (g), before the unregistration (h)."""
        m = self._m
        # (a) write-write conflicts, before anything is written.
        for table, cells in writes.items():
            self._check_conflicts(table, list(cells), post_write=False)
        # (b) the sweep queue (and scrub queue) learn of every write before any cell is written.
        infos = [
            WriteInfo(table, cell, self._start, value == b"")
            for table, cells in writes.items()
            if m.table_metadata(table).strategy.is_swept
            for cell, value in cells.items()
        ]
        if infos and m.sweep_queue is not None:
            m.sweep_queue.enqueue(infos)
        if infos and self._hard_delete and m.scrub_queue is not None:
            m.scrub_queue.enqueue(infos)
        # (b') as the reference does: a writer whose registration lapsed does not even write its cells
        # (sweep may be past its start timestamp; (f) below is the check that decides).
        self._lease.verify()
        # (c) the cells, at the start timestamp.
        m.kvs.multi_put(writes, self._start)
        # (d) no commit locks: re-check now that our versions are visible to every other writer.
        for table, cells in writes.items():
            self._check_conflicts(table, list(cells), post_write=True)
        # (e) the commit timestamp.
        commit = m.timestamps.fresh_timestamp()
        # (f) sweep must not have passed us (it would have, had the registration expired).
        self._lease.verify()
        # (g) the commit point.
        self._record_commit(commit)
        committed(commit)
        # (h) done: let the immutable timestamp move on.
        self._lease.release()
        return commit

    def _record_commit(self, commit: int) -> None:
        service = self._m.transaction_service
        try:
            service.put_unless_exists(self._start, commit)
            return
        except KeyAlreadyExistsError:
            raise TransactionAbortedError(
                f"transaction {self._start} was rolled back by another transaction or sweep before it could commit"
            ) from None
        except Exception as exc:
            # The write may or may not have been applied: find out before reporting anything.
            try:
                outcome = service.get(self._start, serial=True)
                if outcome is None:
                    outcome = self._m.roll_back(self._start)
            except Exception:
                raise StoreUnavailableError(
                    f"commit of transaction {self._start} at {commit}: outcome unknown ({exc})"
                ) from exc
            if outcome == commit:
                return
            raise TransactionAbortedError(f"transaction {self._start} did not commit: {exc}") from exc

    def _check_conflicts(self, table: str, cells: list[Cell], *, post_write: bool) -> None:
        """Walk each cell's versions from the newest down until one committed before our start (or none is
        left). Conflict: a version committed after our start. Pending versions: before our write, a larger
        start timestamp is a conflict and a smaller one is left for the post-write check; after our write,
        every pending version is rolled back (see the module docstring)."""
        m = self._m
        walk = VersionWalk(m.kvs, table)  # reads grouped by row; see conflicts.py
        bounds = {c: MAX_TIMESTAMP for c in cells}
        while bounds:
            found = walk.latest(bounds)
            writers = {ts for ts in found.values() if ts not in (SENTINEL_TIMESTAMP, self._start)}
            outcomes = m.transaction_service.get_many(writers) if writers else {}
            bounds = {}
            for cell, writer in found.items():
                if writer == SENTINEL_TIMESTAMP:
                    continue  # nothing older
                if writer == self._start:
                    bounds[cell] = writer
                    continue
                outcome = outcomes.get(writer)
                if outcome is None:
                    if not post_write:
                        if writer > self._start:
                            self._conflict(table, cell, f"transaction {writer} (started after us) is writing it")
                        bounds[cell] = writer
                        continue
                    outcome = m.roll_back(writer)
                    outcomes[writer] = outcome
                if outcome == ABORTED:
                    bounds[cell] = writer
                    continue
                if outcome > self._start:
                    self._conflict(table, cell, f"transaction {writer} committed it at {outcome}, after our start")
                # Committed before our start: every older committed version committed even earlier, and no
                # older pending version can still commit (it overlaps this committed one).

    def _conflict(self, table: str, cell: Cell, why: str) -> None:
        raise TransactionConflictError(
            f"write-write conflict: transaction {self._start} wrote {table} row {cell.row!r} column {cell.col!r} "
            f"but {why}"
        )
