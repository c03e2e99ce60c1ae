"""The ``spark`` execution mode, shared by its two submission paths: sweep as Spark applications.

* :class:`SparkSubmission` - the ONE submission helper the targeted and full-sweep operators share (store
  URL through the hook, the Spark-on-a-cluster settings, ``on_kill``);
* :func:`sweep_on_spark` - the targeted sweep of a group's targets as one application;
* what both paths share: the errors (:class:`SparkSweepFailed`, :class:`SparkSweepRefused`,
  :func:`raise_for_document`), the Spark connection (:func:`resolve_connection`), the artifact directory and
  the running applications ``on_kill`` stops (:func:`killable`, :func:`kill_submission`).

Leases in Spark mode are **handed over**, not kept: the Airflow task releases the group's leases right
before the submission, and each Spark task takes its pair's lock itself, as the holder
``spark:<app id>:<shard>:<strategy>`` (the same for every attempt of the task, so a Spark retry fences off
its dead attempt), and keeps it refreshed while it sweeps (``sweep_shard``'s own ``LeaseKeeper``). The
Airflow task does not refresh anything while the application runs. A pair whose lock someone else takes
in between comes back ``skipped_locked``, never swept twice at once.

**Which submission path** (:func:`submit_function`): the Spark connection the settings name
(``spark_conn_id``) decides. A connection of type ``spark_connect`` runs the job on that long-lived Spark
Connect server (:mod:`.spark_connect`), any other through ``spark-submit`` (:mod:`.spark_submit`). Same
job code, same document, same errors.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypedDict

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_atlas.airflow.execution.in_task import SweepOptions
from airflow_atlas.airflow.targets import SweepTarget
from airflow_atlas.kvs.scrub import scrub
from airflow_atlas.spark import JobDocument

log = logging.getLogger(__name__)

DEFAULT_SPARK_CONN_ID = "spark_default"
DEFAULT_LOCAL_MASTER = "local[*]"
ARTIFACT_DIR_ENV = "ATLAS_SPARK_ARTIFACT_DIR"
CONNECT_CONN_TYPE = "spark_connect"
"""The connection type that selects the Spark Connect path."""



class SubmitOptions(TypedDict, total=False):
    """The keyword arguments every submission function takes besides its job's own (both jobs, both paths):
    ``extra_conf`` (Spark conf; ``spark.atlas.store.<setting>`` entries override store settings),
    ``settings`` (engine settings, a shorthand for those), and the Spark-on-a-cluster settings
    (:func:`cluster_options`: ``spark_conf``, ``executor_python``, ``driver_host``; spark-submit only)."""

    extra_conf: Mapping[str, Any] | None
    settings: Mapping[str, Any] | None
    spark_conf: Mapping[str, Any] | None
    executor_python: str | None
    driver_host: str | None


_RUNNING: dict[str, Any] = {}
_RUNNING_LOCK = threading.Lock()


class SparkSweepFailed(AirflowException):
    """The Spark application ran but some shard/range failed (or it produced no document).

    ``document`` is the job's :class:`~airflow_atlas.spark.JobDocument` when there is one (secrets redacted)."""

    def __init__(self, message: str, document: JobDocument | None = None):
        super().__init__(message)
        self.document = document


class SparkSweepRefused(SparkSweepFailed, AirflowFailException):
    """The application failed in a way retrying cannot fix (bad input, an executor environment that
    cannot run the engine): an ``AirflowFailException``, so Airflow does not retry the task.
    ``document`` as in :class:`SparkSweepFailed`."""


def raise_for_document(kind: str, document: JobDocument, store_url: str, *, failed: bool = False) -> None:
    """The error taxonomy of a finished application (both submission paths): :class:`SparkSweepRefused`
    when nothing that failed is retriable, :class:`SparkSweepFailed` when something failed (or ``failed``:
    the submission itself reported an error), else nothing."""
    if not failed and document.ok:
        return
    reason = document.error or f"{len(document.failed)} task(s) failed: {json.dumps(document.failed)[:1500]}"
    message = scrub(f"Spark {kind} application failed: {reason}", url=store_url)
    if document.retriable is False:
        raise SparkSweepRefused(message + " (not retried: retrying cannot fix this)", document)
    raise SparkSweepFailed(message, document)


