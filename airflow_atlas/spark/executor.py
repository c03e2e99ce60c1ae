"""What runs in a Spark task (executor side): one body for every job. A task opens the store in its Python
worker (after the fork: no session is ever pickled), sweeps its items with the job's strategy, closes the
store, and returns one :class:`~airflow_atlas.spark.document.ItemResult` per item.

Failures: an item that raises is re-raised for Spark to retry, unless retrying cannot help
(:func:`airflow_atlas.errors.is_retriable`: bad input, a module missing on the executor) or this is the
task's last allowed attempt; then it becomes a ``failed`` result, so one bad item does not abort the
others. Error texts are scrubbed of the store URL and its password.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..errors import ExecutorEnvironmentError, is_retriable
from .document import FAILED, ItemResult
from .secrets import scrub

PYTHON_VERSION_MISMATCH = "PYTHON_VERSION_MISMATCH"
"""Spark's error condition for a Python worker whose minor version differs from the driver's."""


def open_store(url: str, settings: dict):
    """The default store opener: ``AtlasStore.open`` with ``settings`` over the StoreConfig defaults.
    A job accepts any other picklable ``open_store(url, settings)`` (e.g. a wrapper around the store)."""
    from ..config import StoreConfig
    from ..store import AtlasStore

    config = StoreConfig().with_overrides("spark.atlas.store.* conf / settings", **settings) if settings else StoreConfig()
    return AtlasStore.open(url, config=config)


@dataclass(frozen=True)
class TaskSpec:
    """Everything a task needs; pickled into the closure. The URL is never shown by repr."""

    store_url: str = field(repr=False)
    settings: dict
    max_attempts: int
    app_id: str
    job: Any  # a strategy of airflow_atlas.spark.jobs
    open_store: Callable = open_store


def environment_error(exc: ModuleNotFoundError) -> ExecutorEnvironmentError:
    """What a module missing on an executor means and how to fix it."""
    return ExecutorEnvironmentError(
        f"the executors' Python ({sys.executable}, Python {sys.version_info[0]}.{sys.version_info[1]}) has no "
        f"module {exc.name!r}: install the engine's dependencies there (cassandra-driver, the driver's pyspark "
        "version) or point the setting spark_executor_python (spark.pyspark.python) at a Python that has them; "
        "see docs/SPARK.md"
    )


def classify_job_error(exc: BaseException) -> BaseException:
    """A job-level error as the taxonomy sees it. Spark reports failures of its Python workers as text
    (a Java exception): a worker of another Python minor version (Spark's error condition
    :data:`PYTHON_VERSION_MISMATCH`) or a module missing where the task is unpickled becomes an
    :class:`ExecutorEnvironmentError` that says what to fix; anything else is returned unchanged."""
    if isinstance(exc, ModuleNotFoundError):
        return environment_error(exc)
    text = str(exc)
    if PYTHON_VERSION_MISMATCH in text:
        driver = f"{sys.version_info[0]}.{sys.version_info[1]}"
        return ExecutorEnvironmentError(
            f"the executors' Python has another minor version than the driver's (Python {driver}, "
            f"{sys.executable}): give the executors a Python {driver} (setting spark_executor_python, i.e. "
            f"spark.pyspark.python); see docs/SPARK.md. Spark said: {_line_with(text, PYTHON_VERSION_MISMATCH)}"
        )
    if "ModuleNotFoundError" in text:
        return ExecutorEnvironmentError(
            "a module is missing in the executors' Python: install the engine's dependencies there "
            "(cassandra-driver, the driver's pyspark version) or set spark_executor_python; see docs/SPARK.md. "
            f"Spark said: {_line_with(text, 'ModuleNotFoundError')}"
        )
    return exc


def _line_with(text: str, needle: str) -> str:
    return next((line.strip() for line in text.splitlines() if needle in line), needle)[:500]


def _executor_info() -> dict:
    import airflow_atlas

    return {
        "pid": os.getpid(),
        "host": os.uname().nodename,
        "airflow_imported": "airflow" in sys.modules,
        "engine_path": airflow_atlas.__file__,
    }


def _failure(item: dict, exc: BaseException, spec: TaskSpec, attempt: int) -> ItemResult:
    """A ``failed`` result, or the exception re-raised (scrubbed) for Spark to retry."""
    if isinstance(exc, ModuleNotFoundError):
        exc = environment_error(exc)
    if is_retriable(exc) and attempt + 1 < spec.max_attempts:
        detail = scrub(traceback.format_exc(), spec.store_url)
        # A fresh exception without the original chain: its text is scrubbed, the original's may not be.
        raise RuntimeError(f"{item} attempt {attempt} failed ({type(exc).__name__}); Spark will retry:\n{detail}") from None
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return ItemResult(
        item=item,
        status=FAILED,
        attempt=attempt,
        error_type=type(exc).__name__,
        error=scrub(text, spec.store_url)[:2000],
        retriable=is_retriable(exc),
    )


def run_partition(spec: TaskSpec, items: Iterator) -> list[ItemResult]:
    """The ``mapPartitions`` body of every job: one store for the partition (opened at the first item,
    closed at the end), ``spec.job.sweep(store, item, holder)`` for each item."""
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt, partition = context.attemptNumber(), context.partitionId()
    out: list[ItemResult] = []
    store = None
    try:
        for item in items:
            described = spec.job.describe(item)
            started = time.monotonic()
            try:
                if store is None:
                    store = spec.open_store(spec.store_url, spec.settings)
                status, engine = spec.job.sweep(store, item, spec.app_id)
            except Exception as exc:
                out.append(_failure(described, exc, spec, attempt))
                continue
            out.append(ItemResult(
                item=described,
                status=status,
                attempt=attempt,
                engine=engine,
                partition=partition,
                task_seconds=round(time.monotonic() - started, 3),
                executor=_executor_info(),
            ))
    finally:
        if store is not None:
            try:
                store.close()
            except Exception:
                pass
    return out
