"""Per-table counts for asset events (the one report format, airflow_atlas/airflow/reports.py, re-exported by
assets.py), the table assets, and EmitSweptTablesOperator. (Compaction reads its counts from the store, not
from these events: tests/airflow/operators/test_compaction.py.)"""
from __future__ import annotations

from airflow_atlas.airflow.assets import table_asset, tombstones_by_table


def test_counts_are_summed_from_the_one_report_format_in_any_nesting():
    from airflow_atlas.airflow.assets import swept_tables

    reports = [
        [{"shard": 0, "strategy": "THOROUGH", "swept_tables": swept_tables(cells={"a": 3, "b": 0})}],
        [{"shard": 1, "strategy": "THOROUGH", "swept_tables": swept_tables(cells={"a": 2})}],
        [{"shard": 2, "strategy": "THOROUGH", "swept_tables": []}],  # a dry run reports nothing
        {"table": "c", "swept_tables": swept_tables(versions={"c": 5})},
        {"tables": {"b": 4}, "swept_tables": swept_tables(cells={"b": 4})},
        {"tables": {"z": 9}},  # no swept_tables: not a tombstone report
        None,
    ]
    counts = tombstones_by_table(reports)
    assert counts == {
        "a": {"tombstones": 5, "cells_tombstoned": 5, "versions_deleted": 0},
        "b": {"tombstones": 4, "cells_tombstoned": 4, "versions_deleted": 0},
        "c": {"tombstones": 5, "cells_tombstoned": 0, "versions_deleted": 5},
    }


def test_sweep_results_report_their_tables_except_dry_runs_and_skips():
    from airflow_atlas.airflow.reports import run_swept_tables

    assert run_swept_tables({"status": "caught_up", "tables": {"a": 3, "b": 0}}) == [
        {"table": "a", "cells_tombstoned": 3, "versions_deleted": 0}
    ]
    assert run_swept_tables({"status": "dry_run", "tables": {"a": 100}}) == []
    assert run_swept_tables({"status": "skipped_locked"}) == [] and run_swept_tables(None) == []


def test_table_asset_uri():
    asset = table_asset("atlas_default", "orders")
    assert asset.uri == "atlas://atlas_default/orders" and asset.group == "atlas"


class _OutletEvents:
    """The ``outlet_events`` of a task's context (an argument of ``execute``): records what is added."""

    def __init__(self):
        self.added: list[tuple[object, dict]] = []

    def __getitem__(self, alias):
        from airflow_atlas.airflow.assets import SWEPT_TABLES

        assert alias == SWEPT_TABLES
        return self

    def add(self, asset, extra):
        self.added.append((asset, extra))


def test_emit_swept_tables_operator_adds_one_event_per_table(embedded_store):
    from airflow_atlas.airflow.assets import SWEPT_TABLES, EmitSweptTablesOperator
    from tests.airflow.conftest import CONN_ID
    from tests.airflow.operators.conftest import NATIVE, TaskInstance

    operator = EmitSweptTablesOperator(task_id="publish_swept_tables", reports="{{ params.reports }}",
                                       source="{{ params.source }}", **NATIVE)
    assert operator.outlets == [SWEPT_TABLES]
    reports = [[{"swept_tables": [{"table": "a", "cells_tombstoned": 3, "versions_deleted": 0}]}, None],
               {"swept_tables": [{"table": "a", "cells_tombstoned": 0, "versions_deleted": 2},
                                 {"table": "b", "cells_tombstoned": 1, "versions_deleted": 0}]}]
    events = _OutletEvents()
    context = {"ti": TaskInstance(), "params": {"reports": reports, "source": "my_dag"}, "outlet_events": events}
    operator.render_template_fields(context)
    out = operator.execute(context)
    assert out == {"a": {"tombstones": 5, "cells_tombstoned": 3, "versions_deleted": 2},
                   "b": {"tombstones": 1, "cells_tombstoned": 1, "versions_deleted": 0}}
    assert [(asset.uri, extra) for asset, extra in events.added] == [
        (table_asset(CONN_ID, "a").uri, {"store_conn_id": CONN_ID, "table": "a", "source": "my_dag", **out["a"]}),
        (table_asset(CONN_ID, "b").uri, {"store_conn_id": CONN_ID, "table": "b", "source": "my_dag", **out["b"]}),
    ]
    operator.reports = []
    quiet = _OutletEvents()
    assert operator.execute({**context, "outlet_events": quiet}) == {} and quiet.added == []
