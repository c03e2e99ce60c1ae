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
"""
from __future__ import annotations

from typing import Any

from airflow.sdk import Asset, AssetAlias

from airflow_atlas.airflow.operators.base import AtlasBaseOperator
from airflow_atlas.airflow.reports import TableTombstones, swept_tables, tombstones_by_table

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

    Returns ``{table: counts}``. Does not open the store. Run it with ``trigger_rule="all_done"`` so the
    tables swept by the pairs that succeeded are announced even when another pair failed.
    """

    template_fields = (*AtlasBaseOperator.template_fields, "reports", "source")

    def __init__(self, *, reports: Any = None, source: str | None = None, **kwargs):
        kwargs.setdefault("outlets", [SWEPT_TABLES])
        super().__init__(**kwargs)
        self.reports = reports
        self.source = source

    def execute(self, context):
        from airflow_atlas.airflow.settings import AtlasSettings

        settings = AtlasSettings.load()
        conn_id = self.resolved_conn_id(settings)
        counts = tombstones_by_table(self.reports)
        events = context["outlet_events"][SWEPT_TABLES]
        for table, table_counts in sorted(counts.items()):
            extra = {"store_conn_id": conn_id, "table": table, "source": self.source or self.dag_id, **table_counts}
            events.add(table_asset(conn_id, table), extra=extra)
            self.log.info("asset event for %s: %s", table, extra)
        if not counts:
            self.log.info("no table got tombstones: no asset event")
        return counts
