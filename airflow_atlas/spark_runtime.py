"""Driver and executor logic of the PySpark jobs in ``spark_jobs/`` (part of the engine: no Airflow).

Two jobs, each one Spark application:

* **targeted sweep** (:func:`run_targeted_sweep`): a set of ``(shard, strategy)`` pairs, one Spark task
  per pair. Each task opens the store in its Python worker process (after the fork: no session is ever
  pickled), runs :meth:`TargetedSweeper.sweep_shard` (which takes the shard lock, refreshes its lease
  between iterations, resumes from persisted progress and releases the lock), closes the store and
  returns the shard's result. A shard whose lock is held elsewhere comes back ``skipped_locked``.
* **full-table sweep** (:func:`run_full_sweep`): the legacy scan-based sweep of one table, split with
  ``kvs.split_ranges`` (Cassandra token ranges, embedded key ranges), one Spark task per range.

Results are collected on the driver into ONE JSON document, written to ``--output`` and printed on
stdout between :data:`RESULT_BEGIN` and :data:`RESULT_END` (see :func:`extract_document`).

**Secrets.** The store URL (which may hold ``user:password``) never appears on a command line: the
driver reads it from ``--store-url-file`` (a 0600 file) or the environment variable ``ATLAS_STORE_URL``,
ships it to the executors inside the task closure only, and reports it redacted. Error texts coming back
from tasks are scrubbed of the URL and its password.

**Retries.** A task that raises is retried by Spark (``spark.task.maxFailures``; in local mode only with a
``local[N,F]`` master). Re-running a shard is safe: the engine resumes from persisted progress. On its
last allowed attempt a task reports ``failed`` instead of raising, so one bad shard does not abort the
others; the job then exits with :data:`EXIT_PAIRS_FAILED`. Bad input (unknown shard, strategy NOTHING,
unknown table) is reported ``failed`` at once, without retries.

**Fault injection (tests).** With ``spark.atlas.failOnceMarker=<path>`` (or ``ATLAS_FAIL_ONCE_MARKER``),
the first task attempt that finds the marker absent creates it and fails mid-shard after doing real
work: it runs one sweep iteration (progress persisted), then, inside the next iteration, lets one
ranged-delete call reach the store and raises right after it (lock released, progress not advanced).

pyspark is imported only inside functions, so importing this module needs only the engine.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence
from urllib.parse import unquote, urlsplit

RESULT_BEGIN = "=====ATLAS-SPARK-RESULT-BEGIN====="
RESULT_END = "=====ATLAS-SPARK-RESULT-END====="
DOCUMENT_VERSION = 1

STORE_URL_ENV = "ATLAS_STORE_URL"
"""Environment variable holding the store URL when no ``--store-url-file`` is given."""
FAIL_ONCE_CONF = "spark.atlas.failOnceMarker"
FAIL_ONCE_ENV = "ATLAS_FAIL_ONCE_MARKER"
STORE_SETTING_CONF_PREFIX = "spark.atlas.store."
"""Spark conf keys ``spark.atlas.store.<StoreConfig field>=<value>`` override store settings."""

EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_USAGE = 2
EXIT_PAIRS_FAILED = 3

_NON_RETRIABLE = ("InvalidInputError", "TableNotFoundError")
_STRATEGIES = ("CONSERVATIVE", "THOROUGH")


# ----- secrets ------------------------------------------------------------------------------------
def redact(url: str) -> str:
    """The URL without its password (the engine's ``redact_url`` when available)."""
    try:
        from .kvs.url import redact_url

        return redact_url(url)
    except ImportError:  # pragma: no cover - engine module not present
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.rsplit("@", 1)[1]
        user = parts.username or ""
        return parts._replace(netloc=f"{user}:***@{netloc}").geturl()


def scrub(text: str, url: str | None) -> str:
    """``text`` with the URL, and its password in any spelling, replaced by ``***``."""
    if not text or not url:
        return text
    out = text.replace(url, redact(url))
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        for secret in {password, unquote(password)}:
            if secret:
                out = out.replace(secret, "***")
    return out


def read_store_url(path: str | None = None, environ=None) -> str:
    """The store URL from ``path`` (first line, stripped) or from :data:`STORE_URL_ENV`.

    A file readable by group or others is refused (it may hold a password). Raises ValueError with a
    message that never contains the URL.
    """
    environ = os.environ if environ is None else environ
    if path:
        p = Path(path)
        if not p.exists():
            raise ValueError(f"store URL file {path} does not exist")
        mode = p.stat().st_mode & 0o777
        if mode & 0o077:
            raise ValueError(f"store URL file {path} has mode {mode:o}: it must not be readable by group/others (use 0600)")
        text = p.read_text(encoding="utf-8").strip()
        url = text.splitlines()[0].strip() if text else ""
        if not url:
            raise ValueError(f"store URL file {path} is empty")
        return url
    url = (environ.get(STORE_URL_ENV) or "").strip()
    if not url:
        raise ValueError(f"no store location: pass --store-url-file or set {STORE_URL_ENV}")
    return url


# ----- arguments ----------------------------------------------------------------------------------
def parse_pairs(text: str | Sequence) -> list[tuple[int, str]]:
    """``"0:CONSERVATIVE,1:THOROUGH"`` (or a list of ``"s:STRATEGY"``, ``(s, strategy)`` or
    ``{"shard": s, "strategy": ...}``) -> de-duplicated ``[(shard, STRATEGY), ...]`` in input order."""
    items: list = []
    if isinstance(text, str):
        items = [t for t in (x.strip() for x in text.split(",")) if t]
    else:
        items = list(text)
    out: list[tuple[int, str]] = []
    for item in items:
        if isinstance(item, str):
            shard_text, sep, strategy = item.partition(":")
            if not sep:
                raise ValueError(f"pair {item!r} is not SHARD:STRATEGY")
        elif isinstance(item, dict):
            shard_text, strategy = item.get("shard"), item.get("strategy")
        else:
            shard_text, strategy = item
        try:
            shard = int(shard_text)
        except (TypeError, ValueError):
            raise ValueError(f"pair {item!r}: shard {shard_text!r} is not an integer") from None
        strategy = str(getattr(strategy, "value", strategy)).strip().upper()  # SweepStrategy members too
        if strategy not in _STRATEGIES:
            raise ValueError(f"pair {item!r}: strategy must be CONSERVATIVE or THOROUGH")
        if shard < 0:
            raise ValueError(f"pair {item!r}: shard must be >= 0")
        if (shard, strategy) not in out:
            out.append((shard, strategy))
    if not out:
        raise ValueError("no (shard, strategy) pairs given")
    return out


def pairs_from_shards(shards: str, strategies: str) -> list[tuple[int, str]]:
    """``--shards "0-3,7" --strategies CONSERVATIVE,THOROUGH`` -> the cross product as pairs."""
    numbers: list[int] = []
    for part in (p.strip() for p in shards.split(",")):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            numbers.extend(range(int(lo), int(hi) + 1))
        else:
            numbers.append(int(part))
    names = [s.strip() for s in strategies.split(",") if s.strip()]
    return parse_pairs([f"{n}:{s}" for n in numbers for s in names])


def _parse_setting_value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_settings(items: Iterable[str]) -> dict:
    out = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"setting {item!r} is not NAME=VALUE")
        out[name.strip()] = _parse_setting_value(value.strip())
    return out


