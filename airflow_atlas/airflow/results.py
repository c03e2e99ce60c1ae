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
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_atlas.sweep.legacy import LEGACY_SUMMED_FIELDS
from airflow_atlas.sweep.results import RUN_TOTALS
from airflow_atlas.sweep.scrub import ScrubResult

FULL_SWEEP_SUMMED: tuple[str, ...] = (*LEGACY_SUMMED_FIELDS, "duration_seconds")
"""The figures a full sweep adds up over its scan ranges (the legacy sweeper's, from their one home)."""


@dataclass(frozen=True)
class SweepTimestamps:
    """The sweep timestamp of each sweepable strategy, computed once for a run."""

    timestamps: dict[str, int]

    def to_json(self) -> dict:
        return dict(self.timestamps)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SweepTimestamps:
        return cls({str(k): int(v) for k, v in data.items()})


@dataclass(frozen=True)
class FullSweepPart:
    """One mapped full-sweep task: a table with its scan ranges (in the task) or its number of parts (one
    Spark job splits the table). Only the keys in use are in the JSON: they are the task's arguments."""

    table: str
    sweep_ts: int
    scan_ranges: list[dict] | None = None
    parts: int | None = None

    def to_json(self) -> dict:
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass(frozen=True)
class FullSweepResult:
    """The totals of a full sweep of one table (over its ranges, or the Spark job's); ``spark`` (app id
    and master) only in Spark mode."""

    table: str
    strategy: str
    sweep_ts: int | None
    ranges: int
    dry_run: bool
    cells_examined: int = 0
    versions_examined: int = 0
    versions_deleted: int = 0
    sentinels_written: int = 0
    transactions_aborted: int = 0
    duration_seconds: float = 0.0
    swept_tables: list[dict] = field(default_factory=list)
    spark: dict | None = None

    def to_json(self) -> dict:
        data = asdict(self)
        if data["spark"] is None:
            del data["spark"]
        return data


@dataclass(frozen=True)
class ScrubReport:
    """The engine's :class:`~airflow_atlas.sweep.scrub.ScrubResult` of one scrub task, with ``dry_run`` and
    ``swept_tables``."""

    result: ScrubResult
    dry_run: bool
    swept_tables: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {**self.result.to_json(), "dry_run": self.dry_run, "swept_tables": list(self.swept_tables)}


@dataclass
class SweepSummary:
    """Totals of a targeted-sweep run over every pair that finished; ``reclaimed_queue_rows``: the queue rows
    the pairs' runs reconciled (``queue_rows_reconciled``); ``failed_pairs``: planned pairs with no outcome
    (``STRATEGY/shard``)."""

    pairs: int
    by_status: dict[str, int] = field(default_factory=dict)
    tables: dict[str, int] = field(default_factory=dict)
    reclaimed_queue_rows: int = 0
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RUN_TOTALS, 0))
    """The sums of :data:`~airflow_atlas.sweep.results.RUN_TOTALS` over the pairs (flat in the JSON)."""
    failed_pairs: list[str] = field(default_factory=list)
    engine_seconds: float = 0.0
    """The pairs' sweep time in the engine (the sum of their ``duration_seconds``): a run's wall time less
    this, over its worker slots, is what orchestration cost (bench/orchestration/)."""

    def add(self, result: Mapping[str, Any]) -> None:
        """Count one finished pair: its sweep ``result`` (the engine's ``ShardSweepResult`` JSON)."""
        status = str(result.get("status", "unknown"))
        self.by_status[status] = self.by_status.get(status, 0) + 1
        self.engine_seconds += float(result.get("duration_seconds") or 0.0)
        for key in RUN_TOTALS:
            self.totals[key] += int(result.get(key) or 0)
        for table, n in (result.get("tables") or {}).items():
            self.tables[table] = self.tables.get(table, 0) + int(n)
        self.reclaimed_queue_rows += int(result.get("queue_rows_reconciled") or 0)

    def to_json(self) -> dict:
        out = asdict(self)
        return {**out, **out.pop("totals")}


__all__ = [
    "FULL_SWEEP_SUMMED",
    "FullSweepPart",
    "FullSweepResult",
    "ScrubReport",
    "SweepSummary",
    "SweepTimestamps",
]
