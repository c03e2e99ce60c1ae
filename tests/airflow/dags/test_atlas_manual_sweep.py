"""atlas_manual_sweep with the real dag.test(): the form is validated before anything is written, a dry
run writes nothing, a chosen pair is swept alone, and the reconcile step removes queue leftovers."""
from __future__ import annotations

import pytest

from airflow_atlas.serialisation import to_json
from tests.airflow.conftest import load_dag, settle, sqlite_tables, task_instances, task_states, xcom

pytestmark = pytest.mark.airflow

BOOKKEEPING = {"_locks", "_timestamp", "_punch"}
"""Tables a dry run may touch: locks (taken and released), timestamps and punches (sweep timestamps)."""


def _workload(store, seed=1):
    from airflow_atlas.workload import WorkloadSpec, run_workload

    report = run_workload(store, WorkloadSpec(transactions=60, rows=25, seed=seed))
    settle(store)
    # The application is done: its client stops publishing that it is alive (a write a second into
    # _app_latency), so that what the DAG writes is all that changes (transactions still run).
    store.transactions.close()
    return report


def test_bad_form_values_fail_before_anything_is_written(embedded_store):
    store, conn = embedded_store
    _workload(store)
    before = sqlite_tables(conn["host"])
    dag = load_dag("atlas_manual_sweep")
    run = dag.test(run_conf={"shards": [0, 5], "tables": ["no_such_table"], "stratgy": "THOROUGH"})
    assert str(run.state) == "failed"
    tis = task_instances(run)
    validate = tis[("validate_request", -1)]
    assert str(validate.state) == "failed" and validate.try_number == 1  # no retries for bad input
    writers = [ti for (task_id, _), ti in tis.items() if task_id not in ("validate_request", "publish_swept_tables", "summary")]
    assert writers and all(str(ti.state) == "upstream_failed" for ti in writers), task_states(run)
    assert str(tis[("summary", -1)].state) == "failed"  # the verdict: nothing was planned
    assert sqlite_tables(conn["host"]) == before  # not one row written anywhere, bookkeeping included


def test_the_message_names_every_problem(embedded_store, caplog):
    store, _ = embedded_store
    from airflow_atlas.airflow.params import validate_manual_sweep

    with pytest.raises(Exception) as err:
        validate_manual_sweep(
            {"stratgy": "x"}, {"shards": [5], "tables": ["no_such_table"], "strategy": "ALL"},
            number_of_shards=store.number_of_shards(), user_tables=store.user_tables(),
        )
    assert "'stratgy'" in str(err.value) and "[5]" in str(err.value) and "'no_such_table'" in str(err.value)


def test_values_of_the_wrong_type_are_refused_by_the_form_schema(embedded_store):
    from airflow.sdk.exceptions import ParamValidationError

    dag = load_dag("atlas_manual_sweep")
    with pytest.raises(ParamValidationError, match="shards"):
        dag.test(run_conf={"shards": "all of them"})


def test_dry_run_reports_and_writes_nothing(embedded_store):
    store, conn = embedded_store
    _workload(store)
    tables = [t for t in store.kvs.list_tables() if t not in BOOKKEEPING]
    before = sqlite_tables(conn["host"], tables)
    dag = load_dag("atlas_manual_sweep")
    run = dag.test(run_conf={"dry_run": True})
    assert str(run.state) == "success", task_states(run)
    summary = xcom(run, "summary")
    assert summary["by_status"] == {"dry_run": summary["pairs"]} and summary["entries_read"] > 0
    assert summary["cells_tombstoned"] > 0  # what it would do
    assert sqlite_tables(conn["host"], tables) == before  # user tables, queue, progress, transactions, history
    assert xcom(run, "publish_swept_tables") == {}  # no asset event for a dry run
    assert all(lock.holder is None for lock in store.locks.list_locks("sweep/"))


def test_a_chosen_pair_is_swept_alone_and_reconcile_removes_queue_leftovers(embedded_store):
    """A sweeper that persisted progress past a fine partition without cleaning it (as a crash between
    the two would) leaves queue rows below progress; the group's reconcile step removes them."""
    from airflow_atlas.kvs.api import Cell
    from airflow_atlas.sweep.queue.constants import FINE_PARTITION

    store, conn = embedded_store
    _workload(store)
    store.timestamps.fresh_timestamps(FINE_PARTITION + 10)  # later transactions land in the next fine partition
    txn = store.transactions.begin()
    txn.put("demo_thorough", {Cell(b"late", b"c"): b"v"})
    txn.commit()
    settle(store)
    shard = 0
    store.queue.progress.update_progress(shard, "THOROUGH", FINE_PARTITION + 1)  # "crashed" before cleaning
    leftovers = store.queue.cleaner.queue_rows_below(shard, "THOROUGH", FINE_PARTITION + 1)
    assert leftovers
    progress_other = store.queue.progress.get_progress(1, "THOROUGH")

    dag = load_dag("atlas_manual_sweep")
    run = dag.test(run_conf={"shards": [shard], "strategy": "THOROUGH"})
    assert str(run.state) == "success", task_states(run)
    from airflow_atlas.airflow.targets import SweepTarget

    sweep_ts = xcom(run, "compute_sweep_timestamps")["THOROUGH"]
    assert xcom(run, "plan") == [[to_json(SweepTarget(shard, "THOROUGH", sweep_ts=sweep_ts, execution_mode="in_task"))]]
    (swept,) = xcom(run, "sweep", map_index=0)  # the pair's run reconciled its queue, in the sweep task
    assert swept["result"]["queue_rows_reconciled"] > 0
    assert xcom(run, "summary")["reclaimed_queue_rows"] == swept["result"]["queue_rows_reconciled"]
    progress = store.queue.progress.get_progress(shard, "THOROUGH")
    assert not store.queue.cleaner.queue_rows_below(shard, "THOROUGH", progress)
    assert store.queue.progress.get_progress(1, "THOROUGH") == progress_other  # not chosen: untouched
