"""
### atlas_full_sweep

Legacy full-table sweep: scans whole tables for obsolete versions. Use it once to migrate data written
before the sweep queue existed (targeted sweep never sees those writes), or to double-check a table.

Form: tables (empty: all swept tables), parts (scan ranges per table, run in parallel), dry run.
`validate_request` rejects unknown parameters and tables before anything is written. Each range is one
mapped task (`execution_mode` "spark": one Spark job per table). `publish_swept_tables` emits an asset
event per table with the versions deleted (schedules `atlas_compaction`); `all_swept` fails the run if any
range failed. Schedule: setting `full_sweep_schedule` (default: only by hand).
"""
from __future__ import annotations

from datetime import datetime

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, TriggerRule, XComArg

from airflow_atlas.airflow.assets import EmitSweptTablesOperator
from airflow_atlas.airflow.operators import FullTableSweepOperator, PlanFullSweepOperator
from airflow_atlas.airflow.params import ValidateSweepRequestOperator, full_sweep_params
from airflow_atlas.airflow.settings import AtlasSettings

settings = AtlasSettings.for_dag_files()  # from $ATLAS_DAG_SETTINGS only: no database query at parse time

with DAG(
    dag_id="atlas_full_sweep",
    description="Legacy full-table sweep of chosen tables",
    schedule=settings.full_sweep_schedule,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args=settings.default_args(),
    params=full_sweep_params(),
    tags=["airflow-atlas", "sweep", "legacy"],
    doc_md=__doc__,
) as dag:
    request = ValidateSweepRequestOperator(task_id="validate_request", request="full")
    plan = PlanFullSweepOperator(
        task_id="plan", tables=XComArg(request, key="tables"), parts=XComArg(request, key="parts")
    )
    sweep = FullTableSweepOperator.partial(
        task_id="sweep_table",
        dry_run=XComArg(request, key="dry_run"),
        max_active_tis_per_dagrun=settings.max_parallel_groups,
        map_index_template="{{ task.table }}",
    ).expand_kwargs(plan.output)
    publish = EmitSweptTablesOperator(task_id="publish_swept_tables", reports=sweep.output, trigger_rule=TriggerRule.ALL_DONE)
    all_swept = EmptyOperator(task_id="all_swept")
    request >> plan
    sweep >> all_swept
