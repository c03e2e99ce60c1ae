"""The targeted-sweep pipeline shared by ``atlas_targeted_sweep`` and ``atlas_manual_sweep``::

    compute_sweep_timestamps -> plan -> sweep[i]  (one task per planned group of pairs, mapped over the groups)
                             -> publish_swept_tables (asset events) -> summary (fails if a pair failed)

* The sweep timestamps are computed once per run; every pair of the run uses them.
* Where each group is swept (in the task or as one Spark application; ``auto`` by its backlog) is
  decided once, by ``plan``, and recorded in the targets; the sweep task follows it.
* A group is ONE task: per pair, the engine's ``sweep_shard`` takes the pair's lock, sweeps, reconciles the
  pair's queue and releases the lock (in the task, or in a Spark task), so nothing of a lease outlives the
  task and no task runs only to take or free a lock. Its XCom, task log and metrics have every pair's result.
* A failing pair fails only its own group's task; the other groups sweep on. ``publish_swept_tables`` and
  ``summary`` run whatever happened (``all_done``); ``summary`` fails the run when a pair did not finish.
* Retries with exponential backoff come from the DAG's default_args (settings). A sweep task running
  longer than ``sweep_timeout_seconds`` is stopped; the engine releases the lease it held as it unwinds.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import TriggerRule

from airflow_atlas.airflow.assets import EmitSweptTablesOperator
from airflow_atlas.airflow.operators.sweep import SweepShardOperator, SweepSummaryOperator
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
    pool: dict[str, Any] = {"pool": settings.sweep_pool} if settings.sweep_pool else {}
    sweep = SweepShardOperator.partial(
        task_id="sweep",
        doc_md="one group of (shard, strategy) pairs: per pair lock, sweep, reconcile, unlock",
        dry_run=dry_run,
        max_iterations=max_iterations,
        max_entries_per_second=max_entries_per_second,
        store_config=store_config,
        max_active_tis_per_dagrun=settings.max_parallel_groups,
        **pool,
        execution_timeout=None if settings.sweep_timeout_seconds is None else timedelta(seconds=settings.sweep_timeout_seconds),
        map_index_template=_LABEL,
        **common,
    ).expand(targets=plan.output)
    publish = EmitSweptTablesOperator(
        task_id="publish_swept_tables", reports=sweep.output, trigger_rule=TriggerRule.ALL_DONE, **common
    )
    summary = SweepSummaryOperator(
        task_id="summary", planned=plan.output, finished=sweep.output, trigger_rule=TriggerRule.ALL_DONE
    )
    publish >> summary
    return {"compute_sweep_timestamps": timestamps, "plan": plan, "sweep": sweep, "publish_swept_tables": publish,
            "summary": summary}
