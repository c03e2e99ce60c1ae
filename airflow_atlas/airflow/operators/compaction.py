"""Reclaim the space that sweep frees: compaction on Cassandra, VACUUM on the embedded store.

Sweep only writes tombstones; Cassandra drops the deleted data (and, after ``gc_grace_seconds``, the
tombstones) when the sstables holding them are compacted together. Compacting after every sweep would
waste I/O, so :class:`CompactionOperator` keeps, per table, the number of tombstones written since the
table's last compaction (in the Airflow Variable named by setting ``compaction_state_variable``) and
compacts a table only when that number reaches ``compaction_threshold_tombstones``.

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
from typing import Any

from airflow_atlas.airflow.hooks import nodetool, repair
from airflow_atlas.airflow.operators.base import AtlasBaseOperator
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

    Cassandra: for each due table, ``nodetool flush``, then ``nodetool compact`` (or ``garbagecollect``) of
    the table, through the runner (local command or SSH per node, settings ``nodetool_command`` /
    ``nodetool_ssh_conn_ids``); space is ``space_used_live`` of ``nodetool tablestats`` summed over the
    runner's nodes. Embedded store: one ``VACUUM`` of the database file when any table is due; space is
    the file size and each table's pages.

    :param tombstones: ``{table: count}`` written since the last call (templated), e.g. from the triggering
        asset events; added to the stored counts.
    :param tables: limit compaction to these tables (templated); default every table with a count.
    :param force: compact ``tables`` (or every counted table) whatever their counts (templated).
    :param threshold: default setting ``compaction_threshold_tombstones`` (templated).
    :param method: ``"compact"`` or ``"garbagecollect"``; default setting ``compaction_method`` (templated).
    :param runner: an object with ``run(args) -> list[NodetoolOutput]`` (see
        :mod:`airflow_atlas.airflow.hooks.nodetool`); default built from the settings.
    :param store_conn_id: see :class:`~airflow_atlas.airflow.operators.base.AtlasBaseOperator`.

    Returns ``{"compacted": {table: {...space before/after, per node under "nodes"...}}, "skipped": {table:
    reason}, "pending": {table: count}, ...}``.
    Idempotent: each table's count is reset (and the state saved) right after its own compaction.
    """

    template_fields = (*AtlasBaseOperator.template_fields, "tombstones", "tables", "force", "threshold", "method")

    def __init__(
        self,
        *,
        tombstones: dict | None = None,
        tables: list[str] | None = None,
        force: bool = False,
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

    def execute_with_store(self, context, store, settings):
        conn_id = self.resolved_conn_id(settings)
        threshold = int(settings.compaction_threshold_tombstones if self.threshold is None else self.threshold)
        method = self.method or settings.compaction_method
        if method not in ("compact", "garbagecollect"):
            raise InvalidInputError(f"compaction method must be compact or garbagecollect, got {method!r}")
        variable = settings.compaction_state_variable
        state = load_state(variable)
        tables_state: dict = state.setdefault(conn_id, {})
        known = store.user_tables()
        for table, count in (self.tombstones or {}).items():
            if table not in known:
                self.log.warning("table %s no longer exists: its %s tombstone(s) are not counted", table, count)
                continue
            entry = tables_state.setdefault(table, {"pending_tombstones": 0})
            entry["pending_tombstones"] = int(entry.get("pending_tombstones", 0)) + int(count)
        save_state(variable, state)

        candidates = list(self.tables) if self.tables else sorted(tables_state)
        unknown = sorted(set(candidates) - set(known))
        if self.tables and unknown:
            raise InvalidInputError(f"unknown table(s): {', '.join(unknown)}")
        due = [
            t
            for t in candidates
            if t in known and (self.force or int(tables_state.get(t, {}).get("pending_tombstones", 0)) >= max(threshold, 1))
        ]
        pending = {t: int(e.get("pending_tombstones", 0)) for t, e in tables_state.items()}
        self.log.info("tombstones since last compaction: %s; threshold %d; due: %s", pending, threshold, due)
        report: dict = {}
        skipped: dict = {}
        if due and store.kvs.backend != "sqlite":
            due, skipped = self._repair_guard(store, due)
        if due:
            if store.kvs.backend == "sqlite":
                report = self._vacuum(store, due)
            else:
                report = self._compact_cassandra(context, store, due, method, settings)
            now = time.time()
            for table in due:
                entry = tables_state.setdefault(table, {})
                entry["pending_tombstones"] = 0
                entry["last_compaction"] = {"at": now, **report[table]}
            save_state(variable, state)
        return {
            "store_conn_id": conn_id,
            "threshold": threshold,
            "method": method if store.kvs.backend != "sqlite" else "vacuum",
            "compacted": report,
            "skipped": skipped,
            "pending": {t: int(e.get("pending_tombstones", 0)) for t, e in tables_state.items()},
        }

    def _repair_guard(self, store, tables) -> tuple[list[str], dict]:
        """Split due tables into those compaction may purge now and ``{table: reason}`` of the others."""
        from airflow_atlas.kvs.cassandra import physical_table_name

        allowed, skipped = [], {}
        for table in tables:
            decision = repair.check_table(store.kvs.session, store.kvs.keyspace, physical_table_name(table))
            if decision.allowed:
                self.log.info("%s: compaction allowed: %s", table, decision.reason)
                allowed.append(table)
            else:
                self.log.warning("%s: NOT compacted: %s", table, decision.reason)
                skipped[table] = decision.reason
        return allowed, skipped

    def _compact_cassandra(self, context, store, tables, method, settings) -> dict:
        from airflow_atlas.kvs.cassandra import physical_table_name

        runner = self.runner or nodetool.runner_from_settings(settings)
        keyspace = store.kvs.keyspace
        report = {}
        for table in tables:
            physical = physical_table_name(table)
            nodetool.flush(runner, keyspace, physical)
            before = nodetool.table_stats_per_node(runner, keyspace, physical)
            started = time.monotonic()
            nodetool.compact(runner, keyspace, physical, method)
            after = nodetool.table_stats_per_node(runner, keyspace, physical)
            total = {
                when: {key: sum(node[key] for node in stats.values()) for key in nodetool.STAT_KEYS}
                for when, stats in (("before", before), ("after", after))
            }
            report[table] = {
                "space_before_bytes": total["before"]["space_used_live"],
                "space_after_bytes": total["after"]["space_used_live"],
                "sstables_before": total["before"]["sstable_count"],
                "sstables_after": total["after"]["sstable_count"],
                "reclaimed_bytes": total["before"]["space_used_live"] - total["after"]["space_used_live"],
                "duration_seconds": round(time.monotonic() - started, 3),
                "runner": runner.describe(),
                "nodes": {
                    node: {
                        "space_before_bytes": before[node]["space_used_live"],
                        "space_after_bytes": after.get(node, {}).get("space_used_live"),
                    }
                    for node in before
                },
            }
            self.log.info("%s.%s: %s", keyspace, physical, report[table])
        return report

    def _vacuum(self, store, tables) -> dict:
        kvs = store.kvs
        tables_before = {t: kvs.space_used_bytes(t) for t in tables}
        started = time.monotonic()
        file_before, file_after = kvs.vacuum()
        duration = round(time.monotonic() - started, 3)
        report = {}
        for table in tables:
            after = kvs.space_used_bytes(table)
            report[table] = {
                "space_before_bytes": tables_before[table],
                "space_after_bytes": after,
                "file_before_bytes": file_before,
                "file_after_bytes": file_after,
                "reclaimed_bytes": file_before - file_after,
                "duration_seconds": duration,
                "runner": "sqlite VACUUM",
            }
        self.log.info("VACUUM: file %d -> %d bytes; tables %s", file_before, file_after, report)
        return report
