"""
### example_bulk_load_then_sweep

How a user pipeline reuses airflow-atlas's operators and sensors, composed differently from ours:

1. `bulk_load` writes a batch of rows into the THOROUGH table `example_events` in a few transactions
   (each run overwrites the same rows, so every run leaves obsolete versions behind) and returns the last
   commit timestamp and the shards its writes went to (the engine's `shard_for`);
2. `wait_until_load_is_sweepable` (a deferrable `SweepTimestampSensor`, waiting in the triggerer) waits
   until the THOROUGH sweep timestamp passes that commit timestamp, i.e. no open transaction can still
   need the overwritten versions;
3. `sweep_touched_shards` (one `SweepShardOperator`, no task mapping; the engine takes and releases each
   shard lock itself) sweeps just the shards the load touched;
4. `publish_swept_tables` announces the tables that got tombstones (schedules `atlas_compaction`).

Params: `rows` (how many rows to load).
"""
from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param, task

from airflow_atlas.airflow.assets import EmitSweptTablesOperator
from airflow_atlas.airflow.operators import SweepShardOperator
from airflow_atlas.airflow.sensors import SweepTimestampSensor
from airflow_atlas.airflow.settings import AtlasSettings

TABLE = "example_events"
settings = AtlasSettings.for_dag_files()  # from $ATLAS_DAG_SETTINGS only: no database query at parse time

with DAG(
    dag_id="example_bulk_load_then_sweep",
    description="Example: bulk load, wait until it is sweepable, sweep the shards it touched",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args=settings.default_args(),
    params={"rows": Param(500, type="integer", minimum=1, maximum=100_000, description="rows to load")},
    tags=["airflow-atlas", "example"],
    doc_md=__doc__,
) as dag:

    @task(multiple_outputs=True)
    def bulk_load(params=None, run_id=None) -> dict:
        from airflow_atlas.airflow.hooks.atlas import AtlasHook
        from airflow_atlas.kvs.api import Cell
        from airflow_atlas.sweep.queue.shards import shard_for

        conf = AtlasSettings.load()
        rows, batch = int(params["rows"]), 200
        with AtlasHook(conf.store_conn_id, config=conf.engine_config()) as hook:
            store = hook.get_store()
            if not store.kvs.table_exists(TABLE):
                store.create_table(TABLE, "THOROUGH")
            shards = store.number_of_shards()
            touched: set[int] = set()
            last_commit = 0
            for first in range(0, rows, batch):
                cells = {Cell(f"event{i:07d}".encode(), b"body"): f"{run_id}:{i}".encode() for i in range(first, min(rows, first + batch))}
                txn = store.transactions.begin()
                txn.put(TABLE, cells)
                last_commit = max(last_commit, txn.commit() or 0)
                touched.update(shard_for(TABLE, cell, shards) for cell in cells)
        return {
            "commit_ts": last_commit,
            "tables": [TABLE],
            "targets": [{"shard": s, "strategy": "THOROUGH"} for s in sorted(touched)],
        }

    # load["key"]: one of bulk_load's outputs. The SDK types a @task call as XComArg, which declares no
    # __getitem__; the call returns a PlainXComArg, which has it (its Task protocol: "no way to express that").
    load = bulk_load()
    wait = SweepTimestampSensor(
        task_id="wait_until_load_is_sweepable",
        target_ts=load["commit_ts"],  # type: ignore[index]  # SDK typing gap, see above
        strategy="THOROUGH",
        poke_interval=settings.sensor_poke_seconds,
        timeout=3600,
    )
    sweep = SweepShardOperator(task_id="sweep_touched_shards", targets=load["targets"])  # type: ignore[index]  # as above
    wait >> sweep
    EmitSweptTablesOperator(task_id="publish_swept_tables", reports=sweep.output)
