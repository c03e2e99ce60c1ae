"""The ``spark-submit`` runner (the Spark provider's ``SparkSubmitHook``): :class:`SparkSubmitRunner`, one
implementation of :class:`~.spark_types.SparkRunner`; the other is :mod:`.spark_connect`'s, what both share
is in the leaf :mod:`.spark_types`, and which one runs is chosen from the Spark connection's type
(:func:`airflow_atlas.airflow.execution.spark.runner_for`).

The operators call the runner (``runner.run(job, settings, address)``); callers without an operator use
:func:`airflow_atlas.airflow.execution.spark.submit` (the runner of the settings' Spark connection). It
returns the job's result document (a :class:`~airflow_atlas.spark.JobDocument`)::

    doc = submit(TargetedSweepJob(pairs=[(0, "CONSERVATIVE"), (1, "THOROUGH")], batch_limit=10_000),
                 RunSettings(spark_conn_id="spark_default"), StoreAddress.from_url(url))

What a run does:

* the provider's hook is built inside the call (it reads its connection in ``__init__``). A missing
  ``spark_default`` connection means ``local[*]`` (:data:`.spark_types.DEFAULT_LOCAL_MASTER`) - never the provider's
  silent YARN fallback; any other missing connection id is an error;
* the engine reaches the driver and executors as the zip from
  :func:`airflow_atlas.spark.artifact.build_engine_zip` (``--py-files``), cached by content hash in
  ``$ATLAS_SPARK_ARTIFACT_DIR`` (default ``<tmp>/airflow-atlas-spark``);
* the job's command line is the job's own (``job.to_argv()``, its script ``job.prog``); the store address
  becomes a URL only here, where it enters the Spark process: a 0600 file in a private temporary directory
  (``--store-url-file``), deleted afterwards; it is never on the command line, in the logs or in the returned
  document (which names the store redacted);
* the result is read from the ``--output`` file the driver writes. Therefore the driver must run on this
  worker: client deploy mode (the default) for every master; ``deploy-mode cluster`` is refused;
* exit code 3 (some pair/range failed) raises :class:`SparkSweepFailed` with the document attached, so
  Airflow retries the task while the document stays available to the caller.

Spark conf of an application, from lowest to highest precedence (:func:`submit_conf`): the driver's
Python is this interpreter (``spark.pyspark.driver.python``), and so is the executors' for every master
(``spark.pyspark.python``); the settings ``spark_conf``, ``spark_executor_python``
(``spark.pyspark.python``) and ``spark_driver_host`` (``spark.driver.host``), passed as
:func:`cluster_options`; the engine settings (``settings``, sent as ``spark.atlas.store.*``); the
caller's ``extra_conf``.
Local mode retries failed tasks only with a ``local[N,F]`` master (e.g. connection host
``local[*,4]``); see docs/SPARK.md.

An application whose failures retrying cannot fix (bad input, or executors whose Python lacks a module
or has another minor version than the driver's) raises :class:`SparkSweepRefused`, an
``AirflowFailException``: the task fails without retries and the message says what to fix.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException

from airflow_atlas.airflow.execution.spark_types import (
    DEFAULT_SPARK_CONN_ID,
    RunSettings,
    SparkSweepFailed,
    artifact_dir,
    raise_for_document,
    resolve_connection,
)
from airflow_atlas.kvs.address import StoreAddress
from airflow_atlas.serialisation import from_json
from airflow_atlas.spark import STORE_SETTING_CONF_PREFIX, JobDocument, SparkJob
from airflow_atlas.spark.artifact import build_engine_zip

if TYPE_CHECKING:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.sdk import Connection

log = logging.getLogger(__name__)


def submit_conf(
    *,
    spark_conf: Mapping[str, Any] | None = None,
    executor_python: str | None = None,
    driver_host: str | None = None,
    extra_conf: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The Spark conf of one application (precedence in the module doc). The executors' Python is set for
    every master, not only local ones: without it a cluster's workers run their system ``python3``."""
    conf: dict[str, str] = {
        # Client mode: the driver runs here, with this interpreter (it has the engine's dependencies).
        "spark.pyspark.driver.python": sys.executable,
        "spark.pyspark.python": sys.executable,
    }
    conf.update({str(k): str(v) for k, v in (spark_conf or {}).items()})
    if executor_python:
        conf["spark.pyspark.python"] = executor_python
    if driver_host:
        conf["spark.driver.host"] = driver_host
    conf.update({str(k): str(v) for k, v in (extra_conf or {}).items()})
    return conf


# ----- helpers --------------------------------------------------------------------------------------
def job_script(name: str) -> str:
    """Absolute path of ``spark_jobs/<name>`` (installed package or source checkout)."""
    candidates = []
    try:
        import spark_jobs

        candidates.append(Path(spark_jobs.__file__).resolve().parent / name)
    except ImportError:
        pass
    import airflow_atlas

    candidates.append(Path(airflow_atlas.__file__).resolve().parent.parent / "spark_jobs" / name)
    for path in candidates:
        if path.is_file():
            return str(path)
    raise FileNotFoundError(f"Spark job script {name} not found (looked in {', '.join(map(str, candidates))})")


