"""
### atlas_scrub

Physically removes hard-deleted data (the scrub queue) once no open transaction can still read it, then
emits an asset event per table that got tombstones (schedules `atlas_compaction`). Schedule: setting
`scrub_schedule` (default hourly); batch size: `scrub_max_entries`.
"""
from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_atlas.airflow.assets import EmitSweptTablesOperator
from airflow_atlas.airflow.operators import ScrubOperator
from airflow_atlas.airflow.settings import AtlasSettings

settings = AtlasSettings.for_dag_files()  # from $ATLAS_DAG_SETTINGS only: no database query at parse time

with DAG(
    dag_id="atlas_scrub",
    description="Scrub hard deletes",
    schedule=settings.scrub_schedule,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args=settings.default_args(),
    tags=["airflow-atlas", "scrub"],
    doc_md=__doc__,
) as dag:
    scrub = ScrubOperator(task_id="scrub")
    EmitSweptTablesOperator(task_id="publish_swept_tables", reports=scrub.output)