def settings_from_spark_conf(conf_items: Iterable[tuple[str, str]]) -> dict:
    """``spark.atlas.store.<name>=<value>`` Spark conf entries as StoreConfig overrides."""
    return {
        key[len(STORE_SETTING_CONF_PREFIX):]: _parse_setting_value(value)
        for key, value in conf_items
        if key.startswith(STORE_SETTING_CONF_PREFIX)
    }


def effective_max_failures(master: str, conf_value: str | None) -> int:
    """How many attempts Spark gives a task: ``local``/``local[N]`` never retry (1), ``local[N,F]`` gives F,
    other masters honour ``spark.task.maxFailures`` (default 4)."""
    master = (master or "").strip()
    if master.startswith("local-cluster"):
        return int(conf_value or 4)
    if master == "local" or master.startswith("local["):
        inner = master[len("local["):-1] if master.startswith("local[") else ""
        if "," in inner:
            return max(1, int(inner.split(",", 1)[1]))
        return 1
    return max(1, int(conf_value or 4))


# ----- executor side ------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskSpec:
    """Everything a task needs; pickled into the closure. The URL is never shown by repr."""

    store_url: str = field(repr=False)
    settings: dict
    max_attempts: int
    app_id: str
    batch_limit: int | None = None
    max_iterations: int | None = None
    dry_run: bool = False
    fail_once_marker: str | None = None
    # full sweep
    table: str | None = None
    batch_size: int = 1000
    sweep_ts: int | None = None
    # targeted sweep: the run's sweep timestamp per strategy (computed once by the caller), if given
    sweep_timestamps: dict | None = None


