"""What every execution mode of the targeted sweep shares, a leaf: the interface of a mode
(:class:`SweepMode`: :class:`~.in_task.InTaskMode`, :class:`~.spark.SparkMode`,
:class:`~.deferred.DeferredMode`, interchangeable in the operator) and what a mode returns
(:class:`SweepOutcome`), and the targets' split into those whose lock was not acquired and the others.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_atlas.airflow.targets import SweepTarget


@dataclass(frozen=True)
class SweepOptions:
    """The engine arguments of a targeted sweep task (validated by the operator)."""

    batch_limit: int
    max_iterations: int
    dry_run: bool = False


@dataclass
class SweepOutcome:
    """What a mode's run gives the operator: the swept targets (each with its ``result``), the failed ones
    (in the task: a failing pair does not stop the others), the Spark job's document (Spark modes), the
    trigger to defer to (deferred mode: the results come in ``execute_complete``), and whether the pairs'
    metrics were ``reported`` already, pair by pair (in the task)."""

    swept: list[SweepTarget]
    failed: list[SweepTarget] = field(default_factory=list)
    document: Any = None
    trigger: Any = None
    reported: bool = False


class SweepMode(Protocol):
    """One way to run a task's targeted sweep. ``name``: the ``execution_mode`` the targets record;
    ``hands_over``: the pairs' leases are released by the operator right before the run (the Spark
    tasks take each pair's lock themselves); :meth:`kill` stops what runs (an operator's ``on_kill``)."""

    name: str
    hands_over: bool

    def sweep(self, context: Mapping | None, targets: list[SweepTarget], options: SweepOptions) -> SweepOutcome: ...

    def kill(self) -> bool: ...


def split_targets(targets: list[SweepTarget]) -> tuple[list[SweepTarget], list[SweepTarget]]:
    """``(skipped, pairs)``: the targets whose lock was not acquired (as ``skipped_locked``), and the others."""
    return [t.skipped(t.held_by) for t in targets if t.acquired is False], [t for t in targets if t.acquired is not False]
