"""Submitting the sweep jobs to a long-lived Spark application through **Spark Connect** (the Spark
provider's ``spark_connect`` connection type and :class:`SparkConnectHook`).

Same signatures, same result and same errors as :mod:`.spark_submit` (what both share is in :mod:`.spark`);
which of the two runs is decided by the Spark connection the settings name (``spark_conn_id``): a connection
of type ``spark_connect`` (e.g. host ``sc://127.0.0.1``, port ``15002``; ``scripts/spark.sh connect-start``)
runs here, any other through ``spark-submit`` (:func:`airflow_atlas.airflow.execution.spark.submit_function`).

What a submission does: opens the engine's Connect session (:func:`airflow_atlas.spark.connect.open_session`:
one server-side session per engine version, reused by every later submission, its id kept in
``$ATLAS_SPARK_ARTIFACT_DIR/connect-sessions``; the engine zip is a session artifact, shipped once), runs
the job with the engine's :func:`~airflow_atlas.spark.run_job` (one Spark task per pair / range; the job
runs under a tag of its own, so ``on_kill`` interrupts this job only), and returns its
:class:`~airflow_atlas.spark.JobDocument` with a ``spark_submit`` section (``conn_id``, ``master``,
``engine_zip``, ``submit_seconds``, ``connect: true``). A failed pair or range raises
:class:`SparkSweepFailed`, what retrying cannot fix :class:`SparkSweepRefused`, an unreachable server
:class:`SparkSweepFailed` naming it (Airflow retries).

Conf: the application's Spark conf is the server's (its master, ``spark.task.maxFailures``, executors'
Python); ``spark_conf``, ``spark_executor_python`` and ``spark_driver_host`` apply to ``spark-submit`` only
and are ignored here (logged). Engine settings travel with the job (``settings``, and
``spark.atlas.store.*`` entries of ``extra_conf``); other ``extra_conf`` keys are refused.
"""
from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Unpack

from airflow.sdk.exceptions import AirflowException

from airflow_atlas.airflow.execution.spark import (
    CONNECT_CONN_TYPE,
    SparkSweepFailed,
    SubmitOptions,
    artifact_dir,
    killable,
    raise_for_document,
    resolve_connection,
)
from airflow_atlas.kvs.url import redact_url, scrub
from airflow_atlas.spark import STORE_SETTING_CONF_PREFIX, JobDocument, parse_pairs
from airflow_atlas.spark.args import settings_from_spark_conf
from airflow_atlas.spark.artifact import build_engine_zip

log = logging.getLogger(__name__)


class _ConnectRun:
    """A running Connect job, killable from ``on_kill`` (interrupts the operations of its tag only)."""

    def __init__(self, spark, tag: str):
        self.spark = spark
        self.tag = tag

    def on_kill(self) -> None:
        self.spark.interruptTag(self.tag)


