"""TargetedSweeper: one iteration of targeted sweep for one (shard, strategy), exactly in the spec's order.

Steps of :meth:`TargetedSweeper.run_iteration` (spec 000, "Targeted Sweep Implementation"):

1. hold the shard lock (a lease, refreshed in the background while the iteration runs);
2. compute the sweep timestamp (or use the one the caller computed for the whole run) and read the last
   swept timestamp (progress);
3. read a batch from the sweep queue with ``min = progress`` and ``max = sweep timestamp`` (or the start
   timestamp of a transaction already known to commit too late: we do not re-read blocked entries);
4. look up the commit timestamps of the batch's transactions in bulk; abort (put -1 unless exists) those
   with no commit entry; walking start timestamps in order, stop at the first transaction committed at or
   after the sweep timestamp and drop it and everything after it;
5. delete the writes of aborted transactions directly (exact versions);
6. per (table, cell) write one ranged tombstone at the greatest sweepable start timestamp, with the
   strategy's ranges (:class:`~airflow_atlas.sweep.deleter.SweepDeleter`);
7. if progress crosses a fine or coarse partition, clean the queue (dedicated rows, then the cells row,
   then the sweepableTimestamps rows);
8. persist progress with check-and-set (only ever increasing);
9. release the lock, whatever happened.

Between 6 and 7 the tombstones per table are recorded (what compaction counts, sweep/history.py).

A crash between any two steps is safe: everything before progress is persisted is idempotent and is
simply redone by the next iteration; progress never passes an entry that was not swept, nor tombstones not
counted (a crash between deletes and record: the redo writes and counts them again - over, never under).
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..errors import CorruptTransactionDataError, TableNotFoundError
from ..kvs.tables import SweepStrategy
from ..locks import MAX_LOCK_WAIT_SECONDS
from ..serialisation import to_json
from ..validation import check_float, check_int
from .batch_deletes import ABORTED, plan_deletes, run_deletes
from .commits import RollbackGuard, resolve_commits, with_writes_named
from .counts import SweepCounts
from .deleter import SweepDeleter
from .lease_keeper import FixedLease, LeaseKeeper
from .pacing.run_pace import ApplicationSource, ChunkPacing, PaceCarry, RunPace
from .pairs import SweepPairs
from .quarantine import quarantine_corrupt
from .queue.constants import FINE_PARTITION, MAX_BATCH_LIMIT, MAX_SHARDS
from .queue.reader import DEFAULT_COUNT_CAP, BatchReadAhead
from .results import LockHolderInfo, ShardSweepResult, SweepResult, default_holder

if TYPE_CHECKING:
    from ..locks import Lease
    from ..store import AtlasStore

log = logging.getLogger(__name__)



def _check_batch_limit(batch_limit: object) -> int:
    """A ``batch_limit`` given to the engine directly (the setting's own values are checked by their
    declaration, StoreConfig; the engine does not import the settings)."""
    return check_int(batch_limit, "batch_limit", 1, MAX_BATCH_LIMIT)


def check_lock_wait_seconds(seconds: object) -> float:
    """A ``lock_wait_seconds`` given to the engine directly (the setting's values are checked by their
    declaration): 0 (one try) up to :data:`MAX_LOCK_WAIT_SECONDS`; InvalidInputError otherwise."""
    if type(seconds) in (int, float) and seconds == 0:
        return 0.0
    return check_float(seconds, "lock_wait_seconds", 0, MAX_LOCK_WAIT_SECONDS)

class TargetedSweeper(SweepPairs):
    def __init__(self, store: AtlasStore) -> None:
        super().__init__(store)
        self._kvs = store.kvs
        self._deleter = SweepDeleter(store.kvs)
        # (shard, strategy) -> (start_ts, commit_ts) of the first transaction found committed too late.
        self._blocked: dict[tuple[int, str], tuple[int, int]] = {}
        self._blocked_lock = threading.Lock()
        # (shard, strategy) -> the next batch read ahead while the current one is deleted (queue/reader.py).
        self._read_ahead: dict[tuple[int, str], BatchReadAhead] = {}
        # The application pace one run leaves the next on this store (sweep/pacing/run_pace.py).
        self._pace_carry = PaceCarry()

    # ----- the iteration ---------------------------------------------------------------------------
    def run_iteration(
        self,
        shard: int,
        strategy: SweepStrategy | str,
        *,
        sweep_ts: int | None = None,
        lease: Lease | None = None,
        holder: str | None = None,
        batch_limit: int | None = None,
        dry_run: bool = False,
    ) -> SweepResult:
        shard, strategy = self._check(shard, strategy)
        self.check_sweep_ts(sweep_ts)
        if lease is not None:
            return self._iterate(
                shard, strategy, sweep_ts, FixedLease(self._store.locks, lease), batch_limit, dry_run, read_ahead=False
            )
        holder = holder or default_holder()
        lease_seconds = self._store.config.lock_lease_seconds
        acquired = self._store.locks.acquire(self.lock_name(shard, strategy), holder, lease_seconds)
        if acquired is None:
            return self._skipped(shard, strategy)
        try:
            with LeaseKeeper(self._store.locks, acquired, lease_seconds) as keeper:
                return self._iterate(shard, strategy, sweep_ts, keeper, batch_limit, dry_run, read_ahead=False)
        finally:
            self._release(acquired)

    def sweep_shard(
        self,
        shard: int,
        strategy: SweepStrategy | str,
        *,
        sweep_ts: int | None = None,
        lease: Lease | None = None,
        holder: str | None = None,
        max_iterations: int | None = None,
        batch_limit: int | None = None,
        dry_run: bool = False,
        on_iteration: Callable[[SweepResult], object] | None = None,
        max_entries_per_second: int | None = None,
        latency_target: float | None = None,
        application_latency: ApplicationSource | None = None,
        lock_wait_seconds: float | None = None,
    ) -> ShardSweepResult:
        """THE way to sweep one pair, for the CLI, the operators and the Spark executors alike.

        Takes the pair's lease once for the whole run as ``holder`` (or uses the caller's ``lease``,
        checked, never refreshed here), keeps it alive in the background (:class:`LeaseKeeper`) and runs
        iterations until the pair is caught up to the sweep timestamp, blocked by a transaction that
        committed too late, or ``max_iterations`` is reached (``iteration_limit``: a partial run); then,
        still under the lease, it reconciles the pair's queue: the rows wholly below the progress the run
        ends with (what an interrupted clean leaves behind; each iteration cleans as it goes) are deleted,
        counted in ``queue_rows_reconciled``. It releases the lease it took, whatever happened (an
        interruption too). A pair whose lease another holder has after ``lock_wait_seconds`` (default:
        setting ``lock_wait_seconds``; 0: one try) is ``skipped_locked`` (with the holder, when its lease expires and whether its process is gone).
        The same ``holder`` takes over its own lease (a larger fencing token): a retry of a run that died
        fences it off instead of waiting for its lease to expire. Every run that is not a dry run is
        recorded in the sweep history (:meth:`SweepHistory.record_run`) - completed, partial, skipped and
        failed; a failure (an interruption too: a task's timeout) is recorded with its reason and then
        raised. ``on_iteration(result)`` is called after each iteration (e.g. a progress bar).

        Intensity: at most ``max_entries_per_second`` queue entries per second (default: setting
        ``sweep_max_entries_per_second``; 0 = unlimited), paced between iterations by a
        :class:`~airflow_atlas.sweep.pacing.intensity.SweepPacer` (never after the last one; one wait at most a
        third of the lease, while the lease keeper keeps the lease; a batch at most a quarter second's worth of
        entries from 2,000 entries/s, below it 500 entries or a second's worth, ``paced_batch_cap``; its deletes
        spread over that time in about 8 chunks, sweep/batch_deletes.py: the store never sees the batch at once).
        The waits are the lease keeper's
        :meth:`~airflow_atlas.sweep.lease_keeper.LeaseKeeper.pause`: a lost lease cuts them short.

        Application pace (the default; ``latency_target``, default setting ``sweep_latency_target``; 0 = off, the
        rate above is fixed): :class:`~airflow_atlas.sweep.pacing.application.ApplicationPace` sets the pacer's
        rate from the application's publications (``application_latency``, by default the store's
        ``_app_latency`` table, transactions/latency_source.py): unthrottled while the application rests, the
        rate above (the safe pace) when it starts or is unseen, steered on its p99 while it runs
        (sweep/pacing/run_pace.py). The result reports the pace and why (``pace_entries_per_second``,
        ``pace_reason``)."""
        shard, strategy = self._check(shard, strategy)
        self.check_sweep_ts(sweep_ts)
        if max_iterations is None:
            max_iterations = self._store.config.max_iterations_per_shard
        check_int(max_iterations, "max_iterations", 1)
        if lock_wait_seconds is None:
            lock_wait_seconds = self._store.config.lock_wait_seconds
        lock_wait_seconds = check_lock_wait_seconds(lock_wait_seconds)
        if max_entries_per_second is None:
            max_entries_per_second = self._store.config.sweep_max_entries_per_second
        if latency_target is None:
            latency_target = self._store.config.sweep_latency_target
        started = time.monotonic()
        summary = ShardSweepResult(shard=shard, strategy=strategy.value, status="caught_up", sweep_ts=sweep_ts,
                                   max_entries_per_second=max_entries_per_second)
        own = lease is None
        lease_seconds = self._store.config.lock_lease_seconds
        limit = self._store.config.batch_limit if batch_limit is None else _check_batch_limit(batch_limit)
        run_pace = RunPace(max_entries_per_second=max_entries_per_second, latency_target=latency_target,
                           dry_run=dry_run, max_wait_seconds=lease_seconds / 3.0,
                           # the caller's source, else the store's published table (transactions/latency_source.py)
                           source=lambda: application_latency or self._store.application_latency(),
                           interval_seconds=self._store.config.app_latency_interval_seconds,
                           carry=self._pace_carry if application_latency is None else None)
        try:
            if sweep_ts is None:
                sweep_ts = self._store.sweep_timestamps.sweep_timestamp(strategy)
                summary.sweep_ts = sweep_ts
            if own:
                lease = self._store.locks.acquire_waiting(self.lock_name(shard, strategy), holder or default_holder(),
                                                          lease_seconds, lock_wait_seconds)
            if lease is None:  # only a lease of our own is ever missing: another holder has it
                info = self.lock_holder(shard, strategy)
                summary.status = "skipped_locked"
                summary.lock_holder = info.holder
                summary.lock_expires_at = info.expires_at
                summary.lock_holder_process_gone = info.process_gone
                return summary
            summary.lock_holder = lease.holder
            keeper_cm: LeaseKeeper | FixedLease | None = None
            try:
                keeper_cm = LeaseKeeper(self._store.locks, lease, lease_seconds) if own else FixedLease(self._store.locks, lease)
                with keeper_cm as keeper:
                    chunks = ChunkPacing(run_pace, keeper) if run_pace.paced else None
                    for n in range(max_iterations):
                        cap = run_pace.start_iteration(limit, batch_limit)
                        it = self._iterate(shard, strategy, sweep_ts, keeper, cap, dry_run, pacing=chunks,
                                           pace=run_pace.current)
                        summary.add(it)
                        if on_iteration is not None:
                            on_iteration(it)
                        if it.status in ("caught_up", "blocked", "dry_run"):
                            summary.status = it.status
                            break
                        if n + 1 < max_iterations:
                            # Between iterations only: this one's progress is persisted; the keeper runs on.
                            run_pace.end_iteration(it.counts.entries_read, keeper.pause)
                    else:
                        summary.status = "iteration_limit"
                    if not dry_run:
                        self._reconcile(summary)
            finally:
                self._drop_read_ahead(shard, strategy, keeper_cm)
                if own:
                    self._release(lease)
            if not dry_run:
                self._measure_after(summary)
        except BaseException as exc:  # an interruption (a task's timeout, a signal) is a failed run too
            summary.status = "failed"
            summary.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            run_pace.finish(summary)
            summary.duration_seconds = round(time.monotonic() - started, 6)
            if not dry_run:
                self._record_run(summary)
        return summary

    def _reconcile(self, summary: ShardSweepResult) -> None:
        """The queue rows of the pair wholly below the progress the run ends with, deleted (idempotent; the
        sweep queue cleaner's ``reconcile``): leftovers of an interrupted clean. Under the run's lease, after
        its last iteration; a failure fails the run (the next run reconciles again)."""
        if summary.new_progress is None:
            return
        cleaned = self._queue.cleaner.reconcile(summary.shard, summary.strategy, summary.new_progress)
        summary.queue_rows_reconciled = cleaned.rows_deleted

    def _measure_after(self, summary: ShardSweepResult) -> None:
        """The pair's lag and backlog after the run, from what the run read (its sweep timestamp and last
        progress) and ONE count of the queue above that progress; never fails the run."""
        progress, sweep_ts = summary.new_progress, summary.sweep_ts
        if progress is None or sweep_ts is None:
            return
        summary.lag = max(0, sweep_ts - 1 - progress)
        if summary.lag == 0:
            summary.lag_seconds = 0.0  # nothing sweepable is left
        try:
            summary.backlog = self._queue.reader.count_entries(summary.shard, summary.strategy, progress, None,
                                                               cap=DEFAULT_COUNT_CAP)
        except Exception as exc:  # a figure for the metrics; never mask the run's outcome
            log.warning("could not count the backlog of %s/%s after the run: %s", summary.strategy, summary.shard, exc)

    def _record_run(self, summary: ShardSweepResult) -> None:
        try:
            self._store.history.record_run(to_json(summary))
        except Exception as exc:  # history feeds status and the dashboard; never mask the run's outcome
            log.warning("could not record the sweep run in the history: %s", exc)

    def _drop_read_ahead(self, shard: int, strategy: SweepStrategy, keeper: LeaseKeeper | FixedLease | None) -> None:
        """The read-ahead this run started for an iteration it did not run (it ended after the iteration that
        started it: caught up, the iteration limit, an error, its ``on_iteration`` raised): dropped, and its
        thread waited for, so that no read of the run outlives it - the caller may close the store next (an
        embedded store's connection closed under a running read crashed the process: a segmentation fault in
        sqlite3, seen in a clean-clone test run of 2026-11-27). Another run's read-ahead (another keeper) is left."""
        key = (shard, strategy.value)
        with self._blocked_lock:
            ahead = self._read_ahead.get(key)
            if ahead is None or keeper is None or ahead.key[0] is not keeper:
                return
            del self._read_ahead[key]
        ahead.wait()

    def _release(self, lease: Lease) -> None:
        try:
            self._store.locks.release(lease)
        except Exception as exc:  # the lease expires on its own; never mask the iteration's outcome
            log.warning("could not release %s: %s", lease.name, exc)

    def _skipped(self, shard: int, strategy: SweepStrategy) -> SweepResult:
        return SweepResult(
            shard=shard,
            strategy=strategy.value,
            status="skipped_locked",
            lock_holder=self.lock_holder(shard, strategy).holder,
        )

    def _iterate(
        self,
        shard: int,
        strategy: SweepStrategy,
        sweep_ts: int | None,
        keeper: LeaseKeeper | FixedLease,
        batch_limit: int | None,
        dry_run: bool,
        read_ahead: bool = True,
        pacing: ChunkPacing | None = None,
        pace: Callable[[], float | None] | None = None,
    ) -> SweepResult:
        """One iteration. ``read_ahead``: start reading the next batch while this one is deleted (for a run of
        iterations, :meth:`sweep_shard`; a single :meth:`run_iteration` would never use it). ``pacing``: a paced
        run's chunks of the deletes and the waits between them (sweep/batch_deletes.py). ``pace()``: the run's
        pace, asked when the iteration ends and reported as the iteration's (a change between its chunks shows
        in this iteration, not the next)."""
        started = time.monotonic()
        cfg = self._store.config
        limit = cfg.batch_limit if batch_limit is None else _check_batch_limit(batch_limit)
        if sweep_ts is None:
            sweep_ts = self._store.sweep_timestamps.sweep_timestamp(strategy)
        progress = self._queue.progress
        old = progress.get_progress(shard, strategy)
        with self._blocked_lock:
            ahead = self._read_ahead.pop((shard, strategy.value), None)
        if ahead is not None:  # ended before it is used or dropped: no read outlives the iteration
            ahead.wait()
        result = SweepResult(
            shard=shard,
            strategy=strategy.value,
            status="swept",
            sweep_ts=sweep_ts,
            old_progress=old,
            new_progress=old,
            lock_holder=keeper.lease.holder,
        )
        if old >= sweep_ts - 1:
            result.status = "caught_up"
            return self._finish(result, started, pace)

        # Do not re-read entries known to be blocked by a transaction that committed too late.
        max_exclusive = sweep_ts
        key = (shard, strategy.value)
        with self._blocked_lock:
            known = self._blocked.get(key)
        if known is not None:
            blocked_start, blocked_commit = known
            if blocked_start <= old:
                with self._blocked_lock:
                    self._blocked.pop(key, None)
            elif blocked_commit >= sweep_ts:
                max_exclusive = blocked_start
                result.blocked_by = {"start_ts": blocked_start, "commit_ts": blocked_commit}

        if old >= max_exclusive - 1:
            result.status = "blocked"
            return self._finish(result, started, pace)

        batch = ahead.take((keeper, old, max_exclusive, limit)) if ahead is not None else None
        if batch is None:
            batch = self._queue.reader.read_batch(shard, strategy, old, max_exclusive, limit)
        result.counts += SweepCounts(entries_read=batch.entries_read, corrupt_entries=len(batch.corrupt))
        if batch.corrupt:
            quarantine_corrupt(self._store.history, shard, strategy, batch.corrupt)
        if batch.incomplete_references:
            # Benign crash states (see queue/reader.py): logged so an operator can tell them from corruption.
            log.warning(
                "%d sweep-queue reference(s) in shard %d (%s) point to missing or short dedicated rows (a writer "
                "died while enqueueing, or a cleaner died mid-clean; nothing there needs sweeping): %s",
                len(batch.incomplete_references),
                shard,
                strategy.value,
                [dict(r._asdict()) for r in batch.incomplete_references[:5]],
            )

        blocked_at: int | None = None
        if batch.fine_partition is None:
            new = max_exclusive - 1
        else:
            starts = sorted({w.start_ts for w in batch.entries})
            try:
                commits = self._commit_timestamps(starts, result, dry_run)
            except CorruptTransactionDataError as exc:  # name a cell the transaction wrote, too
                raise with_writes_named(exc, batch.entries) from None
            current = self._current_strategies({w.table for w in batch.entries})
            # Writes queued while a table was THOROUGH whose table is CONSERVATIVE now must also respect
            # the CONSERVATIVE sweep timestamp (read-only readers are allowed on the table again).
            conservative_ts = None
            now_conservative_starts: set[int] = set()
            if strategy is SweepStrategy.THOROUGH and SweepStrategy.CONSERVATIVE in current.values():
                conservative_ts = self._store.sweep_timestamps.sweep_timestamp(SweepStrategy.CONSERVATIVE)
                now_conservative_starts = {
                    w.start_ts for w in batch.entries if current.get(w.table) is SweepStrategy.CONSERVATIVE
                }
            for s in starts:
                c = commits[s]
                if c != ABORTED and c >= sweep_ts:
                    blocked_at = s
                    result.blocked_by = {"start_ts": s, "commit_ts": c}
                    with self._blocked_lock:
                        self._blocked[key] = (s, c)
                    break
                if (s in now_conservative_starts and conservative_ts is not None
                        and (s >= conservative_ts or (c != ABORTED and c >= conservative_ts))):
                    blocked_at = s
                    result.blocked_by = {"start_ts": s, "commit_ts": c, "reason": "table now CONSERVATIVE"}
                    break
            entries = batch.entries if blocked_at is None else [w for w in batch.entries if w.start_ts < blocked_at]
            if blocked_at is not None:
                new = blocked_at - 1
            elif batch.read_to_end:
                new = min(max_exclusive, (batch.fine_partition + 1) * FINE_PARTITION) - 1
            else:
                assert batch.last_start_ts is not None  # the batch limit stopped the read: it read entries
                new = batch.last_start_ts
            if read_ahead and not dry_run and blocked_at is None and max_exclusive == sweep_ts and old < new < sweep_ts - 1:
                # The next iteration reads (new, sweep_ts) once this one persists progress = new: read it now,
                # while this batch is deleted. Nothing read there is touched by this iteration (the cleaner
                # only removes queue rows wholly <= new); used only by this run (keeper) for exactly that read.
                with self._blocked_lock:
                    self._read_ahead[key] = BatchReadAhead(
                        self._queue.reader, (keeper, new, max_exclusive, limit), (shard, strategy, new, max_exclusive, limit)
                    )
            plans = plan_deletes(self._store, strategy, entries, commits, result, current)
            run_deletes(self._kvs, self._deleter, plans, result, dry_run=dry_run, entries=batch.entries_read,
                        pacing=pacing)
        new = max(new, old)
        if max_exclusive < sweep_ts and new >= max_exclusive - 1:
            blocked_at = max_exclusive

        if dry_run:
            result.new_progress = new
            result.status = "dry_run"
            return self._finish(result, started, pace)

        # Count the tombstones (history.py) before progress passes them, lease lost or not: the deletes happened.
        if result.tables:
            self._store.history.record_tombstones(result.tables, self._store.timestamps.fresh_timestamp(),
                                                  {"source": "targeted", "shard": shard, "strategy": strategy.value})
        # Fencing: stop before the destructive queue cleanup and progress if our lease was lost.
        keeper.check()
        persisted = old
        if new > old:
            cleaned = self._queue.cleaner.clean(shard, strategy, old, new)
            result.counts += SweepCounts(queue_rows_cleaned=cleaned.rows_deleted)
            persisted = result.new_progress = progress.update_progress(shard, strategy, new)
        if persisted >= sweep_ts - 1:
            result.status = "caught_up"
        elif blocked_at is not None:
            result.status = "blocked"
        return self._finish(result, started, pace)

    def _finish(self, result: SweepResult, started: float,
                pace: Callable[[], float | None] | None = None) -> SweepResult:
        result.duration_seconds = round(time.monotonic() - started, 6)
        rate = None if pace is None else pace()
        if rate is not None:
            result.pace_entries_per_second = round(rate, 1)
        if result.status != "dry_run":
            try:
                self._store.history.record(to_json(result))
            except Exception as exc:  # history feeds the dashboard; never fail a sweep for it
                log.warning("could not record sweep history: %s", exc)
        return result

    # ----- helpers ---------------------------------------------------------------------------------
    def _commit_timestamps(self, starts: list[int], result: SweepResult, dry_run: bool) -> dict[int, int]:
        """Commit timestamps in bulk; transactions with no entry are aborted (put -1 unless exists)."""
        commits, aborted_now = resolve_commits(
            self._store.transaction_service, starts, dry_run=dry_run, guard=RollbackGuard.from_config(self._store.config)
        )
        result.counts += SweepCounts(transactions_aborted=aborted_now)
        return commits

    def _current_strategies(self, tables: Iterable[str]) -> dict[str, SweepStrategy | None]:
        """Each table's strategy now (None when the table no longer exists)."""
        out: dict[str, SweepStrategy | None] = {}
        for table in tables:
            try:
                out[table] = self._kvs.get_metadata(table).strategy
            except TableNotFoundError:
                out[table] = None
        return out


__all__ = ["TargetedSweeper", "SweepResult", "ShardSweepResult", "LockHolderInfo", "MAX_SHARDS", "default_holder"]
