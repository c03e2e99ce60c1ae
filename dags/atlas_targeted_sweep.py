"""
### atlas_targeted_sweep

Scheduled targeted sweep of every (shard, strategy) pair with sweepable work (setting
`targeted_sweep_schedule`, default every 5 minutes; one run at a time).

`compute_sweep_timestamps` fixes the sweep timestamps once for the run (and logs what holds them back),
`plan` lists the pairs with work and groups them, then `sweep`, mapped over the groups, is ONE task per
group: for each of its pairs it takes the pair's lock, sweeps, reconciles the pair's queue and releases the
lock (also after a failure or a timeout; one pair failing never stops the others; its XCom and log have every
pair's result). `publish_swept_tables` emits one asset event per table that got tombstones (this schedules
`atlas_compaction`), `summary` totals the run and fails it if a pair failed.

Settings (docs/SETTINGS.md): the DAG-shaping ones (schedule, retries, parallel groups, pool, timeouts) from
the environment variable `ATLAS_DAG_SETTINGS` when this file is parsed; the tasks read the rest (batch sizes,
intensity, store connection, ...) from the Airflow Variable `atlas_settings` when they run (see
`airflow_atlas.airflow.settings`).
"""
from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_atlas.airflow.groups import targeted_sweep_pipeline
from airflow_atlas.airflow.settings import AtlasSettings

settings = AtlasSettings.for_dag_files()  # from $ATLAS_DAG_SETTINGS only: no database query at parse time

with DAG(
    dag_id="atlas_targeted_sweep",
    description="Targeted sweep of the sweep queue, every shard and strategy",
    schedule=settings.targeted_sweep_schedule,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=6),
    default_args=settings.default_args(),
    tags=["airflow-atlas", "sweep"],
    doc_md=__doc__,
) as dag:
    targeted_sweep_pipeline(settings)
