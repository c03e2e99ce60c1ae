"""Fault injection for tests, through real seams: a key-value service wrapper (:class:`FaultyKvs`) that a
test puts under a real store - by passing a store opener to the Spark jobs (``open_store=``), or by
wrapping the store an Airflow hook opens. Nothing of this ships in ``airflow_atlas/``.

The fault fires right after a ranged delete (THOROUGH ``delete_all_timestamps``; CONSERVATIVE
``add_gc_sentinels_and_delete_all_timestamps``, sentinels included) reached the real store - optionally
only once a progress write succeeded first (``after_progress``: one complete iteration persisted, the
next one mid-way) - and only for the caller that claims the marker file (once per test, across processes
and attempts).
"""
from __future__ import annotations

import os
import signal
import time
from functools import partial

from airflow_atlas.sweep.queue.queue_tables import SWEEP_PROGRESS, decode_progress_value, progress_cell


class InjectedFailure(RuntimeError):
    """The fault a :class:`FaultyKvs` raises."""


def claim(markers: str | None) -> str | None:
    """The first of the ``os.pathsep``-separated marker files this caller created (each is created by
    exactly one caller), or None."""
    for marker in (markers or "").split(os.pathsep):
        if marker and _claim_one(marker):
            return marker
    return None


def _claim_one(marker: str) -> bool:
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(f"claimed by pid {os.getpid()}\n")
    return True


def raise_fault(marker: str, what: str) -> None:
    raise InjectedFailure(f"injected failure after {what}")


def kill_self(marker: str, what: str) -> None:
    with open(marker, "a") as f:
        f.write(f"killed pid {os.getpid()} {what}\n")
    os.kill(os.getpid(), signal.SIGKILL)


def hang(seconds: float, marker: str, what: str) -> None:
    time.sleep(seconds)


class FaultyKvs:
    """A KeyValueService that delegates to ``kvs`` and runs ``action(marker, what)`` once per marker (for
    the process that claims it) right after a ranged delete reached the store. ``what`` is
    ``"pair SHARD:STRATEGY progress N"`` (the last progress this store wrote) or ``"a ranged delete in T"``."""

    def __init__(self, kvs, marker: str, action=raise_fault, *, after_progress: bool = True):
        self._kvs = kvs
        self._marker = marker
        self._action = action
        self._after_progress = after_progress
        self.progress_writes = []

    def __getattr__(self, name):
        return getattr(self._kvs, name)

    def get_lwt(self, table, cells, **kw):
        if table == SWEEP_PROGRESS and len(cells) == 1 and self.progress_writes \
                and self.progress_writes[-1][0] != cells[0]:
            # The next pair of a Spark task's group: its own progress must be written before the fault.
            self.progress_writes.clear()
        return self._kvs.get_lwt(table, cells, **kw)

    def check_and_set(self, table, cell, expected, new, **kw):
        ok = self._kvs.check_and_set(table, cell, expected, new, **kw)
        if ok and table == SWEEP_PROGRESS:
            self.progress_writes.append((cell, new))
        return ok

    def delete_all_timestamps(self, table, ranges, **kw):
        self._kvs.delete_all_timestamps(table, ranges, **kw)
        self._after_delete(f"a ranged delete in {table}")

    def add_gc_sentinels_and_delete_all_timestamps(self, table, cells, ranges):
        self._kvs.add_gc_sentinels_and_delete_all_timestamps(table, cells, ranges)
        self._after_delete(f"sentinels and a ranged delete in {table}")

    def _after_delete(self, what: str) -> None:
        if self._after_progress and not self.progress_writes:
            return
        marker = claim(self._marker)
        if marker is None:
            return
        if self.progress_writes:
            cell, value = self.progress_writes[-1]
            shard, strategy = _pair_of(cell)
            what = f"pair {shard}:{strategy} progress {decode_progress_value(value)}"
        self._action(marker, what)


def _pair_of(cell) -> tuple[int, str]:
    for shard in range(256):
        for strategy, conservative in (("CONSERVATIVE", True), ("THOROUGH", False)):
            if progress_cell(shard, conservative) == cell:
                return shard, strategy
    raise AssertionError(f"not a shard progress cell: {cell}")


