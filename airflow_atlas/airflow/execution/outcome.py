"""What every execution mode of the targeted sweep shares, a leaf: the interface of a mode
(:class:`SweepMode`: :class:`~.in_task.InTaskMode`, :class:`~.spark.SparkMode`,
:class:`~.deferred.DeferredMode`, interchangeable in the operator), the engine arguments they run with
(:class:`SweepOptions`) and what a mode returns (:class:`SweepOutcome`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_atlas.airflow.targets import SweepTarget


@dataclass(frozen=True)
class SweepOptions:
    """The engine arguments of a targeted sweep task (validated by the operator): per pair, the engine's
    ``sweep_shard(batch_limit=, max_iterations=, dry_run=)``."""

    batch_limit: int
    max_iterations: int
    dry_run: bool = False


@dataclass
class SweepOutcome:
    """What a mode's run gives the operator: the swept targets (each with its ``result``; a pair whose lock
    another holder has is swept too, its result ``skipped_locked``), the failed ones (in the task: a failing
    pair does not stop the others), the Spark job's document (Spark modes), the trigger to defer to (deferred
    mode: the results come in ``execute_complete``), and whether the pairs' metrics were ``reported``
    already, pair by pair (in the task)."""

    swept: list[SweepTarget]
    failed: list[SweepTarget] = field(default_factory=list)
    document: Any = None
    trigger: Any = None
    reported: bool = False


class SweepMode(Protocol):
    """One way to run a task's targeted sweep: every pair through the engine's ``sweep_shard``, which takes,
    keeps and releases the pair's lease itself (in the task, or in a Spark task). ``name``: the
    ``execution_mode`` the targets record; :meth:`kill` stops what runs (an operator's ``on_kill``)."""

    name: str

    def sweep(self, context: Mapping | None, targets: list[SweepTarget], options: SweepOptions) -> SweepOutcome: ...

    def kill(self) -> bool: ...