def cluster_options(settings) -> dict:
    """The Spark-on-a-cluster settings of an ``AtlasSettings`` as keyword arguments of the submit functions."""
    return {
        "spark_conf": dict(settings.spark_conf),
        "executor_python": settings.spark_executor_python,
        "driver_host": settings.spark_driver_host,
    }


def artifact_dir() -> Path:
    """Where the engine zip (and the Connect session ids) are kept: ``$ATLAS_SPARK_ARTIFACT_DIR``, default
    ``<tmp>/airflow-atlas-spark``."""
    return Path(os.environ.get(ARTIFACT_DIR_ENV) or Path(tempfile.gettempdir()) / "airflow-atlas-spark")


def resolve_connection(spark_conn_id: str):
    """The Spark connection, or a ``local[*]`` one for a missing ``spark_default``."""
    from airflow.sdk import BaseHook, Connection

    try:
        return BaseHook.get_connection(spark_conn_id)
    except Exception as exc:
        if type(exc).__name__ != "AirflowNotFoundException":
            raise
        if spark_conn_id != DEFAULT_SPARK_CONN_ID:
            raise AirflowException(
                f"Spark connection {spark_conn_id!r} is not defined (refusing the Spark provider's silent YARN "
                "fallback): create it, e.g. conn_type 'spark' with host 'local[*]', 'spark://host:7077', 'yarn' "
                "or 'k8s://https://host:443'"
            ) from None
        log.warning(
            "Spark connection %r is not defined: using master %s (define the connection to choose a cluster)",
            spark_conn_id,
            DEFAULT_LOCAL_MASTER,
        )
        return Connection(conn_id=spark_conn_id, conn_type="spark", host=DEFAULT_LOCAL_MASTER)


def _task_key(context: Mapping | None) -> str:
    ti = (context or {}).get("ti") or (context or {}).get("task_instance")
    if ti is None:
        return f"pid-{os.getpid()}-{threading.get_ident()}"
    return f"{ti.dag_id}/{ti.task_id}/{ti.run_id}/{getattr(ti, 'map_index', -1)}"


@contextlib.contextmanager
def killable(context: Mapping | None, handle) -> Iterator[None]:
    """While the block runs, :func:`kill_submission` of this task calls ``handle.on_kill()`` (a
    ``SparkSubmitHook``, or the Connect path's job tag)."""
    key = _task_key(context)
    with _RUNNING_LOCK:
        _RUNNING[key] = handle
    try:
        yield
    finally:
        with _RUNNING_LOCK:
            if _RUNNING.get(key) is handle:
                _RUNNING.pop(key, None)


def kill_submission(context: Mapping | None) -> bool:
    """Kill the spark-submit (or the Spark Connect job) started by this task (call from an operator's ``on_kill``)."""
    with _RUNNING_LOCK:
        handle = _RUNNING.get(_task_key(context))
    if handle is None:
        return False
    handle.on_kill()
    return True


def submit_function(submit: Callable, spark_conn_id: str) -> Callable:
    """The submission function of ``submit``'s kind (``spark_submit.submit_targeted_sweep`` /
    ``submit_full_sweep``) for the path the connection ``spark_conn_id`` selects (module doc)."""
    from airflow_atlas.airflow.execution import spark_connect, spark_submit

    if resolve_connection(spark_conn_id).conn_type != CONNECT_CONN_TYPE:
        return submit
    connect_functions: dict[Callable, Callable] = {
        spark_submit.submit_targeted_sweep: spark_connect.submit_targeted_sweep,
        spark_submit.submit_full_sweep: spark_connect.submit_full_sweep,
    }
    return connect_functions.get(submit, submit)


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
        return kill_submission(self._context)


def is_connect_connection(spark_conn_id: str) -> bool:
    """Whether the Spark connection ``spark_conn_id`` selects the Spark Connect path (module doc)."""
    return resolve_connection(spark_conn_id).conn_type == CONNECT_CONN_TYPE


