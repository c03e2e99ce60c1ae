"""What runs in a Spark task (executor side): one body for every job. A task opens the store in its Python
worker (after the fork: no session is ever pickled), sweeps its items with the job's strategy, and returns
one :class:`~airflow_atlas.spark.document.ItemResult` per item.

Stores opened with the default opener are kept by the Python worker for the next task it runs (Spark reuses
Python workers: ``spark.python.worker.reuse``, on by default): opening a Cassandra store - connecting,
checking the schema, preparing statements - cost ~0.5 s per task on a loaded node, 16 tasks per
submission. A kept store is keyed by address and settings, belongs to the process that opened it (a forked
worker opens its own), is dropped and closed after any failed item (its connection may be the cause), and
is closed when the worker exits. It holds no lock or lease between tasks: every item acquires and releases
its own. A job with its own opener (``open_store=``) gets a store per task, closed at the task's end.

Failures: an item that raises is re-raised for Spark to retry, unless retrying cannot help
(:func:`airflow_atlas.errors.is_retriable`: bad input, a module missing on the executor) or this is the
task's last allowed attempt; then it becomes a ``failed`` result, so one bad item does not abort the
others. Error texts are scrubbed of the store's address and its password.
"""
from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ExecutorEnvironmentError, is_retriable
from ..kvs.address import StoreAddress
from .ca import TimestampTlsPem, task_address, task_settings
from .document import FAILED, ItemResult

if TYPE_CHECKING:
    from ..store import AtlasStore
    from .jobs import SparkJob

StoreOpener = Callable[[StoreAddress, dict], "AtlasStore"]
"""``open_store(address, settings)``: a task's (and the planning driver's) store."""

PYTHON_VERSION_MISMATCH = "PYTHON_VERSION_MISMATCH"
"""Spark's error condition for a Python worker whose minor version differs from the driver's."""


def open_store(address: StoreAddress, settings: dict) -> AtlasStore:
    """The default store opener: ``AtlasStore.open`` of the job's address with ``settings``, the job's
    resolved settings (``StoreConfig.to_json()``, see ``driver.job_config``). A job accepts any other
    picklable ``open_store(address, settings)`` (e.g. a wrapper around the store)."""
    from ..config import StoreConfig
    from ..store import AtlasStore

    return AtlasStore.open(address, config=StoreConfig(**settings) if settings else None)


_KEPT: dict[tuple, tuple[int, AtlasStore]] = {}
"""(address, settings) -> (pid, store): stores the default opener opened in this Python worker, oldest first."""
KEPT_STORES_MAX = 4
"""Stores one Python worker keeps at most (a long-lived Connect server's workers serve many stores): the
least recently used is closed beyond it."""
_KEPT_LOCK = threading.Lock()


def _kept_key(spec: TaskSpec) -> tuple | None:
    if spec.open_store is not open_store:
        return None
    return spec.address, json.dumps(spec.settings, sort_keys=True, default=str)


def _acquire_store(spec: TaskSpec) -> AtlasStore:
    """The store for a task: a kept one of this process (default opener), else a new one."""
    key = _kept_key(spec)
    if key is None:
        return spec.open_store(spec.task_address(), spec.task_settings())
    with _KEPT_LOCK:
        kept = _KEPT.pop(key, None)
        if kept is not None and kept[0] == os.getpid():
            _KEPT[key] = kept  # most recently used last
            return kept[1]
        store = open_store(spec.task_address(), spec.task_settings())
        _KEPT[key] = (os.getpid(), store)
        evicted = []
        while len(_KEPT) > KEPT_STORES_MAX:
            pid, old_store = _KEPT.pop(next(iter(_KEPT)))
            if pid == os.getpid():
                evicted.append(old_store)
    for old_store in evicted:
        try:
            old_store.close()
        except Exception:
            pass
    return store


