"""
### atlas_compaction

Runs after any sweep that wrote tombstones (scheduled on the asset alias `atlas_swept_tables`, fed by
`atlas_targeted_sweep`, `atlas_manual_sweep`, `atlas_full_sweep` and `atlas_scrub`), and after any sweep run
at all while a table is due for compaction: a sweep also announces every table whose count (below) reached
`compaction_threshold_tombstones`, whatever it swept itself. Airflow keeps no asset-triggered run for a
paused DAG: unpaused, this DAG catches up at the next sweep run (`targeted_sweep_schedule`, every 5
minutes by default); so does a table whose announcement was lost with a killed task.

The asset events only trigger it: `compact` reads from the store how many tombstones each table got since
its last compaction (every sweep step and every compaction is recorded there, so sweeps that ran while this
DAG was paused, or whose task results never reached Airflow, are counted too) and compacts the tables that
reached `compaction_threshold_tombstones`: `nodetool flush` + `compact`/`garbagecollect` on Cassandra
(locally or over SSH, settings `nodetool_*`), `VACUUM` on the embedded store. It reports the space before
and after; the store records the compaction, and the table's count restarts. Trigger it by hand with
`{"force": true}` to compact every table with a tombstone since its last compaction now.
"""
from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param

from airflow_atlas.airflow.assets import SWEPT_TABLES
from airflow_atlas.airflow.operators import CompactionOperator
from airflow_atlas.airflow.settings import AtlasSettings

settings = AtlasSettings.for_dag_files()  # from $ATLAS_DAG_SETTINGS only: no database query at parse time

with DAG(
    dag_id="atlas_compaction",
    description="Reclaim space after sweep: nodetool compaction (Cassandra) or VACUUM (embedded)",
    schedule=SWEPT_TABLES,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args=settings.default_args(),
    render_template_as_native_obj=True,
    params={"force": Param(False, type="boolean",
                           description="Compact every table with a tombstone since its last compaction, whatever the count")},
    tags=["airflow-atlas", "compaction"],
    doc_md=__doc__,
) as dag:

    CompactionOperator(task_id="compact", force="{{ params.force }}")
