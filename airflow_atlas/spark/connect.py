"""The jobs on a long-lived Spark application reached through **Spark Connect** (part of the engine: no
Airflow; pyspark is imported only inside functions).

A Connect server (``scripts/spark.sh connect-start``, or any Spark 4 Connect server) is one Spark
application that stays up, so a submission pays neither the JVM start nor the SparkContext start of
``spark-submit``. What a submission still pays is a Connect *session* and, in a new session, the start of
its Python workers (each session has its own artifacts, hence its own Python worker environment). So:

* :func:`open_session` reuses ONE server-side session per engine version: its id is kept in a small file
  (``session_file``) and the engine zip is added to it with ``addArtifacts(..., pyfile=True)`` (adding the
  same file to the same session again is a no-op on the server; the zip's name is its content hash, so a
  changed engine never meets a stale one). A session the server has closed (idle timeout, restart: error
  condition ``INVALID_HANDLE.SESSION_CLOSED``) is replaced by a new one whose id is written back.
  Never ``stop()`` such a session: that closes it for every later submission.
* :func:`run_items` runs the job's items as ``spark.range(n, numPartitions=tasks).mapInArrow(...)``: each
  partition (= one Spark task) a contiguous group of the items (the driver chose ``tasks``), whose body is
  the same :func:`~airflow_atlas.spark.executor.run_partition` the ``spark-submit`` jobs run in
  ``mapPartitions`` (Connect has no RDD API). Each task returns its pickled ``ItemResult`` list.

Process hygiene: creating a remote session makes pyspark mark the whole process as a Connect client
(``os.environ["SPARK_CONNECT_MODE_ENABLED"]``), which every child process inherits - a ``spark-submit``
started later by the same process (an Airflow worker running both kinds of task, ``dag.test()``) then fails
with ``CONNECT_URL_NOT_SET``. Use sessions inside :func:`connect_client_mode`, which puts the variable back
as it was when the block ends.

The store URL travels inside the pickled task to the server, like the RDD closure of a submitted job does
to its executors: use a Connect server on loopback, or one reached with ``use_ssl=true`` and a token.
"""
from __future__ import annotations

import functools
import os
import pickle
import tempfile
import threading
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from .document import ItemResult
    from .executor import TaskSpec

SESSION_CLOSED = "INVALID_HANDLE.SESSION_CLOSED"
"""Spark's error condition for a session id the server has closed (it refuses to reopen it)."""

CONNECT_MODE_ENV = "SPARK_CONNECT_MODE_ENABLED"
"""The variable pyspark sets in ``os.environ`` when it creates a remote session (module doc)."""


_MODE_LOCK = threading.Lock()
_MODE_USERS: list = [0, None]  # [blocks inside connect_client_mode now, the variable's value before the first]


@contextmanager
def connect_client_mode() -> Iterator[None]:
    """Use Connect sessions inside this block: afterwards :data:`CONNECT_MODE_ENV` is what it was before,
    so processes started later (``spark-submit``) are not taken for Connect clients. Thread-safe: blocks
    running at once in threads (the triggerer runs several Connect jobs) restore it when the last one ends."""
    with _MODE_LOCK:
        if _MODE_USERS[0] == 0:
            _MODE_USERS[1] = os.environ.get(CONNECT_MODE_ENV)
        _MODE_USERS[0] += 1
    try:
        yield
    finally:
        with _MODE_LOCK:
            _MODE_USERS[0] -= 1
            if _MODE_USERS[0] == 0:
                before = _MODE_USERS[1]
                if before is None:
                    os.environ.pop(CONNECT_MODE_ENV, None)
                else:
                    os.environ[CONNECT_MODE_ENV] = before


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (else a classic one with a SparkContext)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def session_url(remote: str, session_id: str) -> str:
    """``sc://host:port/;params`` with ``session_id`` set (any session_id already in it is replaced)."""
    base, _, params = remote.partition(";")
    if not base.startswith("sc://"):
        raise ValueError(f"a Spark Connect URL starts with sc://, got {remote.split(';')[0]!r}")
    kept = [p for p in params.split(";") if p and not p.startswith("session_id=")]
    if "/" not in base[len("sc://"):]:
        base += "/"
    return ";".join([base, *kept, f"session_id={session_id}"])


def _read_session_id(session_file: Path) -> str | None:
    try:
        text = session_file.read_text(encoding="utf-8").strip()
        return str(uuid.UUID(text))
    except (OSError, ValueError):
        return None


def _write_session_id(session_file: Path, session_id: str) -> None:
    session_file.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=session_file.parent, prefix=".session-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(session_id + "\n")
    os.replace(tmp, session_file)  # atomic: concurrent submitters read one id or the other, never half


def _condition(exc: BaseException) -> str | None:
    get = getattr(exc, "getCondition", None)
    try:
        return get() if callable(get) else None
    except Exception:
        return None


def open_session(remote: str, engine_zip: str, session_file: str | os.PathLike) -> SparkSession:
    """A Spark Connect session on ``remote`` (``sc://...``) holding ``engine_zip`` as a Python artifact:
    the session named in ``session_file`` when the server still has it, else a new one (its id written to
    ``session_file``). The caller must not ``stop()`` it (module doc)."""
    from pyspark.sql import SparkSession

    session_file = Path(session_file)
    session_id = _read_session_id(session_file)
    for _ in range(2):
        if session_id is None:
            session_id = str(uuid.uuid4())
            _write_session_id(session_file, session_id)
        spark = SparkSession.builder.remote(session_url(remote, session_id)).create()
        try:
            spark.addArtifacts(str(engine_zip), pyfile=True)
            return spark
        except Exception as exc:
            if _condition(exc) != SESSION_CLOSED:
                raise
            session_id = None  # closed on the server: take a new one
    raise RuntimeError("Spark Connect refused two sessions in a row")  # pragma: no cover - needs a racing server


def _arrow_task(spec: TaskSpec, items: list, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` body: the rows of this partition name the items it sweeps, in one
    :func:`~.executor.run_partition` (one store for the group)."""
    import pyarrow as pa

    from .executor import run_partition

    indices = [index for batch in batches for index in batch.column(0).to_pylist()]
    if indices:
        results = run_partition(spec, iter([items[index] for index in indices]))
        yield pa.RecordBatch.from_pydict({"results": [pickle.dumps(results)]}, schema=pa.schema([("results", pa.binary())]))


def run_items(spark: SparkSession, spec: TaskSpec, items: list, tasks: int) -> list[ItemResult]:
    """The items in ``tasks`` Spark tasks (at most one per item) on a Connect session; the ``ItemResult`` of
    every item."""
    n = max(1, min(len(items), tasks))
    rows = (
        spark.range(0, len(items), 1, n)
        .mapInArrow(functools.partial(_arrow_task, spec, list(items)), "results binary")
        .collect()
    )
    return [result for row in rows for result in pickle.loads(row["results"])]


def server_facts(spark: SparkSession) -> tuple[str, str, str | None, list]:
    """``(master, application id, spark.task.maxFailures, all conf)`` of a Connect session's server."""
    conf = spark.conf
    master, app_id = conf.get("spark.master"), conf.get("spark.app.id")
    assert master is not None and app_id is not None  # a running application's conf holds both
    return master, app_id, conf.get("spark.task.maxFailures", None), list(conf.getAll.items())