def connect_trigger(*, store_conn_id: str, spark_conn_id: str, settings, engine_config, kind: str, job: dict):
    """The trigger that runs ``job`` (:class:`~.spark_connect.ConnectRequest` ``job`` JSON) from the
    triggerer (:mod:`airflow_atlas.airflow.triggers.spark_connect`): the same settings as
    :meth:`SparkSubmission.run` gives a job (the store connection's extras resolved here), without the
    store URL (the trigger reads it in the triggerer)."""
    from airflow_atlas.airflow.execution.spark_connect import connect_request
    from airflow_atlas.airflow.hooks.atlas import AtlasHook
    from airflow_atlas.airflow.triggers.spark_connect import SparkConnectJobTrigger

    resolved = AtlasHook(store_conn_id, config=engine_config).resolved_config()
    request = connect_request(kind, job, spark_conn_id=spark_conn_id, settings=resolved.to_json(),
                              **cluster_options(settings))
    return SparkConnectJobTrigger(request=request.to_json(), store_conn_id=store_conn_id)


def split_targets(targets: list[SweepTarget]) -> tuple[list[SweepTarget], list[SweepTarget]]:
    """``(skipped, pairs)``: the targets whose lock was not acquired (as ``skipped_locked``), and the others."""
    return [t.skipped(t.held_by) for t in targets if t.acquired is False], [t for t in targets if t.acquired is not False]


def hand_over(store, targets: list[SweepTarget]) -> tuple[list[SweepTarget], list[SweepTarget]]:
    """:func:`split_targets`, and the pairs' leases released for their Spark tasks to take (the hand-over,
    module doc)."""
    skipped, pairs = split_targets(targets)
    for target in pairs:
        if target.lease() is not None:
            store.locks.release_held_by(target.lock_name, target.holder)
    return skipped, pairs


def with_results(targets: list[SweepTarget], document: JobDocument) -> list[SweepTarget]:
    """The targets with the result of their Spark task (targets with a result already are kept as they are)."""
    out = []
    for target in targets:
        if target.result is None:
            result = document.result_for(shard=target.shard, strategy=target.strategy)
            target = target.with_(result=None if result is None else result.to_json())
        out.append(target)
    return out


def sweep_on_spark(submission: SparkSubmission, context, store, targets: list[SweepTarget], options: SweepOptions,
                   **submit_args) -> tuple[list[SweepTarget], JobDocument | None]:
    """One Spark application for the targets whose lock was acquired (the others are ``skipped_locked``);
    returns the targets with their ``result`` (the Spark task's result) and the document."""
    from airflow_atlas.airflow.execution.spark_submit import submit_targeted_sweep

    skipped, pairs = hand_over(store, targets)
    if not pairs:
        return skipped, None
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
    return skipped + with_results(pairs, document), document


def defer_sweep_on_connect(store, targets: list[SweepTarget], options: SweepOptions, **submit_args):
    """The deferred form of :func:`sweep_on_spark` on a Spark Connect connection: ``(targets, trigger)``,
    the leases handed over and the trigger that runs the job from the triggerer; ``trigger`` is None when
    every target was skipped (nothing to run). :func:`finish_on_connect` completes it from the trigger's event."""
    from airflow_atlas.airflow.execution.spark_connect import targeted_sweep_job

    skipped, pairs = hand_over(store, targets)
    if not pairs:
        return skipped, None
    timestamps = {t.strategy: t.sweep_ts for t in pairs if t.sweep_ts is not None}
    job = targeted_sweep_job([(t.shard, t.strategy) for t in pairs], options.batch_limit, options.max_iterations,
                             options.dry_run, timestamps or None)
    return skipped + pairs, connect_trigger(kind="targeted-sweep", job=job, **submit_args)


def finish_on_connect(targets: list[SweepTarget], event) -> tuple[list[SweepTarget], JobDocument]:
    """The same ``targets`` as :func:`defer_sweep_on_connect` was given, with their results from the
    trigger's ``event``; raises as :func:`sweep_on_spark` does (:func:`raise_for_document`)."""
    from airflow_atlas.airflow.triggers.spark_connect import document_from_event

    document = document_from_event(event)
    raise_for_document("targeted-sweep", document, "")  # scrubbed in the triggerer already
    skipped, pairs = split_targets(targets)
    return skipped + with_results(pairs, document), document
