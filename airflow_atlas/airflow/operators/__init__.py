"""Operators of airflow-atlas. Each is idempotent, templated where a user would template, and returns a
small JSON result (XCom). Import them from here::

    from airflow_atlas.airflow.operators import SweepShardOperator
"""
from airflow_atlas.airflow.operators.base import AtlasBaseOperator
from airflow_atlas.airflow.operators.compaction import CompactionOperator
from airflow_atlas.airflow.operators.full_sweep import FullTableSweepOperator, PlanFullSweepOperator
from airflow_atlas.airflow.operators.locks import AcquireSweepLockOperator, ReleaseSweepLockOperator
from airflow_atlas.airflow.operators.scrub import ScrubOperator
from airflow_atlas.airflow.operators.sweep import ReconcileSweepQueueOperator, SweepShardOperator
from airflow_atlas.airflow.operators.sweep_timestamps import ComputeSweepTimestampsOperator, PlanTargetedSweepOperator

__all__ = [
    "AtlasBaseOperator",
    "AcquireSweepLockOperator",
    "CompactionOperator",
    "ComputeSweepTimestampsOperator",
    "FullTableSweepOperator",
    "PlanFullSweepOperator",
    "PlanTargetedSweepOperator",
    "ReconcileSweepQueueOperator",
    "ReleaseSweepLockOperator",
    "ScrubOperator",
    "SweepShardOperator",
]
