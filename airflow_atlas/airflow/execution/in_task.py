"""Targeted sweep inside the Airflow task: each pair through the engine entry point
:meth:`TargetedSweeper.sweep_shard`, which owns the pair's lease for the whole run - it takes it as the
pair's holder in this DAG run (``holder_of``: the same for every try of the task, so a retry takes over the
lease a dead try left instead of waiting for it to expire), waiting up to the setting ``lock_wait_seconds``
for another holder's, keeps it refreshed, reconciles the pair's queue below its progress and releases it, whatever
happened (a timeout too). A pair whose lock another holder has comes back ``skipped_locked``. The task holds
a lease only while one of its pairs is being swept, and only that pair's.

Isolation: pairs are swept one after the other; a failing pair does not stop the others (its error is
returned); bad input (``InvalidInputError``, ``TableNotFoundError``) fails the whole call at once. Once
:meth:`InTaskMode.kill` was called (the operator's ``on_kill``), no further pair starts: they are returned
failed.

Per pair: ``on_pair`` (the caller's; the operator sends the pair's metrics with it) is called with each
swept or failed target as soon as that pair is done, before the next pair starts, so what a pair did is
reported even when the task is stopped later (a timeout, a killed worker). It must not raise.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from airflow_atlas.airflow.execution.outcome import SweepOptions, SweepOutcome
from airflow_atlas.airflow.targets import SKIPPED, SweepTarget
from airflow_atlas.errors import InvalidInputError, TableNotFoundError
from airflow_atlas.serialisation import to_json

if TYPE_CHECKING:
    from airflow_atlas.store import AtlasStore

log = logging.getLogger(__name__)

KILLED = "the task was killed before this pair was swept"


class InTaskMode:
    """The ``in_task`` execution mode as an object (:class:`~.outcome.SweepMode`): :func:`sweep_in_task` on the
    task's ``store``; :meth:`kill` lets no further pair start."""

    name = "in_task"

    def __init__(self, store: AtlasStore, *, holder_of: Callable[[SweepTarget], str],
                 on_pair: Callable[[SweepTarget], None] = lambda target: None) -> None:
        self.store = store
        self.holder_of = holder_of
        self.on_pair = on_pair
        self._killed = threading.Event()

    def sweep(self, context: Mapping | None, targets: list[SweepTarget], options: SweepOptions) -> SweepOutcome:
        swept, failed = sweep_in_task(self.store, targets, options, holder_of=self.holder_of, on_pair=self.on_pair,
                                      killed=self._killed.is_set)
        return SweepOutcome(swept=swept, failed=failed, reported=True)

    def kill(self) -> bool:
        """No further pair starts (the pair being swept stops when its lease is released: the operator's
        ``on_kill`` releases it)."""
        self._killed.set()
        return True


def sweep_in_task(
    store: AtlasStore,
    targets: list[SweepTarget],
    options: SweepOptions,
    *,
    holder_of: Callable[[SweepTarget], str],
    on_pair: Callable[[SweepTarget], None] = lambda target: None,
    killed: Callable[[], bool] = lambda: False,
) -> tuple[list[SweepTarget], list[SweepTarget]]:
    """Sweep ``targets``; returns (the swept targets with their ``result`` - ``skipped_locked`` ones
    included -, the failed targets with the result ``{"status": "failed", "error": ...}``). ``on_pair`` gets
    each of them as soon as its pair is done; once ``killed()``, the pairs left are failed without a sweep."""
    out, failed = [], []
    for target in targets:
        if killed():
            failed.append(target.with_(result={"status": "failed", "error": KILLED}))
            continue
        try:
            result = store.sweeper.sweep_shard(
                target.shard, target.strategy, sweep_ts=target.sweep_ts, holder=holder_of(target),
                batch_limit=options.batch_limit, max_iterations=options.max_iterations, dry_run=options.dry_run)
        except (InvalidInputError, TableNotFoundError):
            raise
        except Exception as exc:
            log.exception("sweeping %s failed", target.label)
            failed.append(target.with_(result={"status": "failed", "error": f"{type(exc).__name__}: {exc}"}))
            on_pair(failed[-1])
            continue
        if result.status == SKIPPED:
            log.warning("%s: skipped, its lock is held by %s (until %s)", target.label, result.lock_holder,
                        result.lock_expires_at)
        else:
            log.info(
                "%s: %s after %s iteration(s), progress %s -> %s, %s cell(s) tombstoned, %s aborted write(s) "
                "deleted, %s queue row(s) reconciled", target.label, result.status, result.iterations,
                result.old_progress, result.new_progress, result.counts.cells_tombstoned, result.counts.aborted_writes_deleted,
                result.queue_rows_reconciled,
            )
        out.append(target.with_(result=to_json(result)))
        on_pair(out[-1])
    return out, failed
