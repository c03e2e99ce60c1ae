"""Sweep as Spark applications: the ONE submission helper the targeted and full-sweep operators share
(:class:`SparkSubmission`: store URL through the hook, the Spark-on-a-cluster settings, ``on_kill``), and
the targeted sweep of a group's targets (:func:`sweep_on_spark`).

Leases in Spark mode are **handed over**, not kept: the Airflow task releases the group's leases right
before the submission, and each Spark task takes its pair's lock itself, as the holder
``spark:<app id>:<shard>:<strategy>`` (the same for every attempt of the task, so a Spark retry fences off
its dead attempt), and keeps it refreshed while it sweeps (``sweep_shard``'s own ``LeaseKeeper``). The
Airflow task does not refresh anything while the application runs. A pair whose lock someone else takes
in between comes back ``skipped_locked``, never swept twice at once.

**Which submission path** (:func:`submit_function`): the Spark connection the settings name
(``spark_conn_id``) decides. A connection of type ``spark_connect`` runs the job on that long-lived Spark
Connect server (:mod:`airflow_atlas.airflow.spark_connect`), any other through ``spark-submit``
(:mod:`airflow_atlas.airflow.spark_submit`). Same job code, same document, same errors.
"""
from __future__ import annotations

from typing import Callable

from airflow_atlas.airflow.execution.in_task import SweepOptions
from airflow_atlas.airflow.targets import SKIPPED, SweepTarget
from airflow_atlas.spark import JobDocument


class SparkSubmission:
    """Submits one Spark application at a time for an operator and kills it from the operator's ``on_kill``."""

    def __init__(self):
        self._context = None

    def run(self, context, submit: Callable, *, store_conn_id: str, spark_conn_id: str, settings, engine_config,
            **job_args) -> JobDocument:
        """``submit`` (``submit_targeted_sweep`` / ``submit_full_sweep``) with the store URL (from the
        hook; it holds the password and goes to the Spark helper only), the engine settings and the
        Spark-on-a-cluster settings of ``settings`` (an ``AtlasSettings``)."""
        from airflow_atlas.airflow.hooks.atlas import AtlasHook
        from airflow_atlas.airflow.spark_submit import cluster_options

        with AtlasHook(store_conn_id, config=engine_config) as hook:
            url = hook.get_store_url()
            engine_config = hook.resolved_config()  # with the connection's extras: the one copy Spark gets
        submit = submit_function(submit, spark_conn_id)
        # Known to on_kill while the job runs; left set when a timeout or termination (BaseException)
        # interrupts it, because Airflow calls on_kill after this frame has unwound.
        self._context = context
        try:
            document = submit(context, spark_conn_id=spark_conn_id, store_url=url,
                              settings=engine_config.to_json(), **cluster_options(settings), **job_args)
        except Exception:
            self._context = None
            raise
        self._context = None
        return document

    def kill(self) -> bool:
        if self._context is None:
            return False
        from airflow_atlas.airflow.spark_submit import kill_submission

        return kill_submission(self._context)


def submit_function(submit: Callable, spark_conn_id: str) -> Callable:
    """The submission function of ``submit``'s kind (``spark_submit.submit_targeted_sweep`` /
    ``submit_full_sweep``) for the path the connection ``spark_conn_id`` selects (module doc)."""
    from airflow_atlas.airflow import spark_connect, spark_submit

    if spark_submit._resolve_connection(spark_conn_id).conn_type != spark_connect.CONNECT_CONN_TYPE:
        return submit
    return {
        spark_submit.submit_targeted_sweep: spark_connect.submit_targeted_sweep,
        spark_submit.submit_full_sweep: spark_connect.submit_full_sweep,
    }.get(submit, submit)


def sweep_on_spark(submission: SparkSubmission, context, store, targets: list[SweepTarget], options: SweepOptions,
                   **submit_args) -> tuple[list[SweepTarget], JobDocument | None]:
    """One Spark application for the targets whose lock was acquired (the others are ``skipped_locked``);
    returns the targets with their ``result`` (the Spark task's result) and the document."""
    from airflow_atlas.airflow.operators.locks import release_own
    from airflow_atlas.airflow.spark_submit import submit_targeted_sweep

    skipped = [t.with_(result={"shard": t.shard, "strategy": t.strategy, "status": SKIPPED, "lock_holder": t.held_by})
               for t in targets if t.acquired is False]
    pairs = [t for t in targets if t.acquired is not False]
    if not pairs:
        return skipped, None
    for target in pairs:  # the hand-over (module doc)
        if target.lease() is not None:
            release_own(store, target.lock_name, target.holder)
    timestamps = {t.strategy: t.sweep_ts for t in pairs if t.sweep_ts is not None}
    document = submission.run(
        context,
        submit_targeted_sweep,
        pairs=[(t.shard, t.strategy) for t in pairs],
        batch_limit=options.batch_limit,
        max_iterations=options.max_iterations,
        dry_run=options.dry_run,
        sweep_timestamps=timestamps or None,
        **submit_args,
    )
    swept = []
    for target in pairs:
        result = document.result_for(shard=target.shard, strategy=target.strategy)
        swept.append(target.with_(result=None if result is None else result.to_json()))
    return skipped + swept, document
