"""
### atlas_compaction

Runs after any sweep that wrote tombstones (scheduled on the asset alias `atlas_swept_tables`, fed by
`atlas_targeted_sweep`, `atlas_manual_sweep`, `atlas_full_sweep` and `atlas_scrub`).

`count_tombstones` sums the tombstones per table from the triggering asset events; `compact` adds them to
each table's count since its last compaction (Variable `atlas_compaction_state`) and compacts the tables
that reached `compaction_threshold_tombstones`: `nodetool flush` + `compact`/`garbagecollect` on Cassandra
(locally or over SSH, settings `nodetool_*`), `VACUUM` on the embedded store. It reports the space before
and after and records the outcome in the state Variable. Trigger it by hand with `{"force": true}` to
compact every counted table now.
"""
from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param, task

from airflow_atlas.airflow.assets import SWEPT_TABLES, tombstones_from_events
from airflow_atlas.airflow.operators import CompactionOperator
from airflow_atlas.airflow.settings import AtlasSettings

settings = AtlasSettings.for_dag_files()  # the environment only: no database query at parse time

with DAG(
    dag_id="atlas_compaction",
    description="Reclaim space after sweep: nodetool compaction (Cassandra) or VACUUM (embedded)",
    schedule=SWEPT_TABLES,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args=settings.default_args(),
    render_template_as_native_obj=True,
    params={"force": Param(False, type="boolean", description="Compact every counted table whatever its count")},
    tags=["airflow-atlas", "compaction"],
    doc_md=__doc__,
) as dag:

    @task(multiple_outputs=False)  # one XCom, the whole {table: count}, which `compact` takes
    def count_tombstones(triggering_asset_events=None) -> dict:
        """Tombstones per table from the asset events that triggered this run."""
        return tombstones_from_events(triggering_asset_events, AtlasSettings.load().store_conn_id)

    CompactionOperator(task_id="compact", tombstones=count_tombstones(), force="{{ params.force }}")
