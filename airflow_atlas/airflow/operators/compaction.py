"""Reclaim the space that sweep frees: compaction on Cassandra, VACUUM on the embedded store.

Sweep only writes tombstones; Cassandra drops the deleted data (and, after ``gc_grace_seconds``, the
tombstones) when the sstables holding them are compacted together. Compacting after every sweep would
waste I/O, so a table is compacted only when the tombstones written into it since its last compaction reach
``compaction_threshold_tombstones``. Those counts come from the store's own records of every sweep step and
every compaction (:mod:`airflow_atlas.sweep.history`), not from what Airflow was told: the asset events only
trigger the run. The policy (counts, what is due, the compaction lease, the repair guard, the backends) is
the engine's :mod:`airflow_atlas.compaction`; this operator resolves its arguments and calls
:func:`~airflow_atlas.compaction.compact_due_tables` with the store's compactor.

On Cassandra a due table is compacted only when the repair guard
(:func:`airflow_atlas.airflow.hooks.repair.check_table`) allows it: with more than one replica, compaction
must not purge a sweep tombstone that may not have reached every replica, so the table needs a complete
repair (whole ring, every replica) that started less than ``gc_grace_seconds`` (minus a margin) ago.
Otherwise the table is skipped - its count is kept, the reason is logged as a warning and returned under
``skipped`` - and the next run tries again. A role that may not read the repair history fails the task at
once, without retry (:class:`~airflow_atlas.errors.StorePermissionError` naming the SELECT on
``system_distributed.parent_repair_history`` that ``atlas-sweep grants`` prints).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_atlas.airflow.hooks.compaction import compactor_for
from airflow_atlas.airflow.operators.base import AtlasBaseOperator
from airflow_atlas.airflow.xcom import to_xcom
from airflow_atlas.compaction import compact_due_tables

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_atlas.airflow.settings import AtlasSettings
    from airflow_atlas.store import AtlasStore


class CompactionOperator(AtlasBaseOperator):
    """Compact the tables whose tombstones since their last compaction (counted by the store) reached the
    threshold; report the space before and after; the store records each compaction (its count restarts).

    Cassandra: for each due table that the repair guard allows, ``nodetool flush``, then ``nodetool
    compact`` (or ``garbagecollect``) of the table, through the runner (local command or SSH per node,
    settings ``nodetool_command`` / ``nodetool_ssh_conn_ids``); space is ``space_used_live`` of ``nodetool
    tablestats`` summed over the runner's nodes (:mod:`airflow_atlas.airflow.hooks.compaction`). Embedded
    store: one ``VACUUM`` of the database file when any table is due; space is the file size and each
    table's pages.

    :param tables: limit compaction to these tables (templated); default every user table.
    :param force: compact ``tables`` (or every table with a tombstone since its last compaction) whatever
        their counts (templated).
    :param threshold: default setting ``compaction_threshold_tombstones`` (templated).
    :param method: ``"compact"`` or ``"garbagecollect"``; default setting ``compaction_method`` (templated).
    :param runner: an object with ``run(args) -> list[NodetoolOutput]`` (see
        :mod:`airflow_atlas.airflow.hooks.nodetool`); default built from the settings.
    :param store_conn_id: see :class:`~airflow_atlas.airflow.operators.base.AtlasBaseOperator`.

    Returns :class:`~airflow_atlas.compaction.CompactionResult` JSON: ``{"store_conn_id", "threshold",
    "method", "compacted": {table: {...space before/after, per node under "nodes"...}}, "skipped": {table:
    reason}, "pending": {table: tombstones since its last compaction, afterwards}}``.
    """

    template_fields = (*AtlasBaseOperator.template_fields, "tables", "force", "threshold", "method")

    def __init__(
        self,
        *,
        tables: list[str] | None = None,
        force: bool | str = False,  # a bool, or a template that renders to one (airflow_atlas.airflow.templated)
        threshold: int | None = None,
        method: str | None = None,
        runner: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.tables = tables
        self.force = force
        self.threshold = threshold
        self.method = method
        self.runner = runner

    def execute_with_store(self, context: Context, store: AtlasStore, settings: AtlasSettings) -> Any:
        conn_id = self.resolved_conn_id(settings)
        threshold = settings.compaction_threshold_tombstones if self.threshold is None else self.threshold
        compactor = compactor_for(store, self.method or settings.compaction_method, self.runner, settings)
        result = compact_due_tables(store, compactor, threshold=threshold, tables=self.tables, force=self.force is True,
                                    store_conn_id=conn_id)
        return to_xcom(result)
