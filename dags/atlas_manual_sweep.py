"""
### atlas_manual_sweep

Targeted sweep on demand, from the **Trigger** form: tables, shards, strategy, dry run, maximum batches,
maximum entries per second (intensity: per sweep task and pair, 0 = unlimited, empty = the setting
`sweep_max_entries_per_second`; see docs/INTENSITY.md).

`validate_request` checks the form against the store before anything is written: unknown parameters
(Airflow itself accepts them), shards out of range, unknown tables or tables that are never swept, a
strategy that does not match the tables. It fails with one message listing every problem, without retries.
Then the same pipeline as `atlas_targeted_sweep` runs on the chosen pairs (idle pairs included).

A dry run reads the queue and reports what would be swept: no table, queue, progress or transaction is
written (locks are still taken and released, so a dry run never races a real sweep of the same pair).
"""
from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, XComArg

from airflow_atlas.airflow.groups import targeted_sweep_pipeline
from airflow_atlas.airflow.params import ValidateSweepRequestOperator, manual_sweep_params
from airflow_atlas.airflow.settings import AtlasSettings

settings = AtlasSettings.for_dag_files()  # from $ATLAS_DAG_SETTINGS only: no database query at parse time

with DAG(
    dag_id="atlas_manual_sweep",
    description="Targeted sweep of chosen shards, strategies and tables (trigger with the form)",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=6),
    default_args=settings.default_args(),
    params=manual_sweep_params(),
    tags=["airflow-atlas", "sweep", "manual"],
    doc_md=__doc__,
) as dag:
    request = ValidateSweepRequestOperator(task_id="validate_request", request="targeted")
    tasks = targeted_sweep_pipeline(
        settings,
        shards=XComArg(request, key="shards"),
        strategies=XComArg(request, key="strategies"),
        skip_idle=False,
        dry_run=XComArg(request, key="dry_run"),
        max_iterations=XComArg(request, key="max_batches"),
        store_config=XComArg(request, key="store_config"),  # the form's intensity, a settings layer (or {})
    )
    request >> tasks["compute_sweep_timestamps"]
