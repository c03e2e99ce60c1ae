"""The driver side of every Spark job: one body (:func:`run_job`) that plans the job's items, runs them in
the job's Spark tasks (``job.spark_tasks``: a targeted sweep groups its pairs, at most two tasks per core; a
full sweep runs one task per range) with :func:`~airflow_atlas.spark.executor.run_partition`, and collects
the results into one :class:`~airflow_atlas.spark.document.JobDocument`."""
from __future__ import annotations

import functools
import time
import traceback
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..errors import is_retriable
from ..kvs.address import StoreAddress
from .args import effective_max_failures, settings_from_spark_conf, spark_parallelism
from .ca import job_ca, job_timestamp_tls
from .connect import is_connect, run_items, server_facts
from .document import JobDocument, summarize
from .executor import TaskSpec, classify_job_error, run_partition
from .executor import open_store as default_open_store
from .jobs import FullSweepJob, SparkJob, TargetedSweepJob

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..config import StoreConfig
    from .executor import StoreOpener

SETTING_SOURCE = "--setting"
CONF_SOURCE = "spark.atlas.store.* conf"


def check_setting_values(settings: dict, source: str = SETTING_SOURCE) -> None:
    """Each value of one layer checked by its setting's declaration (InvalidInputError naming it and
    ``source``), e.g. a job's ``--setting`` before Spark starts; the layers are resolved in :func:`run_job`."""
    from ..config import StoreConfig
    from ..settings_model import layer_values

    layer_values(StoreConfig, settings, source)


def job_config(conf_items: Iterable[tuple[str, str]], settings: dict | None) -> StoreConfig:
    """The job's engine settings, resolved once: the ``spark.atlas.store.*`` conf (``SPARK_CONF`` layer)
    < ``settings`` (the job's ``--setting``, ``COMMAND_LINE``); the store URL's replica-safety options go
    on top where the store opens (``AtlasStore.open``)."""
    from ..settings_resolver import Layer, Rank, resolve

    return resolve(
        Layer(Rank.SPARK_CONF, CONF_SOURCE, settings_from_spark_conf(conf_items)),
        Layer(Rank.COMMAND_LINE, SETTING_SOURCE, settings or {}),
    )


def run_job(
    spark: SparkSession,
    job: SparkJob,
    *,
    address: StoreAddress,
    settings: dict | None = None,
    engine_zip: str | None = None,
    open_store: StoreOpener = default_open_store,
) -> JobDocument:
    """Run ``job`` (a strategy of :mod:`airflow_atlas.spark.jobs`) as one Spark job and return its document.

    ``settings`` (StoreConfig values, the job's ``--setting``) win over the ``spark.atlas.store.*`` conf
    entries (:func:`job_config`, the settings resolver).
    ``spark`` is a classic session (``spark-submit``, items as RDD partitions) or a Spark Connect one
    (items as ``mapInArrow`` partitions, :mod:`.connect`); both run the same task body.
    ``engine_zip`` is added with addPyFile on a classic session (spark-submit passes it with ``--py-files``
    instead; a Connect session holds it as an artifact already).
    ``open_store(address, settings)`` opens the store on the driver (if the job plans with it) and in every
    task. ``address`` is the store's (:class:`~airflow_atlas.kvs.address.StoreAddress`, parsed once by the
    caller): the driver, the pinned CA and every task use that object.
    """
    started = time.time()
    if is_connect(spark):  # a long-lived application reached through Spark Connect (see .connect)
        master, app_id, max_failures, conf_items = server_facts(spark)
        parallelism = spark_parallelism(master, dict(conf_items))
        # One server application serves many submissions: the run gets its own id, so lock holders
        # (spark:<app id>:<shard>:<strategy>) of two submissions never coincide.
        app_id = f"{app_id}/{uuid.uuid4().hex[:12]}"
    else:
        sc = spark.sparkContext
        conf = sc.getConf()
        classic_master = sc.master
        assert classic_master is not None  # a running SparkContext has its master
        master, app_id, max_failures, conf_items = (
            classic_master, sc.applicationId, conf.get("spark.task.maxFailures", None), conf.getAll())
        # The conf's word first, as on a Connect server; a local master's own count is exact, while a cluster
        # master's defaultParallelism counts only the executors registered so far (2 before any has).
        parallelism = spark_parallelism(master, dict(conf_items)) or (
            sc.defaultParallelism if master.startswith("local") else None)
    max_attempts = effective_max_failures(master, max_failures)
    # Serialised once: every task opens its store with these values (StoreConfig(**merged)).
    merged = job_config(conf_items, settings).to_json()
    ca_pem = job_ca(address)  # the pinned CA travels with the job (see .ca)
    timestamp_tls = job_timestamp_tls(merged)  # so do the timestamp servers' CA and the client certificate
    job, items = job.plan(lambda: open_store(address, merged))
    spec = TaskSpec(address=address, settings=merged, max_attempts=max_attempts, app_id=app_id,
                    job=job, open_store=open_store, ca_pem=ca_pem, timestamp_tls=timestamp_tls)
    tasks = job.spark_tasks(items, parallelism)
    if is_connect(spark):  # the engine zip is a session artifact (connect.open_session)
        results = run_items(spark, spec, items, tasks)
    else:
        if engine_zip:
            sc.addPyFile(engine_zip)
        sc.setJobDescription(job.description(items))
        results = (
            sc.parallelize(items, numSlices=tasks)
            .mapPartitions(functools.partial(run_partition, spec))
            .collect()
        )
    results.sort(key=lambda r: job.sort_key(r.item))
    failed = [r for r in results if r.failed]
    return JobDocument(
        job=job.name,
        ok=not failed and len(results) == len(items),
        retriable=any(r.retriable for r in failed) if failed else None,
        app_id=app_id,
        master=master,
        store=address.redacted(),
        max_task_attempts=max_attempts,
        params=job.params(),
        summary=summarize(results, job.SUMMED),
        failed=[{**r.item, "error": r.error} for r in failed],
        results=results,
        started_at=round(started, 3),
        duration_seconds=round(time.time() - started, 3),
    )


