"""Reclaim the space that sweep frees: compaction on Cassandra, VACUUM on the embedded store.

Sweep only writes tombstones; Cassandra drops the deleted data (and, after ``gc_grace_seconds``, the
tombstones) when the sstables holding them are compacted together. Compacting after every sweep would
waste I/O, so :class:`CompactionOperator` keeps, per table, the number of tombstones written since the
table's last compaction (in the Airflow Variable named by setting ``compaction_state_variable``) and
compacts a table only when that number reaches ``compaction_threshold_tombstones``. The policy (what is
due, the repair guard, the backends) is the engine's :mod:`airflow_atlas.compaction`; this operator keeps
the counts in the Variable and calls :func:`~airflow_atlas.compaction.compact_due_tables`.

On Cassandra a due table is compacted only when the repair guard
(:func:`airflow_atlas.airflow.hooks.repair.check_table`) allows it: with more than one replica, compaction
must not purge a sweep tombstone that may not have reached every replica, so the table needs a complete
repair (whole ring, every replica) that started less than ``gc_grace_seconds`` (minus a margin) ago.
Otherwise the table is skipped - its count is kept, the reason is logged as a warning and returned under
``skipped`` - and the next run tries again.
"""
from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from airflow.sdk import XComArg

from airflow_atlas.airflow.hooks.compaction import compactor_for
from airflow_atlas.airflow.operators.base import AtlasBaseOperator
from airflow_atlas.airflow.targets import as_int
from airflow_atlas.airflow.xcom import to_xcom
from airflow_atlas.compaction import add_tombstones, check_tables, compact_due_tables
from airflow_atlas.errors import InvalidInputError


def load_state(variable: str) -> dict:
    from airflow.sdk import Variable

    raw = Variable.get(variable, default=None)
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise InvalidInputError(f"the {variable} Variable is not valid JSON") from None
    if not isinstance(raw, dict):
        raise InvalidInputError(f"the {variable} Variable must hold a JSON object")
    return raw


def save_state(variable: str, state: dict) -> None:
    from airflow.sdk import Variable

    Variable.set(variable, json.dumps(state, sort_keys=True), description="airflow-atlas: tombstones since the last compaction, per store and table")


class CompactionOperator(AtlasBaseOperator):
    """Add newly written tombstones to each table's count; compact the tables whose count reached the
    threshold; report the space before and after; reset their counts.

    Cassandra: for each due table that the repair guard allows, ``nodetool flush``, then ``nodetool
    compact`` (or ``garbagecollect``) of the table, through the runner (local command or SSH per node,
    settings ``nodetool_command`` / ``nodetool_ssh_conn_ids``); space is ``space_used_live`` of ``nodetool
    tablestats`` summed over the runner's nodes (:mod:`airflow_atlas.airflow.hooks.compaction`). Embedded
    store: one ``VACUUM`` of the database file when any table is due; space is the file size and each
    table's pages.

    :param tombstones: ``{table: count}`` written since the last call (templated), e.g. from the triggering
        asset events; added to the stored counts.
    :param tables: limit compaction to these tables (templated); default every table with a count.
    :param force: compact ``tables`` (or every counted table) whatever their counts (templated).
    :param threshold: default setting ``compaction_threshold_tombstones`` (templated).
    :param method: ``"compact"`` or ``"garbagecollect"``; default setting ``compaction_method`` (templated).
    :param runner: an object with ``run(args) -> list[NodetoolOutput]`` (see
        :mod:`airflow_atlas.airflow.hooks.nodetool`); default built from the settings.
    :param store_conn_id: see :class:`~airflow_atlas.airflow.operators.base.AtlasBaseOperator`.

    Returns :class:`~airflow_atlas.compaction.CompactionResult` JSON: ``{"store_conn_id", "threshold",
    "method", "compacted": {table: {...space before/after, per node under "nodes"...}}, "skipped": {table:
    reason}, "pending": {table: count}}``. The counts are saved once the new tombstones are added and again
    after the compaction (compacted tables at 0, with their ``last_compaction`` report).
    """

    template_fields = (*AtlasBaseOperator.template_fields, "tombstones", "tables", "force", "threshold", "method")

    def __init__(
        self,
        *,
        tombstones: Mapping[str, int] | XComArg | None = None,
        tables: list[str] | None = None,
        force: bool | str = False,  # a bool, or a template that renders to one
        threshold: int | None = None,
        method: str | None = None,
        runner: Any = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.tombstones = tombstones
        self.tables = tables
        self.force = force
        self.threshold = threshold
        self.method = method
        self.runner = runner

    def execute_with_store(self, context, store, settings):  # untyped: its templated fields may hold XComArgs until rendered
        conn_id = self.resolved_conn_id(settings)
        threshold = settings.compaction_threshold_tombstones if self.threshold in (None, "") else as_int(self.threshold, "threshold")
        compactor = compactor_for(store, self.method or settings.compaction_method, self.runner, settings)
        known = store.user_tables()
        check_tables(self.tables, known)  # before any count is written
        variable = settings.compaction_state_variable
        state = load_state(variable)
        tables_state: dict = state.setdefault(conn_id, {})
        counts, ignored = add_tombstones(_pending(tables_state), self.tombstones or {}, known)
        for table, count in ignored.items():
            self.log.warning("table %s no longer exists: its %s tombstone(s) are not counted", table, count)
        _set_pending(tables_state, counts)
        save_state(variable, state)

        result = compact_due_tables(compactor, counts, known, threshold=threshold, tables=self.tables,
                                    force=bool(self.force), store_conn_id=conn_id)
        if result.compacted:
            now = time.time()
            for table, report in result.compacted.items():
                tables_state.setdefault(table, {})["last_compaction"] = {"at": now, **report.to_json()}
            _set_pending(tables_state, result.pending)
            save_state(variable, state)
        return to_xcom(result)


def _pending(tables_state: dict) -> dict[str, int]:
    return {table: int(entry.get("pending_tombstones", 0)) for table, entry in tables_state.items()}


def _set_pending(tables_state: dict, counts: dict[str, int]) -> None:
    for table, count in counts.items():
        tables_state.setdefault(table, {})["pending_tombstones"] = int(count)