def connect_url(connection) -> str:
    """The ``sc://`` URL of a ``spark_connect`` connection, as the provider's hook builds it."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    class _Hook(SparkConnectHook):
        @classmethod
        def get_connection(cls, conn_id):  # the connection we resolved already
            return connection

    return _Hook(connection.conn_id).get_connection_url()


def _session_file(remote: str, zip_path: str):
    # One file per server and engine: the server part of the URL only (never the token).
    server = remote.split(";")[0]
    key = hashlib.sha256(server.encode()).hexdigest()[:16]
    return artifact_dir() / "connect-sessions" / f"{key}-{zip_path.rsplit('/', 1)[-1].removesuffix('.zip')}.id"


def _run(kind: str, context, job, *, spark_conn_id: str, store_url: str, extra_conf=None, settings=None,
         spark_conf=None, executor_python=None, driver_host=None) -> JobDocument:
    from airflow_atlas.spark import run_job
    from airflow_atlas.spark.connect import connect_client_mode, open_session
    from airflow_atlas.spark.driver import failure_document

    if not isinstance(store_url, str) or not store_url.strip():
        raise ValueError("store_url is required")
    started = time.monotonic()
    connection = resolve_connection(spark_conn_id)
    if connection.conn_type != CONNECT_CONN_TYPE:
        raise AirflowException(f"Spark connection {spark_conn_id!r} is of type {connection.conn_type!r}, not {CONNECT_CONN_TYPE!r}")
    extra = {str(k): v for k, v in (extra_conf or {}).items()}
    other = sorted(k for k in extra if not k.startswith(STORE_SETTING_CONF_PREFIX))
    if other:
        raise AirflowException(
            f"extra_conf {', '.join(other)} cannot be set per job on a Spark Connect server (its application "
            "is already running): set them when starting the server (docs/SPARK.md)"
        )
    ignored = [name for name, value in (("spark_conf", spark_conf), ("spark_executor_python", executor_python),
                                        ("spark_driver_host", driver_host)) if value]
    if ignored:
        log.info("Spark Connect: %s apply to spark-submit only; the server's own conf is used", ", ".join(ignored))
    job_settings = {**(settings or {}), **settings_from_spark_conf((k, str(v)) for k, v in extra.items())}
    remote = connect_url(connection)
    zip_path = build_engine_zip(artifact_dir())
    log.info("Running %s on Spark Connect server %s (connection %s), store %s, engine %s",
             kind, remote.split(";")[0], spark_conn_id, redact_url(store_url), zip_path.rsplit("/", 1)[-1])
    with connect_client_mode():  # the Connect client mode must not leak into later spark-submits
        try:
            spark = open_session(remote, zip_path, _session_file(remote, zip_path))
        except Exception as exc:
            raise SparkSweepFailed(
                f"Spark Connect server {remote.split(';')[0]} (connection {spark_conn_id!r}) refused the session: "
                f"{scrub(str(exc), url=store_url)[:1500]} (is it running? scripts/spark.sh connect-status)"
            ) from None
        tag = f"atlas-{uuid.uuid4().hex}"
        wall = time.time()
        spark.addTag(tag)
        try:
            with killable(context, _ConnectRun(spark, tag)):
                try:
                    document = run_job(spark, job, store_url=store_url.strip(), settings=job_settings)
                except Exception as exc:  # the job failed as a whole: classified like the job scripts do
                    document = failure_document(job.name, store_url, exc, wall)
        finally:
            spark.removeTag(tag)
            # Close this client's channel (the server-side session stays, for the next submission): an open
            # client cleans up at interpreter exit with retried RPCs, which held a process for ~10 min
            # once the server was gone (and would release the shared session while it is up).
            try:
                spark.client.close()
            except Exception as exc:  # noqa: BLE001 - closing a channel must not fail a finished job
                log.warning("Spark Connect: could not close the client channel: %s", exc)
    document.spark_submit = {
        "conn_id": spark_conn_id,
        "master": document.master,
        "connect": True,
        "engine_zip": zip_path.rsplit("/", 1)[-1],
        "submit_seconds": round(time.monotonic() - started, 3),
    }
    raise_for_document(kind, document, store_url)
    return document


def submit_targeted_sweep(
    context: Mapping | None,
    *,
    spark_conn_id: str,
    store_url: str,
    pairs: Sequence,
    batch_limit: int | None,
    max_iterations: int | None,
    dry_run: bool,
    sweep_timestamps: Mapping[str, int] | None = None,
    **options: Unpack[SubmitOptions],
) -> JobDocument:
    """The targeted sweep of ``pairs`` on the Connect server of ``spark_conn_id`` (arguments as
    :func:`airflow_atlas.airflow.execution.spark_submit.submit_targeted_sweep`)."""
    from airflow_atlas.spark import TargetedSweepJob

    job = TargetedSweepJob(pairs=parse_pairs(pairs), batch_limit=None if batch_limit is None else int(batch_limit),
                           max_iterations=None if max_iterations is None else int(max_iterations),
                           dry_run=bool(dry_run), sweep_timestamps=dict(sweep_timestamps) if sweep_timestamps else None)
    return _run("targeted-sweep", context, job, spark_conn_id=spark_conn_id, store_url=store_url, **options)


def submit_full_sweep(
    context: Mapping | None,
    *,
    spark_conn_id: str,
    store_url: str,
    table: str,
    parts: int,
    batch_size: int,
    dry_run: bool,
    **options: Unpack[SubmitOptions],
) -> JobDocument:
    """The legacy sweep of ``table`` in ``parts`` ranges on the Connect server of ``spark_conn_id``."""
    from airflow_atlas.spark import FullSweepJob

    # FullSweepJob checks table, parts and batch_size (ValueError / InvalidInputError) before anything runs.
    job = FullSweepJob(table=str(table), parts=int(parts), batch_size=int(batch_size), dry_run=bool(dry_run))
    return _run("full-sweep", context, job, spark_conn_id=spark_conn_id, store_url=store_url, **options)


__all__ = ["submit_targeted_sweep", "submit_full_sweep", "connect_url", "CONNECT_CONN_TYPE"]