def failure_document(job_name: str, address: StoreAddress | None, exc: BaseException, started: float) -> JobDocument:
    """The document of a job that failed as a whole (classified: see ``classify_job_error``), scrubbed of
    ``address`` (its URL and secrets)."""
    exc = classify_job_error(exc)
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return JobDocument(
        job=job_name,
        ok=False,
        store=address.redacted() if address is not None else None,
        retriable=is_retriable(exc),
        error_type=type(exc).__name__,
        error=(address.scrub(text) if address is not None else text)[-4000:],
        started_at=round(started, 3),
        duration_seconds=round(time.time() - started, 3),
    )


def run_targeted_sweep(
    spark: SparkSession,
    *,
    store_url: str,
    pairs: Sequence,
    batch_limit: int | None = None,
    max_iterations: int | None = None,
    dry_run: bool = False,
    settings: dict | None = None,
    engine_zip: str | None = None,
    sweep_timestamps: dict | None = None,
    open_store: StoreOpener = default_open_store,
) -> JobDocument:
    """Sweep ``pairs`` in groups, at most two Spark tasks per core (:class:`TargetedSweepJob`), on the store
    of ``store_url`` (parsed here, once)."""
    job = TargetedSweepJob(pairs=pairs, batch_limit=batch_limit, max_iterations=max_iterations,
                           dry_run=bool(dry_run), sweep_timestamps=sweep_timestamps)
    return run_job(spark, job, address=StoreAddress.from_url(store_url), settings=settings, engine_zip=engine_zip,
                   open_store=open_store)


def run_full_sweep(
    spark: SparkSession,
    *,
    store_url: str,
    table: str,
    parts: int,
    batch_size: int = 1000,
    dry_run: bool = False,
    settings: dict | None = None,
    engine_zip: str | None = None,
    open_store: StoreOpener = default_open_store,
) -> JobDocument:
    """Legacy-sweep ``table`` split into about ``parts`` ranges, one Spark task each (:class:`FullSweepJob`), on
    the store of ``store_url`` (parsed here, once)."""
    job = FullSweepJob(table=table, parts=int(parts), batch_size=int(batch_size), dry_run=bool(dry_run))
    return run_job(spark, job, address=StoreAddress.from_url(store_url), settings=settings, engine_zip=engine_zip,
                   open_store=open_store)