def _release_store(spec: TaskSpec, store: AtlasStore, failed: bool) -> None:
    """Keep a kept store unless an item failed (then drop and close it); close any other store."""
    key = _kept_key(spec)
    if key is not None and not failed:
        return
    if key is not None:
        with _KEPT_LOCK:
            if _KEPT.get(key, (None, None))[1] is store:
                del _KEPT[key]
    try:
        store.close()
    except Exception:
        pass


@atexit.register
def _close_kept() -> None:
    with _KEPT_LOCK:
        kept = [store for pid, store in _KEPT.values() if pid == os.getpid()]
        _KEPT.clear()
    for store in kept:
        try:
            store.close()
        except Exception:
            pass


@dataclass(frozen=True)
class TaskSpec:
    """Everything a task needs; pickled into the closure. The address (parsed once, on the driver) is never
    shown by repr."""

    address: StoreAddress = field(repr=False)
    settings: dict
    max_attempts: int
    app_id: str
    job: SparkJob
    open_store: StoreOpener = open_store
    ca_pem: str | None = field(default=None, repr=False)
    """The content of the address's pinned CA file, read by the driver (:mod:`.ca`: it travels with the job)."""

    timestamp_tls: TimestampTlsPem | None = field(default=None, repr=False)
    """The content of the timestamp TLS files - the servers' CA, the client certificate and key of mutual TLS -,
    read by the driver (they travel with the job too)."""

    def task_address(self) -> StoreAddress:
        """The address this task opens: ``ssl_ca`` pointing at this machine's copy of the job's CA."""
        return task_address(self.address, self.ca_pem)

    def task_settings(self) -> dict:
        """The settings this task opens the store with: ``timestamp_tls_ca`` (``_cert``, ``_key``) naming this
        machine's copies."""
        return task_settings(self.settings, self.timestamp_tls)


def environment_error(exc: ModuleNotFoundError) -> ExecutorEnvironmentError:
    """What a module missing on an executor means and how to fix it."""
    return ExecutorEnvironmentError(
        f"the executors' Python ({sys.executable}, Python {sys.version_info[0]}.{sys.version_info[1]}) has no "
        f"module {exc.name!r}: install the engine's dependencies there (cassandra-driver, pydantic, the driver's "
        "pyspark version) or point the setting spark_executor_python (spark.pyspark.python) at a Python that has them; "
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
            "(cassandra-driver, pydantic, the driver's pyspark version) or set spark_executor_python; see docs/SPARK.md. "
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
        detail = spec.address.scrub(traceback.format_exc())
        # A fresh exception without the original chain: its text is scrubbed, the original's may not be.
        raise RuntimeError(f"{item} attempt {attempt} failed ({type(exc).__name__}); Spark will retry:\n{detail}") from None
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return ItemResult(
        item=item,
        status=FAILED,
        attempt=attempt,
        error_type=type(exc).__name__,
        error=spec.address.scrub(text)[:2000],
        retriable=is_retriable(exc),
    )


def run_partition(spec: TaskSpec, items: Iterator) -> list[ItemResult]:
    """The ``mapPartitions`` body of every job: one store for the partition (at the first item; kept by the
    worker for its next task, see the module docstring), ``spec.job.sweep(store, item, holder)`` for each
    item."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:  # only inside a Spark task is there one
        raise RuntimeError("run_partition runs as the body of a Spark task (no TaskContext here)")
    attempt, partition = context.attemptNumber(), context.partitionId()
    out: list[ItemResult] = []
    store = None
    failed = True  # until the loop ends normally: an item re-raised for Spark's retry drops the store too
    try:
        for item in items:
            described = spec.job.describe(item)
            started = time.monotonic()
            try:
                if store is None:
                    store = _acquire_store(spec)
                status, engine = spec.job.sweep(store, item, spec.app_id)
            except Exception as exc:
                outcome = _failure(described, exc, spec, attempt)  # raises when Spark should retry
                out.append(outcome)
                if store is not None:
                    _release_store(spec, store, failed=True)
                    store = None
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
        failed = False
    finally:
        if store is not None:
            _release_store(spec, store, failed)
    return out
