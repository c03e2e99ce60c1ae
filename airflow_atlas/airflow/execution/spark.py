"""The ``spark`` execution mode: a task's targets swept by ONE Spark application (:class:`SparkMode`), and
the choice of its runner (:func:`runner_for`).

**Which runner**: the Spark connection the settings name (``spark_conn_id``) decides, once per task. A
connection of type ``spark_connect`` runs the job on that long-lived Spark Connect server
(:class:`~.spark_connect.SparkConnectRunner`), any other through ``spark-submit``
(:class:`~.spark_submit.SparkSubmitRunner`). Same job code, same document, same errors
(:mod:`.spark_types`). On a Connect connection the targeted sweep operator runs the job from the
triggerer instead by default (:mod:`.deferred`).

Leases in Spark mode are **handed over**, not kept: the operator releases the group's leases right before
the run (the runner never gets the store), and each Spark task takes its pair's lock itself, as the holder
``spark:<app id>:<shard>:<strategy>`` (the same for every attempt of the task, so a Spark retry fences off
its dead attempt), and keeps it refreshed while it sweeps (``sweep_shard``'s own ``LeaseKeeper``). The
Airflow task does not refresh anything while the application runs. A pair whose lock someone else takes
in between comes back ``skipped_locked``, never swept twice at once.
"""
from __future__ import annotations

from collections.abc import Mapping

from airflow_atlas.airflow.execution.outcome import SweepOptions, SweepOutcome, split_targets
from airflow_atlas.airflow.execution.spark_connect import SparkConnectRunner
from airflow_atlas.airflow.execution.spark_submit import SparkSubmitRunner
from airflow_atlas.airflow.execution.spark_types import (
    CONNECT_CONN_TYPE,
    RunSettings,
    SparkJob,
    SparkRunner,
    StoreUrl,
    resolve_connection,
)
from airflow_atlas.airflow.targets import SweepTarget
from airflow_atlas.spark import JobDocument


def is_connect(connection) -> bool:
    """Whether a (resolved) Spark connection selects the Spark Connect runner."""
    return connection.conn_type == CONNECT_CONN_TYPE


def runner_for(connection) -> SparkRunner:
    """THE runner choice (module doc), from a resolved Spark connection (:func:`~.spark_types.resolve_connection`)."""
    return SparkConnectRunner() if is_connect(connection) else SparkSubmitRunner()


def spark_runner(spark_conn_id: str) -> SparkRunner:
    """The runner of the Spark connection ``spark_conn_id``."""
    return runner_for(resolve_connection(spark_conn_id))


def targeted_job(pairs: list[SweepTarget], options: SweepOptions) -> SparkJob:
    """The targeted-sweep job of ``pairs`` (the run's sweep timestamps go with it)."""
    timestamps = {t.strategy: t.sweep_ts for t in pairs if t.sweep_ts is not None}
    return SparkJob.targeted_sweep([(t.shard, t.strategy) for t in pairs], options.batch_limit,
                                   options.max_iterations, options.dry_run, timestamps or None)


def with_results(targets: list[SweepTarget], document: JobDocument) -> list[SweepTarget]:
    """The targets with the result of their Spark task (targets with a result already are kept as they are)."""
    out = []
    for target in targets:
        if target.result is None:
            result = document.result_for(shard=target.shard, strategy=target.strategy)
            target = target.with_(result=None if result is None else result.to_json())
        out.append(target)
    return out


class SparkMode:
    """The task's targets whose lock was acquired as ONE Spark application run by ``runner`` (the others
    come back ``skipped_locked``); the operator has handed their leases over (module doc)."""

    name = "spark"
    hands_over = True

    def __init__(self, runner: SparkRunner, settings: RunSettings, store_url: StoreUrl):
        self.runner = runner
        self.settings = settings
        self.store_url = store_url

    def sweep(self, context: Mapping | None, targets: list[SweepTarget], options: SweepOptions) -> SweepOutcome:
        skipped, pairs = split_targets(targets)
        if not pairs:
            return SweepOutcome(swept=skipped)
        document = self.runner.run(targeted_job(pairs, options), self.settings, self.store_url, context)
        return SweepOutcome(swept=skipped + with_results(pairs, document), document=document)

    def kill(self) -> bool:
        return self.runner.kill()
