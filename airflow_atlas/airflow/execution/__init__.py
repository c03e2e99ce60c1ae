"""Where a sweep task's work runs, one module per execution mode (as astronomer-cosmos does), each mode an
object with one interface (:class:`~.outcome.SweepMode`), interchangeable in the operator:

* :mod:`.in_task` - :class:`~.in_task.InTaskMode`: the engine inside the Airflow task, under the group's leases;
* :mod:`.spark` - :class:`~.spark.SparkMode`: one Spark application per task, run by a runner
  (:class:`~.spark_types.SparkRunner`) chosen once from the Spark connection's type: :mod:`.spark_submit`
  (``spark-submit``) or :mod:`.spark_connect` (a Spark Connect server); what they share is the leaf
  :mod:`.spark_types`;
* :mod:`.deferred` - :class:`~.deferred.DeferredMode`: that application run from the triggerer (Connect).

Operators resolve their arguments and run one mode. The execution-mode rule for a task with nothing to
decide ``auto`` by is :func:`run_mode` (here, once).
"""
from __future__ import annotations

from airflow_atlas.airflow.targets import SWEEP_MODES
from airflow_atlas.errors import InvalidInputError


def run_mode(mode: str, *, why: str = "") -> str:
    """THE execution-mode rule where nothing decides ``auto`` (a full sweep has no queue backlog to judge a
    scan by; a targeted sweep task without a plan task): ``auto`` means ``in_task``. ``in_task`` and
    ``spark`` stay; anything else is InvalidInputError (``why`` is appended to its message). Where a backlog
    decides ``auto`` (the plan task, once per group), ``choose_execution_mode`` of the plan operator does."""
    if mode == "auto":
        return "in_task"
    if mode not in SWEEP_MODES:
        raise InvalidInputError(f"execution_mode must be one of {', '.join((*SWEEP_MODES, 'auto'))}, got {mode!r}{why}")
    return mode
