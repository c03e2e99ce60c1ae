"""The result document of a Spark job: one :class:`ItemResult` per Spark task item, one :class:`JobDocument`
per application. Both are dataclasses, serialised by :mod:`airflow_atlas.serialisation` (the driver's
``--output`` file and stdout, read back by the Airflow glue); their flat JSON forms are declared here (a
pydantic serializer and validator each). Absent values stay ``None``."""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TextIO

from pydantic import model_serializer, model_validator

from ..serialisation import to_json

RESULT_BEGIN = "=====ATLAS-SPARK-RESULT-BEGIN====="
RESULT_END = "=====ATLAS-SPARK-RESULT-END====="
DOCUMENT_VERSION = 1

EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_USAGE = 2
EXIT_PAIRS_FAILED = 3

FAILED = "failed"


@dataclass
class ItemResult:
    """What one item (a (shard, strategy) pair, or a scan range) of a Spark task came to.

    ``item`` names it (``{"shard", "strategy"}`` or ``{"range_index", "table"}``); ``engine`` is the engine's
    own result (``ShardSweepResult`` / ``LegacySweepResult`` JSON), None when it failed.
    The JSON form is flat: the item, the engine's fields, then the task's."""

    item: dict
    status: str
    attempt: int = 0
    engine: dict | None = None
    partition: int | None = None
    task_seconds: float | None = None
    executor: dict | None = None
    error_type: str | None = None
    error: str | None = None
    retriable: bool | None = None

    _TASK_FIELDS: ClassVar[tuple[str, ...]] = (
        "status", "attempt", "partition", "task_seconds", "executor", "error_type", "error", "retriable")

    @property
    def failed(self) -> bool:
        return self.status == FAILED

    @model_serializer(mode="wrap")
    def _dump(self, handler: Callable[[object], dict[str, Any]]) -> dict[str, Any]:
        """Flat: the item, the engine's fields, then the task's."""
        data = handler(self)
        return {**data.pop("item"), **(data.pop("engine") or {}), **data}

    @staticmethod
    def gathered(data: Mapping[str, Any], item_keys: Sequence[str]) -> dict[str, Any]:
        """The fields of an item's flat JSON ``data`` (its item named by ``item_keys``)."""
        item = {k: data[k] for k in item_keys if k in data}
        task: dict[str, Any] = {k: data.get(k) for k in ItemResult._TASK_FIELDS}
        rest = {k: v for k, v in data.items() if k not in item and k not in ItemResult._TASK_FIELDS}
        status = task.pop("status") or FAILED
        engine = None if status == FAILED else {**rest, "status": status}
        return {"item": item, "status": status, "engine": engine, **task, "attempt": task["attempt"] or 0}


@dataclass
class JobDocument:
    """The whole application's outcome. ``params`` are the job's own inputs (``pairs``, ``batch_limit``...
    or ``table``, ``sweep_ts``, ``ranges``...), flattened into the JSON."""

    job: str
    ok: bool
    store: str | None
    retriable: bool | None = None
    app_id: str | None = None
    master: str | None = None
    max_task_attempts: int | None = None
    params: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    failed: list = field(default_factory=list)
    results: list[ItemResult] = field(default_factory=list)
    error_type: str | None = None
    error: str | None = None
    started_at: float | None = None
    duration_seconds: float | None = None
    spark_submit: dict | None = None
    version: int = DOCUMENT_VERSION

    ITEM_KEYS: ClassVar[dict[str, tuple[str, ...]]] = {
        "targeted_sweep": ("shard", "strategy"), "full_sweep": ("range_index", "table"),
    }

    @model_serializer(mode="wrap")
    def _dump(self, handler: Callable[[object], dict[str, Any]]) -> dict[str, Any]:
        """Flat: the document's own fields, the ``params``, then ``results`` (each flat)."""
        data = handler(self)
        params, results = data.pop("params"), data.pop("results")
        return {**data, **params, "results": results}

    @model_validator(mode="before")
    @classmethod
    def _load(cls, data: Any) -> Any:
        """From the flat JSON: keys not the document's own are ``params``; each result gathered by the
        job's item keys (:meth:`ItemResult.gathered`); ``version`` is this module's."""
        if not isinstance(data, Mapping) or "params" in data:
            return data
        own = {f.name for f in fields(cls)} - {"params", "results", "version"}
        job = data.get("job")
        keys = cls.ITEM_KEYS.get(job, ()) if isinstance(job, str) else ()
        return {
            **{k: data[k] for k in own if k in data},
            "params": {k: v for k, v in data.items() if k not in own and k not in ("results", "version")},
            "results": [ItemResult.gathered(r, keys) for r in data.get("results") or []],
        }

    def result_for(self, **item: object) -> ItemResult | None:
        return next((r for r in self.results if all(r.item.get(k) == v for k, v in item.items())), None)


def summarize(results: Sequence[ItemResult], summed: Sequence[str]) -> dict:
    """Counts by status, sums of the engine counters ``summed`` over the items that did not fail."""
    by_status: dict[str, int] = {}
    for r in results:
        by_status[r.status] = by_status.get(r.status, 0) + 1
    # "tasks" counts the items (one Spark task each until pairs were grouped); "spark_tasks" the tasks they ran in.
    summary: dict[str, Any] = {"tasks": len(results), "by_status": by_status,
                               "spark_tasks": len({r.partition for r in results if r.partition is not None})}
    for name in summed:
        summary[name] = sum(int((r.engine or {}).get(name) or 0) for r in results)
    # Spark tasks retried (the items of one retried task all report its attempt).
    summary["retried_tasks"] = len({r.partition for r in results if r.attempt > 0})
    summary["airflow_on_executors"] = any((r.executor or {}).get("airflow_imported") for r in results)
    return summary


def emit_document(doc: JobDocument | Mapping, output: str | None = None, stream: TextIO | None = None) -> None:
    """Write the document to ``output`` (atomically) and print it between the markers on ``stream``."""
    data = to_json(doc) if isinstance(doc, JobDocument) else doc
    text = json.dumps(data, sort_keys=True, default=str)
    if output:
        out = Path(output)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        tmp.write_text(text + "\n", encoding="utf-8")
        os.replace(tmp, out)
    stream = stream or sys.stdout
    stream.write(f"\n{RESULT_BEGIN}\n{text}\n{RESULT_END}\n")
    stream.flush()


def extract_document(text: str) -> dict | None:
    """The last document printed between the markers in ``text`` (e.g. spark-submit output), or None."""
    end = text.rfind(RESULT_END)
    if end < 0:
        return None
    begin = text.rfind(RESULT_BEGIN, 0, end)
    if begin < 0:
        return None
    body = text[begin + len(RESULT_BEGIN):end]
    # Log decorations (e.g. Airflow's timestamp prefix and logger suffix) may surround the JSON line.
    brace = body.find("{")
    if brace < 0:
        return None
    document, _ = json.JSONDecoder().raw_decode(body[brace:])
    return document
