"""Where a sweep task's work runs, one module per execution mode (as astronomer-cosmos does):

* :mod:`.in_task` - the engine inside the Airflow task, under the group's leases;
* :mod:`.spark` - one Spark application per task: :class:`~.spark.SparkSubmission` (targeted and full sweep
  alike) and what its two submission paths share; the paths themselves are :mod:`.spark_submit`
  (``spark-submit``) and :mod:`.spark_connect` (a Spark Connect server), chosen by the Spark connection.

Operators resolve their arguments and call one function of these modules. The execution-mode rule for a
task with nothing to decide ``auto`` by is :func:`run_mode` (here, once).
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
