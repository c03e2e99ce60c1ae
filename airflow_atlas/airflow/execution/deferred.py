"""The deferred form of the ``spark`` execution mode on a Spark Connect connection (:class:`DeferredMode`):
the task defers to :class:`~airflow_atlas.airflow.triggers.spark_connect.SparkConnectJobTrigger`, which runs
the job from the triggerer (pyspark's Connect client imported once there, not in every task); the task
resumes in ``execute_complete`` with the job's document (:meth:`DeferredMode.finish`). The store's address
is not in the trigger's kwargs: the trigger reads it from the store connection in the triggerer. The leases
are the Spark tasks' (:mod:`.spark`).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_atlas.airflow.execution.outcome import SweepOptions, SweepOutcome
from airflow_atlas.airflow.execution.spark import targeted_job, with_results
from airflow_atlas.airflow.execution.spark_connect import connect_request
from airflow_atlas.airflow.execution.spark_types import RunSettings, raise_for_document
from airflow_atlas.airflow.targets import SweepTarget
from airflow_atlas.airflow.triggers.spark_connect import SparkConnectJobTrigger, document_from_event
from airflow_atlas.spark import TargetedSweepJob


class DeferredMode:
    """The Spark job of the task's targets, run from the triggerer (module doc)."""

    name = "spark"

    def __init__(self, settings: RunSettings, store_conn_id: str):
        self.settings = settings
        self.store_conn_id = store_conn_id

    def sweep(self, context: Mapping | None, targets: list[SweepTarget], options: SweepOptions) -> SweepOutcome:
        """The targets (results to come) and the trigger to defer to."""
        request = connect_request(targeted_job(targets, options), self.settings)
        trigger = SparkConnectJobTrigger(request=request.to_json(), store_conn_id=self.store_conn_id)
        return SweepOutcome(swept=targets, trigger=trigger)

    def kill(self) -> bool:
        return False  # the triggerer interrupts the job when the deferred task is killed (trigger cancelled)

    @staticmethod
    def finish(targets: list[SweepTarget], event: Mapping[str, Any] | None) -> SweepOutcome:
        """The same ``targets`` the run was given, with their results from the trigger's ``event``; raises as
        the Spark mode does (:func:`~.spark_types.raise_for_document`)."""
        document = document_from_event(event)
        raise_for_document(TargetedSweepJob.kind, document, None)  # scrubbed in the triggerer already
        return SweepOutcome(swept=with_results(targets, document), document=document)