class InjectedFailure(RuntimeError):
    """Raised by the fault-injection knob (tests only)."""


def _attempt() -> tuple[int, int, int]:
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:  # called outside Spark (unit tests)
        return 0, 0, 0
    return tc.attemptNumber(), tc.partitionId(), tc.stageId()


def _executor_info() -> dict:
    import airflow_atlas

    return {
        "pid": os.getpid(),
        "host": os.uname().nodename,
        "airflow_imported": "airflow" in sys.modules,
        "engine_path": airflow_atlas.__file__,
    }


def _open_store(spec: TaskSpec):
    from .config import StoreConfig
    from .store import AtlasStore

    config = StoreConfig().with_overrides(**spec.settings) if spec.settings else StoreConfig()
    return AtlasStore.open(spec.store_url, config=config)


def _claim_marker(path: str | None) -> bool:
    """True for exactly one caller: the one that creates the marker file."""
    if not path:
        return False
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(f"claimed by pid {os.getpid()} at {time.time():.3f}\n")
    return True


def _failure_result(base: dict, exc: BaseException, spec: TaskSpec, attempt: int) -> dict:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return {
        **base,
        "status": "failed",
        "error_type": type(exc).__name__,
        "error": scrub(text, spec.store_url)[:2000],
        "attempt": attempt,
    }


def _handle_failure(base: dict, exc: BaseException, spec: TaskSpec, attempt: int) -> dict:
    """Re-raise (so Spark retries) unless this is the last attempt or the error is bad input."""
    if type(exc).__name__ in _NON_RETRIABLE or attempt + 1 >= spec.max_attempts:
        return _failure_result(base, exc, spec, attempt)
    detail = scrub(traceback.format_exc(), spec.store_url)
    # A fresh exception without the original chain: its text is scrubbed, the original's may not be.
    raise RuntimeError(
        f"{base} attempt {attempt} failed ({type(exc).__name__}); Spark will retry:\n{detail}"
    ) from None


def _inject_mid_shard_failure(store, spec: TaskSpec, shard: int, strategy: str):
    """One real iteration, then fail inside the next one right after a ranged delete reached the store."""
    first = store.sweeper.sweep_shard(
        shard, strategy, max_iterations=1, batch_limit=spec.batch_limit, holder=_holder(spec, shard, strategy, "inject")
    )
    kvs = store.kvs
    deletes = ("delete_all_timestamps", "add_gc_sentinels_and_delete_all_timestamps")  # THOROUGH, CONSERVATIVE

    def then_fail(original):
        def write_then_fail(*args, **kwargs):
            original(*args, **kwargs)
            raise InjectedFailure(f"injected failure after a ranged delete in shard {shard} {strategy}")

        return write_then_fail

    for name in deletes:  # instance attributes: this task's store only
        setattr(kvs, name, then_fail(getattr(kvs, name)))
    try:
        store.sweeper.sweep_shard(
            shard, strategy, max_iterations=1, batch_limit=spec.batch_limit, holder=_holder(spec, shard, strategy, "inject")
        )
    finally:
        for name in deletes:
            delattr(kvs, name)
    raise InjectedFailure(
        f"injected failure in shard {shard} {strategy} after {first.iterations} iteration(s) "
        f"(progress {first.old_progress} -> {first.new_progress})"
    )


def parse_sweep_timestamps(value) -> dict | None:
    """``"CONSERVATIVE=12,THOROUGH=15"`` or a mapping -> {"CONSERVATIVE": 12, ...}; ValueError naming the problem."""
    if value in (None, "", {}):
        return None
    items = value.items() if isinstance(value, Mapping) else (part.split("=", 1) for part in str(value).split(","))
    out = {}
    for item in items:
        if len(item) != 2:
            raise ValueError(f"sweep timestamps: expected STRATEGY=TIMESTAMP, got {item!r}")
        name, ts = item
        name = str(name).strip().upper()
        if name not in ("CONSERVATIVE", "THOROUGH"):
            raise ValueError(f"sweep timestamps: unknown strategy {name!r} (CONSERVATIVE or THOROUGH)")
        try:
            ts = int(str(ts).strip())
        except ValueError:
            raise ValueError(f"sweep timestamps: {name} timestamp {ts!r} is not an integer") from None
        if ts < 0:
            raise ValueError(f"sweep timestamps: {name} timestamp must be >= 0, got {ts}")
        out[name] = ts
    return out


