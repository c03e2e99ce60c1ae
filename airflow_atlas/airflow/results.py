"""What the operators return, as dataclasses; :func:`airflow_atlas.airflow.xcom.to_xcom` turns them into
the XCom JSON once, in ``execute``. (The targeted sweep's results travel inside
:class:`~airflow_atlas.airflow.targets.SweepTarget`; compaction's are the engine's
:class:`~airflow_atlas.compaction.CompactionResult`.)

* :class:`SweepTimestamps` - ``ComputeSweepTimestampsOperator``: ``{strategy: ts}``;
* :class:`FullSweepPart` - ``PlanFullSweepOperator``, one per mapped full-sweep task (its JSON is the
  task's keyword arguments: ``expand_kwargs``);
* :class:`FullSweepResult` - ``FullTableSweepOperator``;
* :class:`ScrubReport` - ``ScrubOperator``;
* :class:`SweepSummary` - ``SweepSummaryOperator``.

Results that write tombstones carry ``swept_tables`` (:class:`~airflow_atlas.airflow.reports.TableTombstones`
JSON, nothing for a dry run): what the asset events are made of.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import model_serializer

from airflow_atlas.serialisation import OMIT_NONE, flatten
from airflow_atlas.sweep.counts import ScanCounts, SweepCounts
from airflow_atlas.sweep.scrub import ScrubResult


@dataclass(frozen=True)
class SweepTimestamps:
    """The sweep timestamp of each sweepable strategy, computed once for a run."""

    timestamps: dict[str, int]

    @model_serializer
    def _dump(self) -> dict[str, int]:
        """The JSON is the mapping itself: ``{strategy: ts}``."""
        return dict(self.timestamps)


@dataclass(frozen=True)
class FullSweepPart:
    """One mapped full-sweep task: a table with its scan ranges (in the task) or its number of parts (one
    Spark job splits the table). Only the keys in use are in the JSON: they are the task's arguments."""

    table: str
    sweep_ts: int
    scan_ranges: Annotated[list[dict] | None, OMIT_NONE] = None
    parts: Annotated[int | None, OMIT_NONE] = None


@dataclass(frozen=True)
class FullSweepResult:
    """The totals of a full sweep of one table (over its ranges, or the Spark job's); ``spark`` (app id
    and master) only in Spark mode."""

    table: str
    strategy: str
    sweep_ts: int | None
    ranges: int
    dry_run: bool
    counts: ScanCounts = field(default_factory=ScanCounts)
    """The sum of the ranges' counts (flat in the JSON)."""
    duration_seconds: float = 0.0
    swept_tables: list[dict] = field(default_factory=list)
    spark: Annotated[dict | None, OMIT_NONE] = None

    _dump, _load = flatten("counts", ScanCounts)


@dataclass(frozen=True)
class ScrubReport:
    """The engine's :class:`~airflow_atlas.sweep.scrub.ScrubResult` of one scrub task, with ``dry_run`` and
    ``swept_tables``."""

    result: ScrubResult
    """Flat in the JSON: its fields, then ``dry_run`` and ``swept_tables``."""
    dry_run: bool
    swept_tables: list[dict] = field(default_factory=list)

    _dump, _load = flatten("result", ScrubResult)


@dataclass
class SweepSummary:
    """Totals of a targeted-sweep run over every pair that finished; ``reclaimed_queue_rows``: the queue rows
    the pairs' runs reconciled (``queue_rows_reconciled``); ``failed_pairs``: planned pairs with no outcome
    (``STRATEGY/shard``)."""

    pairs: int
    by_status: dict[str, int] = field(default_factory=dict)
    tables: dict[str, int] = field(default_factory=dict)
    reclaimed_queue_rows: int = 0
    failed_pairs: list[str] = field(default_factory=list)
    engine_seconds: float = 0.0
    """The pairs' sweep time in the engine (the sum of their ``duration_seconds``): a run's wall time less
    this, over its worker slots, is what orchestration cost (bench/orchestration/)."""
    iterations: int = 0
    counts: SweepCounts = field(default_factory=SweepCounts)
    """The sum of the pairs' counts (flat in the JSON)."""

    def add(self, result: Mapping[str, Any]) -> None:
        """Count one finished pair: its sweep ``result`` (the engine's ``ShardSweepResult`` JSON)."""
        status = str(result.get("status", "unknown"))
        self.by_status[status] = self.by_status.get(status, 0) + 1
        self.engine_seconds += float(result.get("duration_seconds") or 0.0)
        self.iterations += int(result.get("iterations") or 0)
        self.counts += SweepCounts.of(result)
        for table, n in (result.get("tables") or {}).items():
            self.tables[table] = self.tables.get(table, 0) + int(n)
        self.reclaimed_queue_rows += int(result.get("queue_rows_reconciled") or 0)

    _dump, _load = flatten("counts", SweepCounts)


__all__ = [
    "FullSweepPart",
    "FullSweepResult",
    "ScrubReport",
    "SweepSummary",
    "SweepTimestamps",
]
