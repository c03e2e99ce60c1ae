"""The ``spark`` execution mode: a task's targets swept by ONE Spark application (:class:`SparkMode`), the
choice of its runner (:func:`runner_for`), and THE way to run a job without an operator (:func:`submit`).

**Which runner**: the Spark connection the settings name (``spark_conn_id``) decides, once per task. A
connection of type ``spark_connect`` runs the job on that long-lived Spark Connect server
(:class:`~.spark_connect.SparkConnectRunner`), any other through ``spark-submit``
(:class:`~.spark_submit.SparkSubmitRunner`). Same job (the engine's :class:`airflow_atlas.spark.SparkJob`),
same document, same errors (:mod:`.spark_types`). On a Connect connection the targeted sweep operator runs
the job from the triggerer instead by default (:mod:`.deferred`).

Leases in Spark mode are the executors': the Airflow task takes none. Each Spark task sweeps each pair of
its group through ``sweep_shard``, which takes the pair's lock as the holder
``spark:<app id>:<shard>:<strategy>`` (the same for every attempt of the task, so a Spark retry fences off
its dead attempt; waiting up to the setting ``lock_wait_seconds`` for another holder's: the engine settings
travel with the job), keeps it refreshed while it
sweeps, reconciles the pair's queue and releases it. A pair whose lock someone else holds comes back
``skipped_locked``, never swept twice at once.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from airflow_atlas.airflow.execution.outcome import SweepOptions, SweepOutcome
from airflow_atlas.airflow.execution.spark_connect import SparkConnectRunner
from airflow_atlas.airflow.execution.spark_submit import SparkSubmitRunner
from airflow_atlas.airflow.execution.spark_types import (
    CONNECT_CONN_TYPE,
    RunSettings,
    SparkRunner,
    resolve_connection,
)
from airflow_atlas.airflow.targets import SweepTarget
from airflow_atlas.kvs.address import StoreAddress
from airflow_atlas.serialisation import to_json
from airflow_atlas.spark import JobDocument, SparkJob, TargetedSweepJob

if TYPE_CHECKING:
    from airflow.sdk import Connection


def is_connect(connection: Connection) -> bool:
    """Whether a (resolved) Spark connection selects the Spark Connect runner."""
    return connection.conn_type == CONNECT_CONN_TYPE


def runner_for(connection: Connection) -> SparkRunner:
    """THE runner choice (module doc), from a resolved Spark connection (:func:`~.spark_types.resolve_connection`)."""
    return SparkConnectRunner() if is_connect(connection) else SparkSubmitRunner()


def spark_runner(spark_conn_id: str) -> SparkRunner:
    """The runner of the Spark connection ``spark_conn_id``."""
    return runner_for(resolve_connection(spark_conn_id))


def submit(job: SparkJob, settings: RunSettings, address: StoreAddress, context: Mapping | None = None
           ) -> JobDocument:
    """Run ``job`` on the store at ``address`` with the runner of ``settings.spark_conn_id`` and return its
    document: THE entry point for callers without an operator (the operators hold a runner for ``on_kill``).
    Raises ``SparkSweepFailed`` / ``SparkSweepRefused`` (:func:`~.spark_types.raise_for_document`)."""
    return spark_runner(settings.spark_conn_id).run(job, settings, address, context)


def targeted_job(targets: list[SweepTarget], options: SweepOptions) -> TargetedSweepJob:
    """The targeted-sweep job of ``targets`` (the run's sweep timestamps go with it)."""
    timestamps = {t.strategy: t.sweep_ts for t in targets if t.sweep_ts is not None}
    return TargetedSweepJob(pairs=[(t.shard, t.strategy) for t in targets], batch_limit=options.batch_limit,
                            max_iterations=options.max_iterations, dry_run=options.dry_run,
                            sweep_timestamps=timestamps or None)


def with_results(targets: list[SweepTarget], document: JobDocument) -> list[SweepTarget]:
    """The targets with the result of their Spark task (targets with a result already are kept as they are)."""
    out = []
    for target in targets:
        if target.result is None:
            result = document.result_for(shard=target.shard, strategy=target.strategy)
            target = target.with_(result=None if result is None else to_json(result))
        out.append(target)
    return out


class SparkMode:
    """The task's targets as ONE Spark application run by ``runner`` on the store at ``address`` (module doc)."""

    name = "spark"

    def __init__(self, runner: SparkRunner, settings: RunSettings, address: StoreAddress):
        self.runner = runner
        self.settings = settings
        self.address = address

    def sweep(self, context: Mapping | None, targets: list[SweepTarget], options: SweepOptions) -> SweepOutcome:
        document = self.runner.run(targeted_job(targets, options), self.settings, self.address, context)
        return SweepOutcome(swept=with_results(targets, document), document=document)

    def kill(self) -> bool:
        return self.runner.kill()