def _holder(spec: TaskSpec, shard: int, strategy: str, attempt=None) -> str:
    """The lock holder of one pair in one application: the SAME for every attempt of the task, so a retry
    re-acquires (and fences off) the lease its dead attempt left, instead of waiting for it to expire.
    (Speculative execution would run two attempts at once under one holder: keep spark.speculation off.)"""
    return f"spark:{spec.app_id}:{shard}:{strategy.lower()}"


def _run_partition(spec: TaskSpec, items: list, describe: Callable, sweep_one: Callable) -> list[dict]:
    """The body both jobs' ``mapPartitions`` share: one store for the partition (opened at the first item,
    closed at the end), ``sweep_one(store, item, attempt)`` for each item. An item that fails becomes a
    ``failed`` result, or is re-raised for Spark to retry (:func:`_handle_failure`). ``describe(item)``
    names the item in a failure and is added to its result, with the task's attempt, partition, duration
    and executor."""
    attempt, partition, _ = _attempt()
    out: list[dict] = []
    store = None
    try:
        for item in items:
            base = describe(item)
            started = time.monotonic()
            try:
                if store is None:
                    store = _open_store(spec)
                result = sweep_one(store, item, attempt)
            except Exception as exc:
                out.append(_handle_failure(base, exc, spec, attempt))
                continue
            result.update(
                base,
                attempt=attempt,
                partition=partition,
                task_seconds=round(time.monotonic() - started, 3),
                executor=_executor_info(),
            )
            out.append(result)
    finally:
        if store is not None:
            try:
                store.close()
            except Exception:
                pass
    return out


def sweep_pairs_partition(spec: TaskSpec, pairs: Iterator[tuple[int, str]]) -> list[dict]:
    """mapPartitions body of the targeted job: sweep each pair of the partition (normally one)."""

    def sweep_one(store, pair, attempt) -> dict:
        shard, strategy = pair
        if _claim_marker(spec.fail_once_marker):
            _inject_mid_shard_failure(store, spec, shard, strategy)
        return store.sweeper.sweep_shard(
            shard,
            strategy,
            sweep_ts=(spec.sweep_timestamps or {}).get(strategy),
            holder=_holder(spec, shard, strategy, attempt),
            max_iterations=spec.max_iterations,
            batch_limit=spec.batch_limit,
            dry_run=spec.dry_run,
        ).to_json()

    return _run_partition(spec, list(pairs), lambda pair: {"shard": pair[0], "strategy": pair[1]}, sweep_one)


def sweep_range_partition(spec: TaskSpec, ranges: Iterator) -> list[dict]:
    """mapPartitions body of the full-sweep job: legacy-sweep each range of the partition (normally one)."""

    def sweep_one(store, item, _attempt) -> dict:
        index, scan_range = item
        if _claim_marker(spec.fail_once_marker):
            store.legacy_sweeper.sweep_table(
                spec.table, scan_range=scan_range, batch_size=spec.batch_size, sweep_ts=spec.sweep_ts,
                max_cells=spec.batch_size, dry_run=spec.dry_run,
            )
            raise InjectedFailure(f"injected failure in range {index} after one batch")
        return store.legacy_sweeper.sweep_table(
            spec.table,
            scan_range=scan_range,
            batch_size=spec.batch_size,
            sweep_ts=spec.sweep_ts,
            dry_run=spec.dry_run,
        ).to_json()

    return _run_partition(spec, list(ranges), lambda item: {"range_index": item[0], "table": spec.table}, sweep_one)


# ----- driver side --------------------------------------------------------------------------------
def _spark_facts(spark) -> tuple[object, str, int, dict, str | None]:
    sc = spark.sparkContext
    conf = sc.getConf()
    max_attempts = effective_max_failures(sc.master, conf.get("spark.task.maxFailures", None))
    settings = settings_from_spark_conf(conf.getAll())
    marker = conf.get(FAIL_ONCE_CONF, None) or os.environ.get(FAIL_ONCE_ENV) or None
    return sc, sc.applicationId, max_attempts, settings, marker


def _validate_settings(settings: dict, source: str = "spark.atlas.store.* conf / settings") -> None:
    from .config import StoreConfig

    StoreConfig().with_overrides(source, **settings)  # raises InvalidInputError naming the setting


