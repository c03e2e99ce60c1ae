"""The trigger of the deferred Spark Connect submission: the job runs from the triggerer, where pyspark's
Connect client is imported once for every job, instead of in each task process (~2.9 s per task).

:class:`SparkConnectJobTrigger` holds a :class:`~airflow_atlas.airflow.execution.spark_connect.ConnectRequest`
(JSON: the job's kind and arguments, the engine settings, the Spark connection, the job's tag) and the store's
connection id. Trigger kwargs are stored in the metadata database, so the store's address - it holds the
password - is not among them: the trigger reads it from the store connection in the triggerer, right before
the job (:meth:`~airflow_atlas.airflow.hooks.atlas.AtlasHook.job_address`).

``run()`` runs the ONE blocking runner of Connect jobs,
:func:`~airflow_atlas.airflow.execution.spark_connect.run_request`, in a thread of its own pool
(:data:`MAX_JOBS` at once; not the event loop's default pool, which the store triggers' polls share: a sweep
job holds its thread for minutes), so the event loop and the other triggers never wait for a job. It yields
ONE event, whose payload is what the task's ``execute_complete`` turns back into a result
(:func:`job_event` / :func:`document_from_event`)::

    {"status": "done", "document": <JobDocument JSON>}              # the job ran (ok or with failed pairs)
    {"status": "error", "message": "...", "retriable": true|false}  # no document: e.g. the server is down

The error message is scrubbed of the store's address (its URL and secrets); so is the document (the engine scrubs what it
writes; the event is scrubbed once more as a whole). A Connect server that restarts under a running job
fails that job's operations: the job ends with a retriable error (its task is retried by Airflow, and the
retry opens a session on the new server); the other triggers go on. When the trigger is cancelled (the task
was killed or timed out, the triggerer stops), the job's tag is interrupted on the server.
"""
from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_atlas.airflow.execution.spark_connect import ConnectRequest, ConnectRun, run_request
from airflow_atlas.airflow.execution.spark_types import SparkSweepFailed, SparkSweepRefused
from airflow_atlas.kvs.address import StoreAddress
from airflow_atlas.serialisation import from_json, to_json

if TYPE_CHECKING:
    from airflow_atlas.spark import JobDocument

MAX_JOBS = 64
"""Connect jobs one triggerer runs at once (threads of the trigger's own pool); more wait for a thread."""

_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max_workers=MAX_JOBS, thread_name_prefix="atlas-connect"))
        return _POOL[0]


def job_event(run: Callable[[], Any], address: Callable[[], StoreAddress | None]) -> dict:
    """The event payload of a job: ``run()`` returns its JobDocument, or raises (see the module doc for the
    two shapes). ``address()`` gives the store address the payload is scrubbed of (None when it could not be
    read)."""
    from airflow_atlas.errors import is_retriable

    try:
        payload: dict = {"status": "done", "document": to_json(run())}
    except Exception as exc:  # noqa: BLE001 - every failure becomes the task's error, retriable or not
        from airflow.sdk.exceptions import AirflowFailException

        retriable = not isinstance(exc, AirflowFailException | ValueError) and is_retriable(exc)
        payload = {"status": "error", "message": f"{type(exc).__name__}: {exc}"[-4000:], "retriable": retriable}
    try:
        scrub_of = address()
    except Exception:  # noqa: BLE001 - nothing to scrub of: the address was never read
        scrub_of = None
    return json.loads(scrub_of.scrub(json.dumps(payload))) if scrub_of is not None else payload


def describe_event(payload: Mapping[str, Any]) -> str:
    """One line for the triggerer's log: the job's summary when it succeeded, else why it did not (an
    ``error`` event's message; a finished job that failed: its error and the pairs or ranges that failed)."""
    if payload.get("status") == "error":
        return f"failed: {payload.get('message')}"
    document = payload.get("document") or {}
    if document.get("ok"):
        return f"done: {document.get('summary')}"
    error = f"{document.get('error_type') or 'failed'}: {document.get('error')}" if document.get("error") else "failed"
    failed = document.get("failed") or []
    return f"failed: {error}" + (f" ({len(failed)} failed: {failed[:5]})" if failed else "")


def document_from_event(event: Mapping[str, Any] | None) -> JobDocument:
    """The JobDocument of a ``done`` event; an ``error`` event (or none) raises ``SparkSweepFailed``, or
    ``SparkSweepRefused`` when it is not retriable."""
    from airflow_atlas.spark import JobDocument

    if not event:
        raise SparkSweepFailed("the Spark Connect trigger ended without an event")
    if event.get("status") == "done" and isinstance(event.get("document"), Mapping):
        return from_json(JobDocument, event["document"])
    message = f"Spark Connect job failed in the triggerer: {event.get('message', f'unexpected event {dict(event)!r}')}"
    if event.get("retriable") is False:
        raise SparkSweepRefused(message + " (not retried: retrying cannot fix this)")
    raise SparkSweepFailed(message)


class SparkConnectJobTrigger(BaseTrigger):
    """Run one Connect job from the triggerer and fire with its outcome (module doc).

    :param request: the job, :meth:`ConnectRequest.to_json` (checked again here).
    :param store_conn_id: the store's connection: its address is read in the triggerer.
    """

    def __init__(self, request: dict, store_conn_id: str) -> None:
        super().__init__()
        self.request = ConnectRequest.from_json(request)
        if not isinstance(store_conn_id, str) or not store_conn_id:
            raise ValueError("store_conn_id is required")
        self.store_conn_id = store_conn_id
        self._address: StoreAddress | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"request": self.request.to_json(), "store_conn_id": self.store_conn_id})

    def _store_address(self) -> StoreAddress:
        if self._address is None:
            from airflow_atlas.airflow.hooks.atlas import AtlasHook

            self._address = AtlasHook(self.store_conn_id).job_address()
        return self._address

    def _job(self, handle: ConnectRun) -> JobDocument:
        return run_request(self.request, self._store_address(), handle)

    def _event(self, handle: ConnectRun) -> dict:
        return job_event(lambda: self._job(handle), lambda: self._address)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        handle = ConnectRun(self.request.tag)
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(_pool(), self._event, handle)
        try:
            payload = await asyncio.shield(future)
        except asyncio.CancelledError:
            # The task was killed or timed out, or this triggerer stops: stop the job on the server (the
            # thread ends when its operations do). Not awaited: a cancelled trigger must end now.
            self.log.warning("cancelled: interrupting Spark Connect job %s", self.request.tag)
            threading.Thread(target=handle.on_kill, name="atlas-connect-kill", daemon=True).start()
            raise
        self.log.info("Spark Connect job %s %s", self.request.tag, describe_event(payload))
        yield TriggerEvent(payload)
