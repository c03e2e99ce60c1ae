"""The targeted-sweep pipeline shared by ``atlas_targeted_sweep`` and ``atlas_manual_sweep``::

    compute_sweep_timestamps -> plan -> shard[i]: acquire_lock -> sweep -> reconcile_queue -> release_lock
                                                  (a task group mapped over the planned groups of pairs)
                             -> publish_swept_tables (asset events) -> summary (fails if a pair failed)

* The sweep timestamps are computed once per run; every pair of the run uses them.
* Where each group is swept (in the task or as one Spark application; ``auto`` by its backlog) is
  decided once, by ``plan``, and recorded in the targets; the sweep task follows it.
* ``release_lock`` runs with ``trigger_rule="all_done"``: after a failed sweep too.
* A failing pair fails only its own group; the others sweep on. ``publish_swept_tables`` and ``summary``
  run whatever happened (``all_done``); ``summary`` fails the run when a pair did not finish.
* Retries with exponential backoff come from the DAG's default_args (settings). A sweep task running
  longer than ``sweep_timeout_seconds`` is stopped; its ``on_kill`` releases the leases it holds.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import TriggerRule, task_group

from airflow_atlas.airflow.assets import EmitSweptTablesOperator
from airflow_atlas.airflow.operators.locks import AcquireSweepLockOperator, ReleaseSweepLockOperator
from airflow_atlas.airflow.operators.sweep import ReconcileSweepQueueOperator, SweepShardOperator, SweepSummaryOperator
from airflow_atlas.airflow.operators.sweep_timestamps import ComputeSweepTimestampsOperator, PlanTargetedSweepOperator
from airflow_atlas.airflow.settings import AtlasSettings

_LABEL = "{% for t in task.targets %}{{ t.strategy }}/{{ t.shard }} {% endfor %}"


def targeted_sweep_pipeline(
    settings: AtlasSettings,
    *,
    shards: Any = None,
    strategies: Any = None,
    skip_idle: Any = None,
    dry_run: Any = False,
    max_iterations: Any = None,
    max_entries_per_second: Any = None,
    store_config: Any = None,
    execution_mode: str | None = None,
    store_conn_id: str | None = None,
) -> dict:
    """Add the pipeline to the DAG being defined; returns its tasks by name (``"plan"``, ``"sweep"``, ...)."""
    common: dict[str, Any] = {"store_conn_id": store_conn_id}
    timestamps = ComputeSweepTimestampsOperator(task_id="compute_sweep_timestamps", **common)
    plan = PlanTargetedSweepOperator(
        task_id="plan",
        sweep_timestamps=timestamps.output,
        shards=shards,
        strategies=strategies,
        skip_idle=skip_idle,
        execution_mode=execution_mode,
        max_groups=settings.max_parallel_groups,
        **common,
    )
    tasks: dict[str, Any] = {"compute_sweep_timestamps": timestamps, "plan": plan}
    pool: dict[str, Any] = {"pool": settings.sweep_pool} if settings.sweep_pool else {}

    @task_group(group_id="shard", tooltip="one group of (shard, strategy) pairs: lock, sweep, reconcile, unlock")
    def shard(targets):
        acquire = AcquireSweepLockOperator(task_id="acquire_lock", targets=targets, map_index_template=_LABEL, **common)
        sweep = SweepShardOperator(
            task_id="sweep",
            targets=acquire.output,
            dry_run=dry_run,
            max_iterations=max_iterations,
            max_entries_per_second=max_entries_per_second,
            store_config=store_config,
            max_active_tis_per_dagrun=settings.max_parallel_groups,
            **pool,
            execution_timeout=None if settings.sweep_timeout_seconds is None else timedelta(seconds=settings.sweep_timeout_seconds),
            map_index_template=_LABEL,
            **common,
        )
        reconcile = ReconcileSweepQueueOperator(
            task_id="reconcile_queue", targets=sweep.output, map_index_template=_LABEL, **common
        )
        release = ReleaseSweepLockOperator(
            task_id="release_lock", targets=targets, trigger_rule=TriggerRule.ALL_DONE, map_index_template=_LABEL, **common
        )
        acquire >> sweep >> reconcile >> release
        tasks.update(acquire_lock=acquire, sweep=sweep, reconcile_queue=reconcile, release_lock=release)

    shard.expand(targets=plan.output)
    publish = EmitSweptTablesOperator(
        task_id="publish_swept_tables", reports=tasks["sweep"].output, trigger_rule=TriggerRule.ALL_DONE, **common
    )
    summary = SweepSummaryOperator(
        task_id="summary", planned=plan.output, finished=tasks["reconcile_queue"].output, trigger_rule=TriggerRule.ALL_DONE
    )
    [publish, tasks["release_lock"]] >> summary
    tasks.update(publish_swept_tables=publish, summary=summary)
    return tasks