_SUMMED_TARGETED = (
    "iterations",
    "entries_read",
    "cells_tombstoned",
    "sentinels_written",
    "aborted_writes_deleted",
    "transactions_aborted",
    "queue_rows_cleaned",
    "entries_skipped_dropped_tables",
    "corrupt_entries",
)
_SUMMED_FULL = (
    "cells_examined",
    "versions_examined",
    "versions_deleted",
    "sentinels_written",
    "transactions_aborted",
)


def _summarize(results: list[dict], summed: Sequence[str]) -> dict:
    by_status: dict[str, int] = {}
    for r in results:
        status = r.get("status") or ("finished" if r.get("finished") else "unfinished")
        by_status[status] = by_status.get(status, 0) + 1
    summary = {"tasks": len(results), "by_status": by_status}
    for name in summed:
        summary[name] = sum(int(r.get(name) or 0) for r in results if r.get("status") != "failed")
    summary["retried_tasks"] = sum(1 for r in results if int(r.get("attempt") or 0) > 0)
    summary["airflow_on_executors"] = any((r.get("executor") or {}).get("airflow_imported") for r in results)
    return summary


def run_targeted_sweep(
    spark,
    *,
    store_url: str,
    pairs: Sequence,
    batch_limit: int | None = None,
    max_iterations: int | None = None,
    dry_run: bool = False,
    settings: dict | None = None,
    fail_once_marker: str | None = None,
    engine_zip: str | None = None,
    sweep_timestamps: dict | None = None,
) -> dict:
    """Sweep ``pairs`` with one Spark task each and return the job's JSON document (a dict).

    ``sweep_timestamps`` ({"CONSERVATIVE": ts, "THOROUGH": ts}) pins the sweep timestamp of each strategy
    (an Airflow run computes them once); otherwise each task computes its own.

    ``settings`` (StoreConfig overrides) are merged over ``spark.atlas.store.*`` conf entries;
    ``fail_once_marker`` over ``spark.atlas.failOnceMarker``. ``engine_zip`` is added with addPyFile
    (spark-submit passes it with ``--py-files`` instead).
    """
    started = time.time()
    pairs = parse_pairs(pairs)
    sc, app_id, max_attempts, conf_settings, conf_marker = _spark_facts(spark)
    merged = {**conf_settings, **(settings or {})}
    _validate_settings(merged)
    if engine_zip:
        sc.addPyFile(engine_zip)
    spec = TaskSpec(
        store_url=store_url,
        settings=merged,
        max_attempts=max_attempts,
        app_id=app_id,
        batch_limit=batch_limit,
        max_iterations=max_iterations,
        dry_run=bool(dry_run),
        fail_once_marker=fail_once_marker or conf_marker,
        sweep_timestamps=parse_sweep_timestamps(sweep_timestamps),
    )
    sc.setJobDescription(f"atlas targeted sweep of {len(pairs)} shard/strategy pair(s)")
    rdd = sc.parallelize(pairs, numSlices=len(pairs))
    results = rdd.mapPartitions(functools.partial(sweep_pairs_partition, spec)).collect()
    results.sort(key=lambda r: (r["shard"], r["strategy"]))
    failed = [{"shard": r["shard"], "strategy": r["strategy"], "error": r.get("error")} for r in results if r.get("status") == "failed"]
    return {
        "job": "targeted_sweep",
        "version": DOCUMENT_VERSION,
        "ok": not failed,
        "app_id": app_id,
        "master": sc.master,
        "store": redact(store_url),
        "pairs": [f"{s}:{t}" for s, t in pairs],
        "batch_limit": batch_limit,
        "max_iterations": max_iterations,
        "dry_run": bool(dry_run),
        "max_task_attempts": max_attempts,
        "fault_injection": bool(spec.fail_once_marker),
        "summary": _summarize(results, _SUMMED_TARGETED),
        "failed": failed,
        "results": results,
        "started_at": round(started, 3),
        "duration_seconds": round(time.time() - started, 3),
    }


def _range_json(scan_range) -> list:
    def conv(v):
        return bytes(v).hex() if isinstance(v, (bytes, bytearray)) else v

    return [scan_range.kind, conv(scan_range.start), conv(scan_range.end)]


