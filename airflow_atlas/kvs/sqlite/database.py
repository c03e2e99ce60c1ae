"""The embedded store's database: THE one door to SQLite, shared by the service's parts (:mod:`.schema`,
:mod:`.reads`, :mod:`.writes`, :mod:`.lwt`).

* One connection per thread (``threading.local``), WAL and a busy timeout; after a fork the parent's
  connections are never used nor closed (kept referenced, :data:`.files.INHERITED`) and the child starts
  afresh. ``create=False`` opens the file read-write only if it exists (``mode=rw``): nothing is created.
* Transactions: every write is one ``BEGIN IMMEDIATE`` (serialised with every other writer of the file, so
  put_unless_exists and check_and_set are atomic across processes), every multi-statement read one read
  transaction (one snapshot).
* Every ``sqlite3`` error translated and named by operation and table (a missing table forgotten through
  :meth:`SqliteDatabase.when_table_gone`).
"""
from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import quote

from ...errors import InvalidInputError, StoreUnavailableError, TableNotFoundError
from .files import INHERITED, WeakConnection, why_unopenable


class SqliteDatabase:
    """Connections, transactions and error translation for the store file at ``path`` (already checked)."""

    def __init__(self, path: str, *, busy_timeout_ms: int, synchronous: str, create: bool):
        self.path = path
        self.create = create
        self.busy_timeout_ms = busy_timeout_ms
        self._synchronous = synchronous
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._conns: weakref.WeakSet[WeakConnection] = weakref.WeakSet()
        self._gone: list[Callable[[str], object]] = []
        self._closed = False

    def describe(self) -> str:
        return f"sqlite {self.path}"

    # ----- connections -----------------------------------------------------------------------------
    def connection(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use, in this process)."""
        if self._closed:
            raise StoreUnavailableError(f"sqlite store {self.path} is closed")
        pid = os.getpid()
        if pid != self._pid:
            # After fork: never use (or close) the parent's connections; start afresh in this process. The
            # inherited ones are kept referenced so they are never finalised (closed) in the child.
            INHERITED.append((self._local, list(self._conns)))
            self._pid = pid
            self._lock = threading.Lock()
            self._local = threading.local()
            self._conns = weakref.WeakSet()
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(
                    self.path if self.create else f"file:{quote(self.path)}?mode=rw",
                    uri=not self.create,
                    timeout=self.busy_timeout_ms / 1000.0,
                    isolation_level=None,
                    check_same_thread=False,  # only so close() may close it from another thread
                    factory=WeakConnection,
                )
                conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
                conn.execute(f"PRAGMA synchronous={self._synchronous}")
            except sqlite3.Error as exc:
                raise self.translate(exc, "connect", None) from exc
            self._local.conn = conn
            with self._lock:
                self._conns.add(conn)
        return conn

    def close(self) -> None:
        """Close this process's connections (a forked child closes none of its parent's)."""
        self._closed = True
        if os.getpid() != self._pid:
            return
        with self._lock:
            conns, self._conns = list(self._conns), weakref.WeakSet()
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:
                pass
        self._local = threading.local()

    # ----- errors ----------------------------------------------------------------------------------
    def when_table_gone(self, forget: Callable[[str], object]) -> None:
        """Call ``forget(table)`` whenever a table is found missing (a cache of its metadata)."""
        self._gone.append(forget)

    def translate(self, exc: BaseException, op: str, table: str | None) -> Exception:
        where = f" on table {table!r}" if table else ""
        msg = str(exc)
        if op in ("connect", "open") and isinstance(exc, sqlite3.DatabaseError):
            if "not a database" in msg or "malformed" in msg:
                return InvalidInputError(f"{self.path!r} is not an SQLite database (or it is corrupt): {msg}")
            if "unable to open" in msg:
                return InvalidInputError(f"sqlite store {self.path!r} cannot be opened: {why_unopenable(self.path)}")
        if isinstance(exc, sqlite3.OperationalError) and "no such table" in msg and table:
            for forget in self._gone:
                forget(table)
            return TableNotFoundError(f"table {table!r} does not exist in {self.describe()}")
        if isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg):
            return StoreUnavailableError(
                f"sqlite {op}{where} failed: database is locked (busy timeout {self.busy_timeout_ms} ms exceeded)"
            )
        return StoreUnavailableError(f"sqlite {op}{where} failed: {type(exc).__name__}: {msg}")

    # ----- transactions ----------------------------------------------------------------------------
    @contextmanager
    def write(self, op: str, table: str | None) -> Iterator[sqlite3.Connection]:
        """One BEGIN IMMEDIATE transaction: serialised with every other writer of the file."""
        conn = self.connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self.translate(exc, op, table) from exc
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            if isinstance(exc, sqlite3.Error):
                raise self.translate(exc, op, table) from exc
            raise

    @contextmanager
    def read(self, op: str, table: str | None) -> Iterator[sqlite3.Connection]:
        """A read transaction: every statement inside sees one snapshot."""
        conn = self.connection()
        try:
            conn.execute("BEGIN")
        except sqlite3.Error as exc:
            raise self.translate(exc, op, table) from exc
        try:
            yield conn
        except sqlite3.Error as exc:
            raise self.translate(exc, op, table) from exc
        finally:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error:
                pass

    def execute_many(self, conn: sqlite3.Connection, sql: str, params: list, op: str, table: str) -> None:
        """``executemany`` inside a transaction of :meth:`write`, its error translated."""
        try:
            conn.executemany(sql, params)
        except sqlite3.Error as exc:
            raise self.translate(exc, op, table) from exc