def _app_name(kind: str, context: Mapping | None) -> str:
    ti = (context or {}).get("ti") or (context or {}).get("task_instance")
    if ti is None:
        return f"atlas-{kind}"
    name = f"atlas-{kind}-{ti.dag_id}-{ti.task_id}"
    map_index = getattr(ti, "map_index", -1)
    if map_index is not None and map_index >= 0:
        name += f"-{map_index}"
    return name[:200]


def master_of(connection: Connection) -> str:
    """The ``--master`` the Spark provider derives from a connection (same rules as the hook)."""
    if connection.conn_type == "spark" and connection.host and ("://" in connection.host or not connection.port):
        master = connection.host
    else:
        master = f"{connection.conn_type}://{connection.host or ''}"
    return f"{master}:{connection.port}" if connection.port else master


def _make_hook(spark_conn_id: str, connection: Connection, **hook_kwargs: Any) -> SparkSubmitHook:
    """A SparkSubmitHook whose connection lookup returns ``connection`` (resolved once, by us)."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    class AtlasSparkSubmitHook(SparkSubmitHook):
        @classmethod
        def get_connection(cls, conn_id: str) -> Connection:  # the hook's own lookup must see the same connection
            if conn_id == spark_conn_id:
                return connection
            return super().get_connection(conn_id)

    hook = AtlasSparkSubmitHook(conn_id=spark_conn_id, **hook_kwargs)
    return hook


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text + "\n")


def _submit_env() -> dict | None:
    """spark-submit from this interpreter's environment when it is not on PATH (pip-installed pyspark)."""
    if shutil.which("spark-submit"):
        return None
    bin_dir = Path(sys.executable).parent
    if (bin_dir / "spark-submit").exists():
        env = os.environ.copy()
        env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
        return env
    return None


class SparkSubmitRunner:
    """Runs a job as one ``spark-submit`` application (module doc); :meth:`kill` stops the one that runs."""

    def __init__(self) -> None:
        self._hook: SparkSubmitHook | None = None
        self._lock = threading.Lock()

    def kill(self) -> bool:
        with self._lock:
            hook = self._hook
        if hook is None:
            return False
        hook.on_kill()
        return True

    def run(self, job: SparkJob, settings: RunSettings, address: StoreAddress, context: Mapping | None = None
            ) -> JobDocument:
        kind = job.kind
        started = time.monotonic()
        spark_conn_id = settings.spark_conn_id or DEFAULT_SPARK_CONN_ID
        # Everything that can be refused is checked before anything is built or written.
        connection = resolve_connection(spark_conn_id)
        master = master_of(connection)
        if (connection.extra_dejson or {}).get("deploy-mode") == "cluster":
            raise AirflowException(
                f"Spark connection {spark_conn_id!r} uses deploy-mode cluster: the sweep jobs return their result "
                "through a file on the driver, so they need client mode (the default). See docs/SPARK.md."
            )
        conf = submit_conf(spark_conf=settings.spark_conf, executor_python=settings.executor_python,
                           driver_host=settings.driver_host,
                           extra_conf={**_setting_conf(settings.settings), **settings.extra_conf})
        application = job_script(job.prog)
        zip_path = build_engine_zip(artifact_dir())
        workdir = Path(tempfile.mkdtemp(prefix="atlas-spark-"))  # 0700
        url_file = workdir / "store-url"
        output = workdir / "result.json"
        try:
            _write_private(url_file, address.to_url())  # where the address enters the Spark process
            hook = _make_hook(
                spark_conn_id,
                connection,
                conf=conf,
                py_files=zip_path,
                application_args=["--store-url-file", str(url_file), "--output", str(output), *job.to_argv()],
                name=_app_name(kind, context),
            )
            log.info(
                "Submitting %s Spark application to %s (connection %s), store %s, engine %s",
                kind, master, spark_conn_id, address.redacted(), os.path.basename(zip_path),
            )
            submit_error: Exception | None = None
            popen_kwargs: dict[str, Any] = {"cwd": str(workdir)}  # Spark's scratch files land in our temp dir
            env = _submit_env()
            if env is not None:
                popen_kwargs["env"] = env
            with self._lock:
                self._hook = hook
            # Known to kill() while it runs; left set when a timeout or termination (BaseException)
            # interrupts it, because Airflow calls on_kill after this frame has unwound.
            try:
                hook.submit(application, **popen_kwargs)
            except Exception as exc:  # the hook's message masks password-like values; we add our scrub
                submit_error = exc
            with self._lock:
                self._hook = None
            if not output.exists():
                message = address.scrub(str(submit_error) if submit_error else "no result document")
                raise SparkSweepFailed(f"Spark {kind} application produced no result document: {message}")
            document = from_json(JobDocument, json.loads(output.read_text(encoding="utf-8")))
            document.spark_submit = {
                "conn_id": spark_conn_id,
                "master": master,
                "engine_zip": os.path.basename(zip_path),
                "submit_seconds": round(time.monotonic() - started, 3),
            }
            raise_for_document(job.kind, document, address, failed=submit_error is not None)
            return document
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


def _setting_conf(settings: Mapping[str, Any] | None) -> dict:
    # JSON-encoded so the job gets the same types back (true/false, numbers, strings).
    return {f"{STORE_SETTING_CONF_PREFIX}{k}": json.dumps(v) for k, v in (settings or {}).items()}


__all__ = [
    "SparkSubmitRunner",
    "submit_conf",
    "master_of",
    "job_script",
]