def run_full_sweep(
    spark,
    *,
    store_url: str,
    table: str,
    parts: int,
    batch_size: int = 1000,
    dry_run: bool = False,
    settings: dict | None = None,
    fail_once_marker: str | None = None,
    engine_zip: str | None = None,
) -> dict:
    """Legacy-sweep ``table`` split into about ``parts`` ranges, one Spark task each; return the document.

    The driver opens the store once to split the table and to take one sweep timestamp for all ranges
    (a timestamp taken earlier stays safe if a task is retried later)."""
    from .kvs.api import SweepStrategy, validate_table_name

    started = time.time()
    validate_table_name(table, internal_ok=False)
    if int(parts) < 1:
        raise ValueError("parts must be at least 1")
    if int(batch_size) < 1:
        raise ValueError("batch_size must be at least 1")
    sc, app_id, max_attempts, conf_settings, conf_marker = _spark_facts(spark)
    merged = {**conf_settings, **(settings or {})}
    _validate_settings(merged)
    if engine_zip:
        sc.addPyFile(engine_zip)
    driver_spec = TaskSpec(store_url=store_url, settings=merged, max_attempts=1, app_id=app_id)
    store = _open_store(driver_spec)
    try:
        strategy = store.kvs.get_metadata(table).strategy  # TableNotFoundError for an unknown table
        if strategy is SweepStrategy.NOTHING:
            raise ValueError(f"table {table!r} has sweep strategy NOTHING: it is never swept")
        sweep_ts = store.sweep_timestamps.sweep_timestamp(strategy)
        ranges = list(store.kvs.split_ranges(table, int(parts)))
    finally:
        store.close()
    spec = TaskSpec(
        store_url=store_url,
        settings=merged,
        max_attempts=max_attempts,
        app_id=app_id,
        dry_run=bool(dry_run),
        fail_once_marker=fail_once_marker or conf_marker,
        table=table,
        batch_size=int(batch_size),
        sweep_ts=sweep_ts,
    )
    indexed = list(enumerate(ranges))
    sc.setJobDescription(f"atlas full sweep of {table} in {len(ranges)} range(s)")
    results = (
        sc.parallelize(indexed, numSlices=max(1, len(indexed)))
        .mapPartitions(functools.partial(sweep_range_partition, spec))
        .collect()
    )
    results.sort(key=lambda r: r["range_index"])
    failed = [{"range_index": r["range_index"], "error": r.get("error")} for r in results if r.get("status") == "failed"]
    return {
        "job": "full_sweep",
        "version": DOCUMENT_VERSION,
        "ok": not failed and len(results) == len(ranges),
        "app_id": app_id,
        "master": sc.master,
        "store": redact(store_url),
        "table": table,
        "strategy": strategy.value,
        "sweep_ts": sweep_ts,
        "parts_requested": int(parts),
        "ranges": [_range_json(r) for r in ranges],
        "batch_size": int(batch_size),
        "dry_run": bool(dry_run),
        "max_task_attempts": max_attempts,
        "fault_injection": bool(spec.fail_once_marker),
        "summary": _summarize(results, _SUMMED_FULL),
        "failed": failed,
        "results": results,
        "started_at": round(started, 3),
        "duration_seconds": round(time.time() - started, 3),
    }


# ----- the document -------------------------------------------------------------------------------
def emit_document(doc: dict, output: str | None = None, stream=None) -> None:
    """Write ``doc`` to ``output`` (atomically) and print it between the markers on ``stream``."""
    text = json.dumps(doc, sort_keys=True, default=str)
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


