"""Targeted sweep inside the Airflow task: each pair through the engine entry point
:meth:`TargetedSweeper.sweep_shard`, under the lease the group's acquire task took.

Leases: a target carrying a lease is swept under it, refreshed in the background (``LeaseKeeper``) every
third of the lease while the engine runs. A lease that expired meanwhile (nobody refreshes it between the
acquire task and this one: a scheduler or worker slower than the lease, a retry delay; or released by
``on_kill``) is re-acquired by the same holder when free - with a new, larger fencing token - and a
target whose lock another holder has comes back ``skipped_locked``. A swept target carries the lease it
was swept under (its ``token`` is the acquire task's, or the larger one of a re-acquisition). A target
without a lease (standalone use) is swept under a lock the engine takes and releases itself. The leases
in use are kept in ``in_use`` (a dict the operator owns) so its ``on_kill`` can release them.

Isolation: pairs are swept one after the other; a failing pair does not stop the others (its error is
returned); bad input (``InvalidInputError``, ``TableNotFoundError``) fails the whole call at once.

Per pair: ``on_pair`` (the caller's; the operator sends the pair's metrics with it) is called with each
swept or failed target as soon as that pair is done, before the next pair starts, so what a pair did is
reported even when the task is stopped later (a timeout, a killed worker). It must not raise.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from airflow_atlas.airflow.execution.outcome import SweepOptions, SweepOutcome
from airflow_atlas.airflow.targets import SweepTarget
from airflow_atlas.errors import InvalidInputError, LockNotHeldError, TableNotFoundError
from airflow_atlas.locks import Lease
from airflow_atlas.sweep.lease_keeper import LeaseKeeper
from airflow_atlas.sweep.results import ShardSweepResult

log = logging.getLogger(__name__)


class InTaskMode:
    """The ``in_task`` execution mode as an object (:class:`~.outcome.SweepMode`): :func:`sweep_in_task` on the
    task's ``store``; ``in_use`` holds the leases in use (the operator's ``on_kill`` releases them)."""

    name = "in_task"
    hands_over = False

    def __init__(self, store, *, lease_seconds: float, holder_of: Callable[[SweepTarget], str],
                 on_pair: Callable[[SweepTarget], None] = lambda target: None):
        self.store = store
        self.lease_seconds = lease_seconds
        self.holder_of = holder_of
        self.on_pair = on_pair
        self.in_use: dict[str, Lease] = {}

    def sweep(self, context: Mapping | None, targets: list[SweepTarget], options: SweepOptions) -> SweepOutcome:
        swept, failed = sweep_in_task(self.store, targets, options, lease_seconds=self.lease_seconds,
                                      holder_of=self.holder_of, in_use=self.in_use, on_pair=self.on_pair)
        return SweepOutcome(swept=swept, failed=failed, reported=True)

    def kill(self) -> bool:
        return False  # the engine runs in this process; the operator releases the leases in use


def sweep_in_task(
    store,
    targets: list[SweepTarget],
    options: SweepOptions,
    *,
    lease_seconds: float,
    holder_of: Callable[[SweepTarget], str],
    in_use: dict[str, Lease],
    on_pair: Callable[[SweepTarget], None] = lambda target: None,
) -> tuple[list[SweepTarget], list[SweepTarget]]:
    """Sweep ``targets``; returns (the swept targets with their ``result``, the failed targets with the result
    ``{"status": "failed", "error": ...}``). ``on_pair`` gets each of them as soon as its pair is done."""
    out, failed = [], []
    for target in targets:
        try:
            result, lease = _sweep_one(store, target, options, lease_seconds, holder_of, in_use)
        except (InvalidInputError, TableNotFoundError):
            raise
        except Exception as exc:
            log.exception("sweeping %s failed", target.label)
            failed.append(target.with_(result={"status": "failed", "error": f"{type(exc).__name__}: {exc}"}))
            on_pair(failed[-1])
            continue
        log.info(
            "%s: %s after %s iteration(s), progress %s -> %s, %s cell(s) tombstoned, %s aborted write(s) deleted",
            target.label, result.status, result.iterations, result.old_progress,
            result.new_progress, result.cells_tombstoned, result.aborted_writes_deleted,
        )
        swept = target if lease is None else target.with_lease(lease)
        out.append(swept.with_(result=result.to_json()))
        on_pair(out[-1])
    return out, failed


def _sweep_one(store, target: SweepTarget, options: SweepOptions, lease_seconds, holder_of, in_use
               ) -> tuple[ShardSweepResult, Lease | None]:
    """The pair's result and the lease it was swept under (None: not swept under a lease of the group)."""
    engine = {"sweep_ts": target.sweep_ts, "batch_limit": options.batch_limit,
              "max_iterations": options.max_iterations, "dry_run": options.dry_run}
    if target.acquired is False:
        return target.skipped_result(target.held_by), None
    lease = target.lease()
    if lease is None:  # standalone: the engine takes and releases the lock itself
        return store.sweeper.sweep_shard(target.shard, target.strategy, holder=holder_of(target), **engine), None
    lease = _ensure_lease(store, lease, lease_seconds)
    if lease is None:
        state = store.locks.describe(target.lock_name)
        return target.skipped_result(getattr(state, "holder", None)), None
    # Known to on_kill while in use. Kept there when a timeout or termination (BaseException, not
    # Exception) interrupts the sweep: Airflow calls on_kill after this frame has unwound.
    in_use[lease.name] = lease
    try:
        with LeaseKeeper(store.locks, lease, lease_seconds) as keeper:
            result = store.sweeper.sweep_shard(target.shard, target.strategy, lease=lease, **engine)
    except Exception:
        in_use.pop(lease.name, None)
        raise
    in_use.pop(lease.name, None)
    return result, keeper.lease


def _ensure_lease(store, lease: Lease, lease_seconds: float) -> Lease | None:
    """Refresh ``lease``; if it was lost (expired, e.g. between the acquire task and this one or during a
    retry delay, or released by ``on_kill``), take the lock again as the same holder when it is free (a new
    fencing token). None when someone else holds it."""
    try:
        return store.locks.refresh(lease, lease_seconds)
    except LockNotHeldError as lost:
        again = store.locks.acquire(lease.name, lease.holder, lease_seconds)
        log.warning("%s: the lease with token %d was lost before this sweep (%s); %s", lease.name, lease.token, lost,
                    "held by another holder now" if again is None else f"re-acquired as {lease.holder} with token {again.token}")
        return again
