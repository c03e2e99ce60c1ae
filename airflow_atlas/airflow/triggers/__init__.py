"""Triggers (run in the triggerer): the deferrable sensors' polls of the store (:mod:`.atlas`) and the
deferred Spark Connect submission (:mod:`.spark_connect`)."""
from airflow_atlas.airflow.triggers.atlas import LockFreeTrigger, SweepableWorkTrigger, SweepTimestampTrigger
from airflow_atlas.airflow.triggers.spark_connect import SparkConnectJobTrigger

__all__ = ["LockFreeTrigger", "SparkConnectJobTrigger", "SweepableWorkTrigger", "SweepTimestampTrigger"]
