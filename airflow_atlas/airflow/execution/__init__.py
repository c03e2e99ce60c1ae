"""Where a sweep task's work runs, one module per execution mode (as astronomer-cosmos does):

* :mod:`.in_task` - the engine inside the Airflow task, under the group's leases;
* :mod:`.spark` - one Spark application per task, through the one submission helper
  :class:`~airflow_atlas.airflow.execution.spark.SparkSubmission` (targeted and full sweep alike).

Operators resolve their arguments and call one function of these modules.
"""
