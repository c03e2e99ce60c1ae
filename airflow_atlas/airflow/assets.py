"""Assets: one per swept table, ``atlas://<store_conn_id>/<table>``, reached through one alias.

Every task that writes tombstones into tables (targeted sweep, full sweep, scrub) lists them in its
result under ``"swept_tables"`` (:class:`TableTombstones`, one format for all three). An
:class:`EmitSweptTablesOperator` after them adds one asset event per table through the alias
:data:`SWEPT_TABLES`, its ``extra`` carrying the counts::

    {"store_conn_id": "atlas_default", "table": "orders", "tombstones": 1234,
     "cells_tombstoned": 1200, "versions_deleted": 34, "source": "atlas_targeted_sweep"}

``atlas_compaction`` is scheduled on the alias, so it runs after any of them (the events only trigger it: it
reads each table's tombstone count from the store, :mod:`airflow_atlas.compaction`). Users can schedule their own DAGs on a table's asset
(:func:`table_asset`) or on the alias.

**Catching up.** Airflow keeps no asset-triggered run for a paused DAG, and a task's result can be lost
(a retry that swept nothing after a killed first try did the work). So the operator also reads the store:
every table that is *due* for compaction (its tombstones since its last compaction, counted by the store,
reached ``compaction_threshold_tombstones``: :func:`airflow_atlas.compaction.due_for_compaction`) gets an
event too, on every sweep run, until it is compacted - an unpaused ``atlas_compaction`` compacts at the
next sweep run (every ``targeted_sweep_schedule``), whatever that run swept. The extra of a due table's
event carries ``"tombstones_since_compaction"`` (zero counts for this run when it wrote none). A table below
the threshold gets no event for earlier tombstones (its compaction would do nothing), so an idle store
triggers no compaction runs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, AssetAlias

from airflow_atlas.airflow.operators.base import AtlasBaseOperator
from airflow_atlas.airflow.reports import TableTombstones, swept_tables, tombstones_by_table

if TYPE_CHECKING:
    from airflow.sdk import Context
    from pydantic import JsonValue

    from airflow_atlas.airflow.settings import AtlasSettings

__all__ = ["SWEPT_TABLES", "EmitSweptTablesOperator", "TableTombstones", "swept_tables", "table_asset",
           "tombstones_by_table"]

SWEPT_TABLES = AssetAlias("atlas_swept_tables")
"""Alias through which every per-table "tombstones were written" event is emitted."""


def table_asset(store_conn_id: str, table: str) -> Asset:
    return Asset(uri=f"atlas://{store_conn_id}/{table}", name=f"atlas_{store_conn_id}_{table}", group="atlas")


class EmitSweptTablesOperator(AtlasBaseOperator):
    """Emit one asset event per table that got tombstones, through :data:`SWEPT_TABLES`.

    :param reports: outputs of sweep / full-sweep / scrub tasks, any nesting of lists (templated; mapped
        task outputs work). Failed tasks' missing outputs are simply absent.
    :param source: free text recorded in each event (default the DAG id).
    :param store_conn_id: the store the reports are about; default setting ``store_conn_id``.

    Returns ``{table: counts}``: this run's tables and the due ones (with ``tombstones_since_compaction``).
    Reads the due tables from the store; when it cannot (store unreachable) it logs a warning and announces
    this run's tables only. Run it with ``trigger_rule="all_done"`` so the tables swept by the pairs that
    succeeded are announced even when another pair failed.
    """

    template_fields = (*AtlasBaseOperator.template_fields, "reports", "source")

    def __init__(self, *, reports: Any = None, source: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("outlets", [SWEPT_TABLES])
        super().__init__(**kwargs)
        self.reports = reports
        self.source = source

    def execute(self, context: Context) -> dict[str, dict[str, int]]:
        from airflow_atlas.airflow.settings import AtlasSettings

        settings = AtlasSettings.load()
        conn_id = self.resolved_conn_id(settings)
        counts = tombstones_by_table(self.reports)
        for table, pending in self._due(settings).items():
            counts.setdefault(table, {"tombstones": 0, "cells_tombstoned": 0, "versions_deleted": 0})
            counts[table]["tombstones_since_compaction"] = pending
        events = context["outlet_events"][SWEPT_TABLES]
        for table, table_counts in sorted(counts.items()):
            extra: dict[str, JsonValue] = {"store_conn_id": conn_id, "table": table, "source": self.source or self.dag_id, **table_counts}
            events.add(table_asset(conn_id, table), extra=extra)
            self.log.info("asset event for %s: %s", table, extra)
        if not counts:
            self.log.info("no table got tombstones and none is due for compaction: no asset event")
        return counts

    def _due(self, settings: AtlasSettings) -> dict[str, int]:
        """The store's tables due for compaction, ``{}`` when the store cannot tell (logged, never fatal: this
        run's own tables are announced all the same)."""
        from airflow_atlas.compaction import due_for_compaction

        try:
            with self.open_store(settings) as store:
                return due_for_compaction(store, threshold=settings.compaction_threshold_tombstones)
        except Exception as exc:
            self.log.warning("could not read which tables are due for compaction (%s: %s): announcing this run's "
                             "tables only", type(exc).__name__, exc)
            return {}