def open_faulty_store(marker: str, action, address, settings: dict):
    """A store opener for the Spark jobs (``open_store=partial(open_faulty_store, marker, action)``): the job's
    :class:`~airflow_atlas.kvs.address.StoreAddress` opened with a faulty key-value service."""
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.kvs.opening import open_kvs
    from airflow_atlas.store import AtlasStore

    config = StoreConfig(**settings) if settings else StoreConfig()
    return AtlasStore(FaultyKvs(open_kvs(address), marker, action), config)


def faulty_opener(marker: str, action=raise_fault):
    return partial(open_faulty_store, str(marker), action)


def faulty_job_env(action: str, markers: str) -> dict:
    """The environment for ``spark-submit tests/spark/faulty_job.py``: the fault to inject, the marker
    file(s) to claim, the venv's ``spark-submit`` first on PATH, and the repository on PYTHONPATH so the
    driver and the Python workers it starts (which inherit this environment) can import ``tests.faults``
    - the engine zip carries ``airflow_atlas`` only."""
    import sys
    from pathlib import Path

    repo_root = str(Path(__file__).resolve().parent.parent)
    python_path = os.pathsep.join(p for p in (repo_root, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, ATLAS_TEST_FAULT=action, ATLAS_TEST_FAULT_MARKER=markers, PYTHONPATH=python_path,
                PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


CAS_UNKNOWN = "CAS operation result is unknown - proposal accepted by 1 but not a quorum."
"""Cassandra's message for a Paxos round whose outcome is unknown (error code 0x1700, CasWriteUnknown)."""


def cas_unknown_error(table: str, keyspace: str | None) -> Exception:
    """The engine's error for an unknown CAS result: the driver's error for code 0x1700 (the driver knows no
    class of its own for it) translated by the Cassandra backend, as a loaded cluster makes it."""
    from cassandra.protocol import ErrorMessage

    from airflow_atlas.kvs.cassandra.errors import translate

    return translate(ErrorMessage(0x1700, CAS_UNKNOWN, None), "get_lwt", table, keyspace, [], lwt=True)


class PaxosUnknownKvs:
    """A KeyValueService that delegates to ``kvs``, except that every SERIAL read (``get_lwt`` /
    ``get_lwt_row`` with ``serial=True``) raises the engine's error for an unknown CAS result, and every
    check-and-set too (Paxos timing out under load); plain reads and writes reach the store."""

    def __init__(self, kvs):
        self._kvs = kvs
        self.serial_reads_refused = 0

    def __getattr__(self, name):
        return getattr(self._kvs, name)

    def _refuse(self, table: str) -> Exception:
        self.serial_reads_refused += 1
        return cas_unknown_error(table, getattr(self._kvs, "keyspace", None))

    def get_lwt(self, table, cells, serial=False):
        if serial:
            raise self._refuse(table)
        return self._kvs.get_lwt(table, cells, serial=False)

    def get_lwt_row(self, table, row, serial=False):
        if serial:
            raise self._refuse(table)
        return self._kvs.get_lwt_row(table, row, serial=False)

    def check_and_set(self, table, cell, expected, new, **kw):
        raise self._refuse(table)


class DeniedTableKvs:
    """A KeyValueService that delegates to ``kvs`` but refuses every WALLCLOCK write to ``table`` with the
    error the Cassandra service raises for a role without MODIFY on it
    (:class:`~airflow_atlas.errors.StorePermissionError`); ``denied`` counts the refusals."""

    def __init__(self, kvs, table: str):
        self._kvs = kvs
        self._table = table
        self.denied = 0

    def __getattr__(self, name):
        return getattr(self._kvs, name)

    def put_wallclock(self, table, values, ttl_seconds=None):
        if table == self._table:
            from airflow_atlas.errors import StorePermissionError

            self.denied += 1
            resource = f"<table atlas{table}>"
            raise StorePermissionError(
                f"the role has no MODIFY permission on {resource}", permission="MODIFY", resource=resource
            )
        return self._kvs.put_wallclock(table, values, ttl_seconds=ttl_seconds)
