"""Legacy (full-table) sweep: scan a whole table for obsolete versions. For data written before the sweep
queue existed, or to double-check a table; targeted sweep is the normal path."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from airflow.sdk import XComArg

from airflow_atlas.airflow.execution import run_mode
from airflow_atlas.airflow.execution.spark import spark_runner
from airflow_atlas.airflow.operators.base import AtlasBaseOperator, AtlasSweepRunOperator
from airflow_atlas.airflow.reports import swept_tables
from airflow_atlas.airflow.results import FullSweepPart, FullSweepResult
from airflow_atlas.airflow.settings import AtlasSettings
from airflow_atlas.airflow.xcom import to_xcom
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.api import ScanRange
from airflow_atlas.spark import FullSweepJob
from airflow_atlas.sweep.counts import ScanCounts

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow.sdk import Context

    from airflow_atlas.kvs.tables import SweepStrategy
    from airflow_atlas.store import AtlasStore


def scan_range_to_json(scan_range: ScanRange) -> dict:
    def enc(value: Any) -> Any:
        return {"hex": bytes(value).hex()} if isinstance(value, (bytes, bytearray)) else value

    return {"kind": scan_range.kind, "start": enc(scan_range.start), "end": enc(scan_range.end)}


def scan_range_from_json(data: Any) -> ScanRange:
    if isinstance(data, ScanRange):
        return data
    if not isinstance(data, dict) or set(data) != {"kind", "start", "end"}:
        raise InvalidInputError(f"a scan range is {{'kind', 'start', 'end'}}, got {data!r}")

    def dec(value: Any) -> Any:
        if isinstance(value, dict):
            return bytes.fromhex(value["hex"])
        return value

    return ScanRange(data["kind"], dec(data["start"]), dec(data["end"]))


class PlanFullSweepOperator(AtlasBaseOperator):
    """Split tables into scan ranges for a mapped :class:`FullTableSweepOperator`.

    Returns a list of :class:`~airflow_atlas.airflow.results.FullSweepPart` JSON: ``{"table", "sweep_ts",
    "scan_ranges": [range]}`` (one per range, ``in_task`` mode) or one ``{"table", "sweep_ts", "parts"}`` per
    table (``spark`` mode: the job splits the table).
    The sweep timestamp of each strategy is computed once for the whole run.

    :param tables: tables to sweep (templated); default every user table that is swept (not NOTHING).
        Unknown tables and tables with strategy NOTHING fail the task (no retry).
    :param parts: ranges per table; default setting ``full_sweep_parts`` (templated).
    :param execution_mode: ``"in_task"`` or ``"spark"`` (``"auto"`` means ``"in_task"``: a scan has no queue
        backlog to judge by); default setting ``execution_mode`` (templated).
    :param store_conn_id: see :class:`~airflow_atlas.airflow.operators.base.AtlasBaseOperator`.
    """

    template_fields = (*AtlasBaseOperator.template_fields, "tables", "parts", "execution_mode")

    def __init__(
        self,
        *,
        tables: list[str] | XComArg | None = None,
        parts: int | XComArg | None = None,
        execution_mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.tables = tables
        self.parts = parts
        self.execution_mode = execution_mode

    def execute_with_store(self, context: Context, store: AtlasStore, settings: AtlasSettings) -> Any:
        known = store.user_tables()
        tables = list(cast(list[str], self.tables)) if self.tables else sorted(t for t, s in known.items() if s.is_swept)
        unknown = sorted(set(tables) - set(known))
        if unknown:
            raise InvalidInputError(f"unknown table(s): {', '.join(unknown)}; tables: {', '.join(sorted(known)) or 'none'}")
        never = [t for t in tables if not known[t].is_swept]
        if never:
            raise InvalidInputError(f"table(s) {', '.join(never)} have sweep strategy NOTHING and are never swept")
        timestamps = store.sweep_timestamps.all()
        mode = run_mode(self.execution_mode or settings.execution_mode)
        parts = cast(int | None, self.parts) or settings.full_sweep_parts  # rendered: no XComArg left
        out: list[FullSweepPart] = []
        for table in tables:
            sweep_ts = timestamps[known[table].value]
            if mode == "spark":
                out.append(FullSweepPart(table, sweep_ts, parts=parts))
                continue
            for scan_range in store.kvs.split_ranges(table, parts):
                out.append(FullSweepPart(table, sweep_ts, scan_ranges=[scan_range_to_json(scan_range)]))
        self.log.info("full sweep of %d table(s) in %d task(s)", len(tables), len(out))
        return to_xcom(out)


class FullTableSweepOperator(AtlasSweepRunOperator):
    """Legacy sweep of one table (or some scan ranges of it).

    :param table: the table (templated).
    :param scan_ranges: ranges to sweep, as produced by :class:`PlanFullSweepOperator` (templated);
        default the whole table (split into ``parts`` ranges swept one after the other).
    :param parts: ranges to split the table into when ``scan_ranges`` is not given; in ``spark`` mode the
        number of Spark tasks (default setting ``full_sweep_parts``) (templated).
    :param sweep_ts: sweep timestamp (templated); default computed from the table's strategy (in
        ``spark`` mode the job computes it once for all its ranges).
    :param batch_size: cells per delete batch; default setting ``full_sweep_batch_size`` (templated).
    :param dry_run: report what would be deleted, delete nothing (templated).
    :param execution_mode: ``"in_task"`` or ``"spark"`` (one Spark job for the table, via
        the runner of the Spark connection, :mod:`airflow_atlas.airflow.execution.spark`; ``"auto"`` means ``"in_task"``); default
        setting ``execution_mode``.
    :param spark_conn_id: default setting ``spark_conn_id``.
    :param store_conn_id: see :class:`~airflow_atlas.airflow.operators.base.AtlasBaseOperator`.

    Returns the totals, :class:`~airflow_atlas.airflow.results.FullSweepResult` JSON: ``{"table", "strategy",
    "sweep_ts", "ranges", "dry_run", "cells_examined", "versions_examined", "versions_deleted",
    "sentinels_written", "transactions_aborted", "duration_seconds", "swept_tables"}`` (+ ``"spark"``).

    (The ``dry_run`` argument is kept as ``sweep_dry_run``: ``dry_run`` is a method of ``BaseOperator``.)
    """

    template_fields = (*AtlasSweepRunOperator.template_fields, "table", "scan_ranges", "batch_size", "parts")

    def __init__(
        self, *, table: str, scan_ranges: list | None = None, batch_size: int | None = None, parts: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.scan_ranges = scan_ranges
        self.batch_size = batch_size
        self.parts = parts

    def execute_with_store(self, context: Context, store: AtlasStore, settings: AtlasSettings) -> Any:
        mode = run_mode(self.execution_mode or settings.execution_mode)
        strategy = store.kvs.get_metadata(self.table).strategy  # TableNotFoundError -> no retry
        if not strategy.is_swept:
            raise InvalidInputError(f"table {self.table!r} has sweep strategy NOTHING: it is never swept")
        sweep_ts = self.sweep_ts if self.sweep_ts is not None else store.sweep_timestamps.sweep_timestamp(strategy)
        batch_size = self.batch_size or settings.full_sweep_batch_size
        dry_run = self.sweep_dry_run is True
        if mode == "spark":
            return to_xcom(self._sweep_spark(context, settings, strategy, batch_size, dry_run))
        ranges: Sequence[ScanRange | None]  # None: the whole table
        if self.scan_ranges:
            ranges = [scan_range_from_json(r) for r in self.scan_ranges]
        elif self.parts:
            ranges = store.kvs.split_ranges(self.table, self.parts)
        else:
            ranges = [None]
        counts, seconds = ScanCounts(), 0.0
        for scan_range in ranges:
            result = store.legacy_sweeper.sweep_table(
                self.table, scan_range=scan_range, batch_size=batch_size, sweep_ts=sweep_ts, dry_run=dry_run
            )
            self.log.info("legacy sweep of %s range %s: %s", self.table, scan_range, result)
            counts += result.counts
            seconds += result.duration_seconds
        return to_xcom(FullSweepResult(
            table=self.table, strategy=strategy.value, sweep_ts=sweep_ts, ranges=len(ranges), dry_run=dry_run,
            counts=counts, duration_seconds=round(seconds, 6),
            swept_tables=_swept(self.table, dry_run, counts.versions_deleted),
        ))

    def _sweep_spark(self, context: Context, settings: AtlasSettings, strategy: SweepStrategy, batch_size: int, dry_run: bool) -> FullSweepResult:
        run_settings = self.run_settings(settings)
        runner = self.killing(spark_runner(run_settings.spark_conn_id))
        job = FullSweepJob(table=self.table, parts=self.parts or settings.full_sweep_parts, batch_size=batch_size,
                           dry_run=dry_run)
        document = runner.run(job, run_settings, self.store_address(), context)
        self.log.info("Spark job %s: %s", document.app_id, document.summary)
        counts = ScanCounts.of(document.summary)
        return FullSweepResult(
            table=self.table, strategy=strategy.value, sweep_ts=document.params.get("sweep_ts"),
            ranges=len(document.params.get("ranges") or []), dry_run=dry_run, counts=counts,
            duration_seconds=float(document.duration_seconds or 0.0),
            swept_tables=_swept(self.table, dry_run, counts.versions_deleted),
            spark={"app_id": document.app_id, "master": document.master},
        )


def _swept(table: str, dry_run: bool, versions_deleted: int) -> list[dict]:
    """The result's ``swept_tables`` (see :mod:`airflow_atlas.airflow.assets`)."""
    return [] if dry_run else swept_tables(versions={table: versions_deleted})
