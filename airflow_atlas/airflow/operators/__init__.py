"""Operators of airflow-atlas. Each is idempotent, templated where a user would template, and returns a
small JSON result (XCom). Import them from here::

    from airflow_atlas.airflow.operators import SweepShardOperator

There is no lock operator: ``SweepShardOperator`` takes, keeps and releases each pair's lock itself (the
engine's ``sweep_shard`` owns the lease for the whole run). To wait for a pair's lock to be free, use the
deferrable ``LockFreeSensor`` (:mod:`airflow_atlas.airflow.sensors`).
"""
from airflow_atlas.airflow.operators.base import AtlasBaseOperator
from airflow_atlas.airflow.operators.compaction import CompactionOperator
from airflow_atlas.airflow.operators.full_sweep import FullTableSweepOperator, PlanFullSweepOperator
from airflow_atlas.airflow.operators.scrub import ScrubOperator
from airflow_atlas.airflow.operators.sweep import SweepShardOperator
from airflow_atlas.airflow.operators.sweep_timestamps import ComputeSweepTimestampsOperator, PlanTargetedSweepOperator

__all__ = [
    "AtlasBaseOperator",
    "CompactionOperator",
    "ComputeSweepTimestampsOperator",
    "FullTableSweepOperator",
    "PlanFullSweepOperator",
    "PlanTargetedSweepOperator",
    "ScrubOperator",
    "SweepShardOperator",
]