# ----- command line -------------------------------------------------------------------------------
def build_parser(job: str) -> argparse.ArgumentParser:
    prog = "targeted_sweep_job.py" if job == "targeted" else "full_sweep_job.py"
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Atlas targeted sweep of (shard, strategy) pairs, one Spark task per pair."
            if job == "targeted"
            else "Atlas legacy (scan-based) sweep of one table split into ranges, one Spark task per range."
        ),
        epilog=(
            f"The store URL is read from --store-url-file (mode 0600) or ${STORE_URL_ENV}; never pass it as "
            f"an argument. Store settings: --setting NAME=VALUE or --conf {STORE_SETTING_CONF_PREFIX}NAME=VALUE. "
            f"Fault injection (tests): --conf {FAIL_ONCE_CONF}=PATH."
        ),
    )
    parser.add_argument("--store-url-file", help=f"file holding the store URL (default: ${STORE_URL_ENV})")
    parser.add_argument("--output", help="write the JSON result document to this path (driver's filesystem)")
    parser.add_argument("--dry-run", action="store_true", help="read and report, delete nothing")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE", help="StoreConfig override")
    parser.add_argument("--app-name", help="Spark application name")
    if job == "targeted":
        parser.add_argument("--pairs", help='e.g. "0:CONSERVATIVE,1:THOROUGH"')
        parser.add_argument("--shards", help='with --strategies: e.g. "0-3,7"')
        parser.add_argument("--strategies", default="CONSERVATIVE,THOROUGH", help="comma list (with --shards)")
        parser.add_argument("--batch-limit", type=int, help="queue entries per iteration")
        parser.add_argument("--max-iterations", type=int, help="iterations per shard before stopping")
        parser.add_argument(
            "--sweep-ts", help='sweep timestamp per strategy, e.g. "CONSERVATIVE=1200,THOROUGH=1250" (default: computed per task)'
        )
    else:
        parser.add_argument("--table", required=True)
        parser.add_argument("--parts", type=int, default=4, help="number of ranges (tasks)")
        parser.add_argument("--batch-size", type=int, default=1000, help="cells per delete batch")
    return parser


def _job_failure_document(job: str, store_url: str | None, exc: BaseException, started: float) -> dict:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return {
        "job": job,
        "version": DOCUMENT_VERSION,
        "ok": False,
        "store": redact(store_url) if store_url else None,
        "error_type": type(exc).__name__,
        "error": scrub(text, store_url)[-4000:],
        "results": [],
        "failed": [],
        "started_at": round(started, 3),
        "duration_seconds": round(time.time() - started, 3),
    }


def main(job: str, argv: Sequence[str] | None = None) -> int:
    """Entry point of both job scripts. Returns the process exit code."""
    parser = build_parser(job)
    args = parser.parse_args(argv)
    job_name = "targeted_sweep" if job == "targeted" else "full_sweep"
    started = time.time()
    try:
        settings = parse_settings(args.setting)
        _validate_settings(settings, "--setting")  # bad values: exit 2 naming the setting, before Spark starts
        if job == "targeted":
            if args.pairs and args.shards:
                parser.error("give --pairs or --shards/--strategies, not both")
            if args.pairs:
                pairs = parse_pairs(args.pairs)
            elif args.shards:
                pairs = pairs_from_shards(args.shards, args.strategies)
            else:
                parser.error("--pairs or --shards is required")
            sweep_timestamps = parse_sweep_timestamps(args.sweep_ts)
        store_url = read_store_url(args.store_url_file)
    except ValueError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE

    from pyspark.sql import SparkSession

    # No console progress bars: this output ends up in Airflow task logs.
    builder = SparkSession.builder.config("spark.ui.showConsoleProgress", "false")
    if args.app_name:
        builder = builder.appName(args.app_name)
    spark = builder.getOrCreate()
    try:
        level = spark.sparkContext.getConf().get("spark.atlas.logLevel", "WARN")
        spark.sparkContext.setLogLevel(level)
        print(f"[atlas] {job_name} on {spark.sparkContext.master} app {spark.sparkContext.applicationId}, store {redact(store_url)}", flush=True)
        try:
            if job == "targeted":
                doc = run_targeted_sweep(
                    spark,
                    store_url=store_url,
                    pairs=pairs,
                    batch_limit=args.batch_limit,
                    max_iterations=args.max_iterations,
                    dry_run=args.dry_run,
                    settings=settings,
                    sweep_timestamps=sweep_timestamps,
                )
            else:
                doc = run_full_sweep(
                    spark,
                    store_url=store_url,
                    table=args.table,
                    parts=args.parts,
                    batch_size=args.batch_size,
                    dry_run=args.dry_run,
                    settings=settings,
                )
        except Exception as exc:
            doc = _job_failure_document(job_name, store_url, exc, started)
            emit_document(doc, args.output)
            print(f"[atlas] {job_name} failed: {doc['error']}", file=sys.stderr, flush=True)
            # Bad input the driver found before any task ran (e.g. a spark.atlas.store.* conf value): exit 2.
            from .errors import InvalidInputError

            return EXIT_USAGE if isinstance(exc, InvalidInputError) else EXIT_JOB_FAILED
        emit_document(doc, args.output)
        return EXIT_OK if doc["ok"] else EXIT_PAIRS_FAILED
    finally:
        spark.stop()
