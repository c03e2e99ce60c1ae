"""Deferrable sensors on the store."""
from airflow_atlas.airflow.sensors.atlas import LockFreeSensor, SweepableWorkSensor, SweepTimestampSensor

__all__ = ["LockFreeSensor", "SweepableWorkSensor", "SweepTimestampSensor"]
