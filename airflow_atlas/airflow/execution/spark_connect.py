"""The **Spark Connect** runner: jobs on a long-lived Spark application through the Spark provider's
``spark_connect`` connection type. :class:`SparkConnectRunner` is the other implementation of
:class:`~.spark_types.SparkRunner` (the first is :mod:`.spark_submit`'s); what both share is in the leaf
:mod:`.spark_types`; a connection of type ``spark_connect`` (e.g. host ``sc://127.0.0.1``, port ``15002``;
``scripts/spark.sh connect-start``) selects it (:func:`airflow_atlas.airflow.execution.spark.runner_for`).

A submission is a :class:`ConnectRequest` (the job - the engine's one job type,
:class:`airflow_atlas.spark.SparkJob` -, the engine settings, the Spark connection and the job's tag: JSON,
no secret; :func:`connect_request` checks it before anything runs) and ONE blocking function that runs it on
a store address, :func:`run_request`. Two callers:

* **deferred** (the targeted sweep operator's default, ``deferrable=True``; :mod:`.deferred`): the task
  defers to :class:`~airflow_atlas.airflow.triggers.spark_connect.SparkConnectJobTrigger`, which runs
  :func:`run_request` in the triggerer, a long-lived process where pyspark's Connect client (pandas,
  pyarrow, grpc: ~2.9 s to import) is imported once; the store address (it holds the password) is read
  from the store connection there, never written into the trigger's kwargs;
* **in the task** (:meth:`SparkConnectRunner.run`; for callers without an operator
  :func:`airflow_atlas.airflow.execution.spark.submit`): the task process runs it and pays the client's
  import.

What :func:`run_request` does: opens the engine's Connect session (:func:`airflow_atlas.spark.connect.open_session`:
one server-side session per engine version, reused by every later submission, its id kept in
``$ATLAS_SPARK_ARTIFACT_DIR/connect-sessions``; the engine zip is a session artifact, shipped once), runs
the job with the engine's :func:`~airflow_atlas.spark.run_job` (the pairs in groups, one Spark task per
range; the store address goes pickled into the tasks as it is - no URL is written -; the job runs under its
tag, so :meth:`ConnectRun.on_kill` interrupts this job only), and returns its
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
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException

from airflow_atlas.airflow.execution.spark_types import (
    CONNECT_CONN_TYPE,
    RunSettings,
    SparkSweepFailed,
    artifact_dir,
    raise_for_document,
    resolve_connection,
)
from airflow_atlas.kvs.address import StoreAddress
from airflow_atlas.spark import STORE_SETTING_CONF_PREFIX, JobDocument, SparkJob, job_from_json
from airflow_atlas.spark.args import settings_from_spark_conf
from airflow_atlas.spark.artifact import build_engine_zip

if TYPE_CHECKING:
    from pathlib import Path

    from airflow.sdk import Connection
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConnectRequest:
    """One job for a Connect server, as JSON goes (trigger kwargs): no store address, no secret.

    ``job``: the job (checked when it was built); ``settings``: the engine settings it runs with; ``tag``: the
    Spark job tag it runs under. JSON: ``{"kind", "job"`` (the job's arguments, ``job.to_json()``)``,
    "spark_conn_id", "settings", "tag"}``."""

    job: SparkJob
    spark_conn_id: str
    settings: dict = field(default_factory=dict)
    tag: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.spark_conn_id, str) or not self.spark_conn_id:
            raise ValueError("spark_conn_id is required")
        if not self.tag:
            object.__setattr__(self, "tag", f"atlas-{uuid.uuid4().hex}")

    def to_json(self) -> dict:
        return {"kind": self.job.kind, "job": self.job.to_json(), "spark_conn_id": self.spark_conn_id,
                "settings": dict(self.settings), "tag": self.tag}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConnectRequest:
        """The request of :meth:`to_json`; bad job arguments fail here (ValueError / InvalidInputError), before
        anything is deferred or submitted."""
        job = job_from_json(data.get("kind", ""), data.get("job") or {})
        return cls(job=job, spark_conn_id=data.get("spark_conn_id", ""), settings=dict(data.get("settings") or {}),
                   tag=data.get("tag", ""))


class ConnectRun:
    """A Connect job that runs (or is about to), killable from another thread: :meth:`on_kill` interrupts
    the operations of its tag only (a kill that comes before the session is open stops it from starting)."""

    def __init__(self, tag: str):
        self.tag = tag
        self._spark: Any = None
        self._killed = False
        self._lock = threading.Lock()

    def started(self, spark: SparkSession) -> bool:
        """Record the session; False when the job was killed already (then it must not run)."""
        with self._lock:
            self._spark = spark
            return not self._killed

    def on_kill(self) -> None:
        with self._lock:
            self._killed = True
            spark = self._spark
        if spark is not None:
            spark.interruptTag(self.tag)


def connect_url(connection: Connection) -> str:
    """The ``sc://`` URL of a ``spark_connect`` connection, as the provider's hook builds it."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    class _Hook(SparkConnectHook):
        @classmethod
        def get_connection(cls, conn_id: str) -> Connection:  # the connection we resolved already
            return connection

    return _Hook(connection.conn_id).get_connection_url()


_SESSION_LOCKS: dict[str, threading.Lock] = {}
_SESSION_LOCKS_LOCK = threading.Lock()


def _session_lock(session_file: Path) -> threading.Lock:
    """One lock per session file in this process: jobs that start at once in one process (the triggerer)
    open the shared session one after the other - two ``addArtifacts`` of the same zip to the same new
    session at once fail on the server (``FileAlreadyExistsException``)."""
    with _SESSION_LOCKS_LOCK:
        return _SESSION_LOCKS.setdefault(str(session_file), threading.Lock())


def _session_file(remote: str, zip_path: str) -> Path:
    # One file per server and engine: the server part of the URL only (never the token).
    server = remote.split(";")[0]
    key = hashlib.sha256(server.encode()).hexdigest()[:16]
    return artifact_dir() / "connect-sessions" / f"{key}-{zip_path.rsplit('/', 1)[-1].removesuffix('.zip')}.id"


def _connect_connection(spark_conn_id: str) -> Connection:
    connection = resolve_connection(spark_conn_id)
    if connection.conn_type != CONNECT_CONN_TYPE:
        raise AirflowException(f"Spark connection {spark_conn_id!r} is of type {connection.conn_type!r}, not {CONNECT_CONN_TYPE!r}")
    return connection


def connect_request(job: SparkJob, settings: RunSettings) -> ConnectRequest:
    """The checked request of a job (:class:`ConnectRequest`): the connection is a ``spark_connect`` one,
    ``extra_conf`` holds only ``spark.atlas.store.*`` entries (merged into the settings); the job checked its
    own arguments when it was built. The Spark-on-a-cluster options of spark-submit are ignored (logged)."""
    _connect_connection(settings.spark_conn_id)
    extra = {str(k): v for k, v in settings.extra_conf.items()}
    other = sorted(k for k in extra if not k.startswith(STORE_SETTING_CONF_PREFIX))
    if other:
        raise AirflowException(
            f"extra_conf {', '.join(other)} cannot be set per job on a Spark Connect server (its application "
            "is already running): set them when starting the server (docs/SPARK.md)"
        )
    ignored = [name for name, value in (("spark_conf", settings.spark_conf),
                                        ("spark_executor_python", settings.executor_python),
                                        ("spark_driver_host", settings.driver_host)) if value]
    if ignored:
        log.info("Spark Connect: %s apply to spark-submit only; the server's own conf is used", ", ".join(ignored))
    job_settings = {**settings.settings, **settings_from_spark_conf((k, str(v)) for k, v in extra.items())}
    return ConnectRequest(job=job, spark_conn_id=settings.spark_conn_id, settings=job_settings)


def run_request(request: ConnectRequest, address: StoreAddress, run: ConnectRun | None = None) -> JobDocument:
    """Run ``request`` on its Connect server against the store at ``address`` and return the job's document
    (blocking; the ONE runner of both callers, module doc). A job that failed as a whole comes back as a
    failure document; a server that refuses the session raises :class:`SparkSweepFailed`. ``run`` (default:
    one of its own) is what a kill from another thread interrupts. The caller raises for the document
    (:func:`raise_for_document`)."""
    from airflow_atlas.spark import run_job
    from airflow_atlas.spark.connect import connect_client_mode, open_session
    from airflow_atlas.spark.driver import failure_document

    started = time.monotonic()
    run = run or ConnectRun(request.tag)
    job = request.job
    remote = connect_url(_connect_connection(request.spark_conn_id))
    zip_path = build_engine_zip(artifact_dir())
    log.info("Running %s on Spark Connect server %s (connection %s), store %s, engine %s", job.kind,
             remote.split(";")[0], request.spark_conn_id, address.redacted(), zip_path.rsplit("/", 1)[-1])
    with connect_client_mode():  # the Connect client mode must not leak into later spark-submits
        session_file = _session_file(remote, zip_path)
        try:
            with _session_lock(session_file):
                spark = open_session(remote, zip_path, session_file)
        except Exception as exc:
            raise SparkSweepFailed(
                f"Spark Connect server {remote.split(';')[0]} (connection {request.spark_conn_id!r}) refused the "
                f"session: {address.scrub(str(exc))[:1500]} (is it running? scripts/spark.sh connect-status)"
            ) from None
        wall = time.time()
        spark.addTag(request.tag)
        try:
            if not run.started(spark):
                raise SparkSweepFailed(f"the {job.kind} job was killed before it started")
            try:
                document = run_job(spark, job, address=address, settings=dict(request.settings))
            except Exception as exc:  # the job failed as a whole: classified like the job scripts do
                document = failure_document(job.name, address, exc, wall)
        finally:
            spark.removeTag(request.tag)
            # Close this client's channel (the server-side session stays, for the next submission): an open
            # client cleans up at interpreter exit with retried RPCs, which held a process for ~10 min
            # once the server was gone (and would release the shared session while it is up).
            try:
                spark.client.close()
            except Exception as exc:  # noqa: BLE001 - closing a channel must not fail a finished job
                log.warning("Spark Connect: could not close the client channel: %s", exc)
    document.spark_submit = {
        "conn_id": request.spark_conn_id,
        "master": document.master,
        "connect": True,
        "engine_zip": zip_path.rsplit("/", 1)[-1],
        "submit_seconds": round(time.monotonic() - started, 3),
    }
    return document


class SparkConnectRunner:
    """Runs a job on the Connect server of its Spark connection, in this process (module doc);
    :meth:`kill` interrupts the job that runs (its tag only)."""

    def __init__(self) -> None:
        self._run: ConnectRun | None = None
        self._lock = threading.Lock()

    def kill(self) -> bool:
        with self._lock:
            run = self._run
        if run is None:
            return False
        run.on_kill()
        return True

    def run(self, job: SparkJob, settings: RunSettings, address: StoreAddress, context: Mapping | None = None
            ) -> JobDocument:
        request = connect_request(job, settings)
        run = ConnectRun(request.tag)
        # Known to kill() while it runs; left set when a timeout or termination (BaseException) interrupts
        # it, because Airflow calls on_kill after this frame has unwound.
        with self._lock:
            self._run = run
        document = run_request(request, address, run)
        with self._lock:
            self._run = None
        raise_for_document(job.kind, document, address)
        return document


__all__ = ["ConnectRequest", "ConnectRun", "SparkConnectRunner", "connect_request", "run_request", "connect_url",
           "CONNECT_CONN_TYPE"]
