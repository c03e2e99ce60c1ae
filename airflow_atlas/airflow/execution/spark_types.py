"""What the two Spark runners share, a leaf (it imports no other execution module): the runner interface
(:class:`SparkRunner`), what a runner gets besides the job (:class:`RunSettings`), the errors of a finished
application (:class:`SparkSweepFailed`, :class:`SparkSweepRefused`, :func:`raise_for_document`), the Spark
connection (:func:`resolve_connection`) and the artifact directory.

A runner gets ``(job, resolved settings, store address)`` and never the store: the job is the engine's one
job type (:class:`airflow_atlas.spark.SparkJob`: ``TargetedSweepJob`` / ``FullSweepJob``), the address a
:class:`~airflow_atlas.kvs.address.StoreAddress` (without its settings: they travel resolved in the
settings), which a runner turns into a URL only where it enters the Spark process (spark-submit's private
URL file; a Connect job pickles the address itself into its tasks). The leases are the Spark tasks' own
(each ``sweep_shard`` takes its pair's). Which runner runs a job is chosen once, from the Spark connection's
type (:func:`airflow_atlas.airflow.execution.spark.runner_for`).
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_atlas.kvs.address import StoreAddress
from airflow_atlas.spark import JobDocument, SparkJob

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from airflow_atlas.airflow.settings import AtlasSettings

log = logging.getLogger(__name__)

DEFAULT_SPARK_CONN_ID = "spark_default"
DEFAULT_LOCAL_MASTER = "local[*]"
ARTIFACT_DIR_ENV = "ATLAS_SPARK_ARTIFACT_DIR"
CONNECT_CONN_TYPE = "spark_connect"
"""The connection type that selects the Spark Connect runner; any other selects spark-submit."""


@dataclass(frozen=True)
class RunSettings:
    """The resolved settings a runner runs a job with: the Spark connection, the engine settings (JSON of
    the store's resolved ``StoreConfig``, sent to the job), extra Spark conf (``spark.atlas.store.*``
    entries override engine settings; other keys spark-submit only), and the Spark-on-a-cluster settings
    (spark-submit only; the Connect runner logs and ignores them)."""

    spark_conn_id: str = DEFAULT_SPARK_CONN_ID
    settings: dict = field(default_factory=dict)
    extra_conf: dict = field(default_factory=dict)
    spark_conf: dict = field(default_factory=dict)
    executor_python: str | None = None
    driver_host: str | None = None

    @classmethod
    def of(cls, spark_conn_id: str | None, atlas_settings: AtlasSettings, engine_settings: Mapping[str, Any]) -> RunSettings:
        """From an ``AtlasSettings`` (its Spark-on-a-cluster settings) and the store's resolved engine settings."""
        return cls(spark_conn_id=spark_conn_id or DEFAULT_SPARK_CONN_ID, settings=dict(engine_settings),
                   **cluster_options(atlas_settings))


class SparkRunner(Protocol):
    """Runs one Spark job at a time and can stop it from another thread (an operator's ``on_kill``).
    Implementations: :class:`~airflow_atlas.airflow.execution.spark_submit.SparkSubmitRunner` and
    :class:`~airflow_atlas.airflow.execution.spark_connect.SparkConnectRunner`."""

    def run(self, job: SparkJob, settings: RunSettings, address: StoreAddress, context: Mapping | None = None
            ) -> JobDocument:
        """Run ``job`` on the store at ``address`` and return its document; raises :class:`SparkSweepFailed` /
        :class:`SparkSweepRefused` as :func:`raise_for_document` does."""
        ...

    def kill(self) -> bool:
        """Stop the job that runs; False when none does."""
        ...


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


def raise_for_document(kind: str, document: JobDocument, address: StoreAddress | None, *, failed: bool = False
                       ) -> None:
    """The error taxonomy of a finished application (both runners): :class:`SparkSweepRefused` when nothing
    that failed is retriable, :class:`SparkSweepFailed` when something failed (or ``failed``: the submission
    itself reported an error), else nothing. ``kind``: the job's (``SparkJob.kind``); the message is scrubbed
    of ``address`` (None: scrubbed already)."""
    if not failed and document.ok:
        return
    reason = document.error or f"{len(document.failed)} task(s) failed: {json.dumps(document.failed)[:1500]}"
    message = f"Spark {kind} application failed: {reason}"
    if address is not None:
        message = address.scrub(message)
    if document.retriable is False:
        raise SparkSweepRefused(message + " (not retried: retrying cannot fix this)", document)
    raise SparkSweepFailed(message, document)


def cluster_options(settings: AtlasSettings) -> dict:
    """The Spark-on-a-cluster settings of an ``AtlasSettings`` as keyword arguments of :class:`RunSettings`."""
    return {
        "spark_conf": dict(settings.spark_conf),
        "executor_python": settings.spark_executor_python,
        "driver_host": settings.spark_driver_host,
    }


def artifact_dir() -> Path:
    """Where the engine zip (and the Connect session ids) are kept: ``$ATLAS_SPARK_ARTIFACT_DIR``, default
    ``<tmp>/airflow-atlas-spark``."""
    return Path(os.environ.get(ARTIFACT_DIR_ENV) or Path(tempfile.gettempdir()) / "airflow-atlas-spark")


def resolve_connection(spark_conn_id: str) -> Connection:
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
