"""What a sweep did: one iteration (:class:`SweepResult`) and one run of a pair (:class:`ShardSweepResult`),
and who holds a pair's lease when a run is skipped (:class:`LockHolderInfo`).

:func:`airflow_atlas.serialisation.to_json` is their one serialisation (XCom, the CLI's ``--json``, the sweep
history; the counts flat, ``None`` stays ``None``). Statuses:

* iteration: ``swept`` | ``caught_up`` | ``blocked`` | ``dry_run`` (``skipped_locked`` from
  :meth:`TargetedSweeper.run_iteration` only);
* run (:meth:`TargetedSweeper.sweep_shard`): ``caught_up`` | ``blocked`` | ``iteration_limit`` (partial:
  more work waits) | ``skipped_locked`` (another holder has the pair's lease; see ``lock_*``) |
  ``failed`` (``error`` says why) | ``dry_run``.
"""
from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import Literal, get_args

from ..serialisation import flatten
from .counts import SweepCounts

RunStatus = Literal["caught_up", "blocked", "iteration_limit", "skipped_locked", "failed", "dry_run"]
"""Every status a run of one pair can end with (the JSON's string)."""
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
IterationStatus = Literal["swept", "caught_up", "blocked", "skipped_locked", "dry_run"]
"""Every status one iteration can end with (the JSON's string)."""


@dataclass
class _SweepFigures:
    """What a sweep did, shared by one iteration and a run of iterations of one pair."""

    shard: int
    strategy: str
    status: str
    sweep_ts: int | None = None
    old_progress: int | None = None
    new_progress: int | None = None
    counts: SweepCounts = field(default_factory=SweepCounts)
    """What it read and wrote (flat in the JSON); a run's: the sum of its iterations'."""
    blocked_by: dict | None = None
    lock_holder: str | None = None
    duration_seconds: float = 0.0
    tables: dict = field(default_factory=dict)  # table -> cells tombstoned
    pace_entries_per_second: float | None = None
    """The pace: of an iteration, the pace at its end; of a run, the pace at its end (0: unthrottled by the
    application pace; None: not paced)."""

    _dump, _load = flatten("counts", SweepCounts)


@dataclass
class SweepResult(_SweepFigures):
    """What one iteration did. ``status``: one of :data:`IterationStatus`."""

    status: IterationStatus


RUN_TOTALS: tuple[str, ...] = ("iterations", *SweepCounts.names())
"""What adds up over several runs, by name (the Spark job's summary, the CLI's totals): their iterations
and their :class:`~airflow_atlas.sweep.counts.SweepCounts`."""


@dataclass
class ShardSweepResult(_SweepFigures):
    """Several iterations of one shard and strategy (until caught up, blocked or the iteration limit).

    ``status``: one of :data:`RUN_STATUSES`. For ``skipped_locked``: ``lock_holder`` (the other holder),
    ``lock_expires_at`` (Unix seconds) and ``lock_holder_process_gone`` (True / False when the holder runs
    on this host, None when that cannot be known). For ``failed``: ``error`` (exception class and message:
    the reason the status and dashboard show). ``max_entries_per_second``: the intensity limit the run used
    (0 = unlimited; with the application pace its safe pace); ``lag``, ``backlog``, ``lag_seconds``: the pair
after the run, filled by the sweeper from what it read (the metrics read no store); ``seconds_paced``: how long it waited between
    iterations to keep to it (:mod:`~airflow_atlas.sweep.pacing.intensity`). ``latency_target``: the application
    pace's target (0 = off, a fixed rate); ``pace_entries_per_second`` and ``pace_reason``: the pace at the
    end of the run and why (e.g. ``"resting: clients alive, no transaction for 4.1 s: unthrottled"``; None when
    not paced), ``pace_backoffs``: how often it halved (:mod:`~airflow_atlas.sweep.pacing.application`)."""

    status: RunStatus
    iterations: int = 0
    error: str | None = None
    max_entries_per_second: int = 0
    seconds_paced: float = 0.0
    latency_target: float = 0.0
    pace_reason: str | None = None
    pace_backoffs: int = 0
    lock_expires_at: float | None = None
    lock_holder_process_gone: bool | None = None
    lag: int | None = None
    """After the run: logical timestamps between the pair's progress and the run's sweep timestamp (0 when
    caught up); None when the run swept nothing to measure (skipped, failed, a dry run)."""
    backlog: int | None = None
    """After the run: queued writes above the pair's progress, not yet swept (below the sweep timestamp and
    at or above it), counted up to the queue reader's ``DEFAULT_COUNT_CAP``; None as for ``lag``."""
    lag_seconds: float | None = None
    """After the run: 0.0 when nothing sweepable is left (caught up); None when the sweeper cannot know the
    age of the oldest sweepable entry (that needs the status's timestamp clock, :mod:`airflow_atlas.status.lag`)."""
    queue_rows_reconciled: int | None = None
    """Queue rows wholly below the run's final progress that the run's reconcile deleted (leftovers of an
    interrupted clean; 0 when none were left); None when it did not reconcile (skipped, failed, a dry run)."""

    def add(self, it: SweepResult) -> None:
        self.iterations += 1
        self.counts += it.counts
        for table, n in it.tables.items():
            self.tables[table] = self.tables.get(table, 0) + n
        if self.old_progress is None:
            self.old_progress = it.old_progress
        if it.new_progress is not None:
            self.new_progress = it.new_progress
        self.sweep_ts = it.sweep_ts
        self.blocked_by = it.blocked_by


@dataclass(frozen=True)
class LockHolderInfo:
    """Who holds a pair's lease: ``holder``, ``expires_at`` (Unix seconds) and whether the holder's process
    is gone (:func:`holder_process_gone`)."""

    holder: str | None
    expires_at: float | None
    process_gone: bool | None


def default_holder() -> str:
    """``host:pid:random``: unique per sweeper, and tells :func:`holder_process_gone` where it ran."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def holder_process_gone(holder: str | None) -> bool | None:
    """Whether the process that holds a lease has ended: True / False when ``holder`` is a
    :func:`default_holder` name of this host (its pid is looked up), None when it cannot be known (another
    host, or a holder name of another form, e.g. an Airflow task's)."""
    if not holder:
        return None
    parts = holder.split(":")
    if len(parts) < 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return None
    pid = int(parts[1])
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # exists, owned by another user
        return False
    except OSError:
        return None
    return False


__all__ = [
    "RUN_TOTALS",
    "SweepResult",
    "ShardSweepResult",
    "LockHolderInfo",
    "RUN_STATUSES",
    "IterationStatus",
    "RunStatus",
    "default_holder",
    "holder_process_gone",
]
