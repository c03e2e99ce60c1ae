"""CompactionOperator: the result it returns from the store's counts (a real run of the ``atlas_compaction``
DAG on the embedded store), its bad input (run on its own), and the Cassandra compactor it calls (a real
keyspace and repair guard; ``runner`` is the operator's own seam for nodetool).
The whole path with real nodetool: tests/airflow/dags/test_atlas_compaction.py."""
from __future__ import annotations

import json

import pytest

from airflow_atlas.serialisation import to_json
from tests.airflow.conftest import CONN_ID, FAST, load_dag, set_settings, task_states, xcom

from .conftest import fails_at_once, run_operator

pytestmark = pytest.mark.airflow

TABLE = "compact_t"


def _compaction(**kwargs):
    from airflow_atlas.airflow.operators.compaction import CompactionOperator

    return CompactionOperator(task_id="compact", **kwargs)


def test_template_fields():
    assert {"tables", "force", "threshold", "method", "store_conn_id"} <= set(_compaction().template_fields)


@pytest.mark.parametrize(
    "kwargs, params, message",
    [
        ({"method": "{{ params.method }}"}, {"method": "shrink"}, "compaction method must be compact or garbagecollect"),
        ({"threshold": "{{ params.t }}"}, {"t": "many"}, "threshold must be an integer, got 'many'"),
        ({"tables": ["nope"], "force": True}, {}, "unknown table(s): nope"),
    ],
)
def test_bad_input_fails_at_once(embedded_store, monkeypatch, kwargs, params, message):
    fails_at_once(lambda: run_operator(_compaction(**kwargs), params=params), message)


def test_a_forced_run_vacuums_and_restarts_the_counts(embedded_store, monkeypatch):
    store, _ = embedded_store
    store.create_table(TABLE, "THOROUGH")
    store.create_table("quiet_t", "THOROUGH")
    set_settings(monkeypatch, **FAST, compaction_threshold_tombstones=1000)
    store.history.record_tombstones({TABLE: 10, "gone": 3}, store.timestamps.fresh_timestamp(), {"source": "test"})
    run = load_dag("atlas_compaction").test(run_conf={"force": True})
    assert str(run.state) == "success", task_states(run)
    out = xcom(run, "compact")
    assert (out["store_conn_id"], out["threshold"], out["method"], out["skipped"]) == (CONN_ID, 1000, "vacuum", {})
    report = out["compacted"][TABLE]
    assert report["runner"] == "sqlite VACUUM" and report["file_after_bytes"] <= report["file_before_bytes"]
    assert "sstables_before" not in report and "nodes" not in report
    assert set(out["compacted"]) == {TABLE}  # "gone" does not exist, "quiet_t" has no tombstone
    assert out["pending"] == {TABLE: 0}
    last = store.history.tombstones_since_compaction(TABLE)
    assert last.count == 0 and last.last_compaction is not None and last.last_compaction["runner"] == "sqlite VACUUM"


def test_force_rendered_to_the_text_false_does_not_force(embedded_store, monkeypatch):
    """In a DAG without native rendering ``force="{{ params.force }}"`` renders the text ``"False"``: no
    table is compacted below the threshold (``bool("False")`` once forced every run); ``"true"`` forces."""
    store, _ = embedded_store
    store.create_table(TABLE, "THOROUGH")
    set_settings(monkeypatch, **FAST, compaction_threshold_tombstones=1000)
    store.history.record_tombstones({TABLE: 10}, store.timestamps.fresh_timestamp(), {"source": "test"})
    out, _ = run_operator(_compaction(force="{{ params.force }}"), params={"force": False})
    assert (out["compacted"], out["pending"]) == ({}, {TABLE: 10})
    out, _ = run_operator(_compaction(force="{{ params.force }}"), params={"force": "true"})
    assert set(out["compacted"]) == {TABLE} and out["pending"] == {TABLE: 0}


class StatsRunner:
    """The operator's ``runner`` seam: records the nodetool commands, answers tablestats like one node."""

    def __init__(self, keyspace: str):
        self.keyspace = keyspace
        self.commands: list[list[str]] = []
        self.live = 5000

    def describe(self) -> str:
        return "test runner"

    def run(self, args):
        from airflow_atlas.airflow.hooks.nodetool import NodetoolOutput

        self.commands.append(list(args))
        if args[0] in ("compact", "garbagecollect"):
            self.live = 1000
        table = args[-1].split(".")[-1]
        stats = {self.keyspace: {"tables": {table: {"space_used_live": str(self.live), "space_used_total": str(self.live),
                                                    "sstable_count": "3" if self.live == 5000 else "1"}}}}
        return [NodetoolOutput("node1", tuple(args), json.dumps(stats))]


@pytest.mark.cassandra
def test_the_cassandra_compactor_checks_the_repair_guard_and_reports_per_node(cassandra_store):
    from airflow_atlas.airflow.hooks.compaction import NodetoolCompactor, compactor_for
    from airflow_atlas.compaction import compact_due_tables
    from airflow_atlas.kvs.cassandra import physical_table_name

    store, conn = cassandra_store
    store.create_table(TABLE, "THOROUGH")
    runner = StatsRunner(conn["schema"])
    compactor = compactor_for(store, "garbagecollect", runner)
    assert isinstance(compactor, NodetoolCompactor) and compactor.method == "garbagecollect"
    verdict = compactor.guard(TABLE)
    assert verdict.allowed, verdict.reason  # replication factor 1: one copy, nothing to repair
    store.history.record_tombstones({TABLE: 200}, store.timestamps.fresh_timestamp(), {"source": "test"})
    result = compact_due_tables(store, compactor, threshold=100, tables=[TABLE])
    physical = physical_table_name(TABLE)
    assert [c[0] for c in runner.commands] == ["flush", "tablestats", "garbagecollect", "tablestats"]
    assert runner.commands[0] == ["flush", "--", conn["schema"], physical]
    report = to_json(result)["compacted"][TABLE]
    assert (report["space_before_bytes"], report["space_after_bytes"], report["reclaimed_bytes"]) == (5000, 1000, 4000)
    assert (report["sstables_before"], report["sstables_after"], report["runner"]) == (3, 1, "test runner")
    assert report["nodes"] == {"node1": {"space_before_bytes": 5000, "space_after_bytes": 1000}}
    assert result.pending == {TABLE: 0}
    with pytest.raises(Exception, match="compact or garbagecollect"):
        compactor_for(store, "shrink", runner)
