"""Triggers of the deferrable sensors (run in the triggerer)."""
from airflow_atlas.airflow.triggers.atlas import LockFreeTrigger, SweepableWorkTrigger, SweepTimestampTrigger

__all__ = ["LockFreeTrigger", "SweepableWorkTrigger", "SweepTimestampTrigger"]
