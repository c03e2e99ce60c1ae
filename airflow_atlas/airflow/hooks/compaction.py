"""Compaction of a Cassandra store's tables with ``nodetool``, guarded by the repair history: the
Cassandra :class:`~airflow_atlas.compaction.Compactor` (the policy is :mod:`airflow_atlas.compaction`).

For each table: ``nodetool flush``, then ``nodetool compact`` (or ``garbagecollect``) of the table through
the runner (local command or SSH per node, :mod:`~airflow_atlas.airflow.hooks.nodetool`); space is
``space_used_live`` of ``nodetool tablestats`` summed over the runner's nodes. The guard is
:func:`airflow_atlas.airflow.hooks.repair.check_table` on the store's session.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from airflow_atlas.airflow.hooks import nodetool, repair
from airflow_atlas.compaction import Compactor, GuardVerdict, TableCompaction, VacuumCompactor, check_method

log = logging.getLogger(__name__)


class NodetoolCompactor:
    """Compacts tables of a Cassandra key-value service ``kvs`` with ``method`` (``compact`` |
    ``garbagecollect``) through ``runner`` (``run(args)``, see :mod:`~airflow_atlas.airflow.hooks.nodetool`;
    default built from ``settings`` when the first table is compacted)."""

    def __init__(self, kvs: Any, method: str, runner: Any = None, settings: Any = None):
        self._kvs = kvs
        self.method = check_method(method)
        self._given_runner = runner
        self._settings = settings

    @property
    def _runner(self) -> Any:
        if self._given_runner is None:
            self._given_runner = nodetool.runner_from_settings(self._settings)
        return self._given_runner

    @staticmethod
    def _physical(table: str) -> str:
        from airflow_atlas.kvs.cassandra import physical_table_name

        return physical_table_name(table)

    def guard(self, table: str) -> GuardVerdict:
        decision = repair.check_table(self._kvs.session, self._kvs.keyspace, self._physical(table))
        return GuardVerdict(bool(decision.allowed), decision.reason)

    def compact(self, tables: Sequence[str]) -> dict[str, TableCompaction]:
        keyspace = self._kvs.keyspace
        report = {}
        for table in tables:
            physical = self._physical(table)
            nodetool.flush(self._runner, keyspace, physical)
            before = nodetool.table_stats_per_node(self._runner, keyspace, physical)
            started = time.monotonic()
            nodetool.compact(self._runner, keyspace, physical, self.method)
            after = nodetool.table_stats_per_node(self._runner, keyspace, physical)
            total = {
                when: {key: sum(node[key] for node in stats.values()) for key in nodetool.STAT_KEYS}
                for when, stats in (("before", before), ("after", after))
            }
            report[table] = TableCompaction(
                space_before_bytes=total["before"]["space_used_live"],
                space_after_bytes=total["after"]["space_used_live"],
                sstables_before=total["before"]["sstable_count"],
                sstables_after=total["after"]["sstable_count"],
                reclaimed_bytes=total["before"]["space_used_live"] - total["after"]["space_used_live"],
                duration_seconds=round(time.monotonic() - started, 3),
                runner=self._runner.describe(),
                nodes={
                    node: {
                        "space_before_bytes": before[node]["space_used_live"],
                        "space_after_bytes": after.get(node, {}).get("space_used_live"),
                    }
                    for node in before
                },
            )
            log.info("%s.%s: %s", keyspace, physical, report[table])
        return report


def compactor_for(store: Any, method: str, runner: Any = None, settings: Any = None) -> Compactor:
    """The store's compactor: VACUUM for the embedded store, nodetool for Cassandra. ``method`` is checked
    for both."""
    check_method(method)
    if store.kvs.backend == "sqlite":
        return VacuumCompactor(store.kvs)
    return NodetoolCompactor(store.kvs, method, runner=runner, settings=settings)
