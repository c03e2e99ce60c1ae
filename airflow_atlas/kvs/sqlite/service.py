"""The embedded store's service: construction, per-thread connections, error translation, lifecycle,
the table registry and file operations (space, purge, vacuum); reads, writes and LWT come from mixins."""
from __future__ import annotations

import json
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable
from contextlib import contextmanager
from urllib.parse import quote

from ...errors import InvalidInputError, StoreNotInitializedError, StoreUnavailableError, TableNotFoundError
from .. import _common as C
from ..api import KeyValueService
from ..tables import SweepStrategy, TableMetadata, WriteMode
from .files import INHERITED, META, WeakConnection, check_path, now_ms, physical_name, why_unopenable
from .lwt import LwtMixin
from .reads import ReadsMixin
from .writes import WritesMixin


class SqliteKeyValueService(WritesMixin, ReadsMixin, LwtMixin, KeyValueService):
    """Embedded store on one SQLite file. Thread- and process-safe (WAL, BEGIN IMMEDIATE)."""

    backend = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        busy_timeout_ms: int = 30_000,
        synchronous: str = "NORMAL",
        create: bool = True,
    ):
        """``create=False``: open an existing store only - a missing file, a database without the
        registry or a foreign database raise StoreNotInitializedError before anything is written (no file,
        no WAL switch, no registry). ``create=True`` (``init``) creates the file and the registry, and
        refuses a database that holds other tables. Bad paths are InvalidInputError naming the path."""
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidInputError(f"sqlite path must be a string, got {type(path).__name__}")
        path = os.fspath(path)
        if not path or path == ":memory:" or path.startswith("file:"):
            raise InvalidInputError(
                "sqlite path must be a file path (in-memory databases are not shared between threads/processes)"
            )
        C.check_int(busy_timeout_ms, "busy_timeout_ms", 0, 3_600_000)
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise InvalidInputError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        self.path = check_path(path)
        self._create = bool(create)
        if self._create:
            parent = os.path.dirname(self.path)
            try:
                os.makedirs(parent, exist_ok=True)
            except OSError as exc:
                raise InvalidInputError(
                    f"sqlite store {self.path!r}: cannot create its directory {parent!r} ({exc.strerror or exc})"
                ) from None
        elif not os.path.exists(self.path):
            raise StoreNotInitializedError(f"no store at sqlite {self.path} (the file does not exist)")
        self._busy_timeout_ms = busy_timeout_ms
        self._synchronous = synchronous
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._conns: weakref.WeakSet[WeakConnection] = weakref.WeakSet()
        self._meta_cache: dict[str, TableMetadata] = {}
        self._closed = False
        self._last_purge: dict[str, float] = {}
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        """Check the file is an Atlas store (or, with ``create``, a new or empty database) before writing
        anything to it; then WAL and the registry."""
        conn = self._conn()
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if META not in tables:
                if not self._create:
                    raise StoreNotInitializedError(
                        f"sqlite {self.path} is not an Atlas store (no {META} table)"
                        + (f"; it holds other tables: {', '.join(sorted(tables)[:5])}" if tables else "")
                    )
                if tables:
                    raise InvalidInputError(
                        f"sqlite {self.path} is a database of something else (tables {', '.join(sorted(tables)[:5])}): "
                        "an Atlas store needs its own file"
                    )
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreUnavailableError(f"sqlite {self.path}: could not enable WAL (journal_mode={mode})")
            if META not in tables:
                with self._write("open", None) as c:
                    c.execute(f"CREATE TABLE IF NOT EXISTS {META} (name TEXT PRIMARY KEY, metadata TEXT NOT NULL)")
        except sqlite3.Error as exc:
            raise self._translate(exc, "open", None) from exc

    # ----- connections -----------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
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
                    self.path if self._create else f"file:{quote(self.path)}?mode=rw",
                    uri=not self._create,
                    timeout=self._busy_timeout_ms / 1000.0,
                    isolation_level=None,
                    check_same_thread=False,  # only so close() may close it from another thread
                    factory=WeakConnection,
                )
                conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
                conn.execute(f"PRAGMA synchronous={self._synchronous}")
            except sqlite3.Error as exc:
                raise self._translate(exc, "connect", None) from exc
            self._local.conn = conn
            with self._lock:
                self._conns.add(conn)
        return conn

    def _translate(self, exc: BaseException, op: str, table: str | None) -> Exception:
        where = f" on table {table!r}" if table else ""
        msg = str(exc)
        if op in ("connect", "open") and isinstance(exc, sqlite3.DatabaseError):
            if "not a database" in msg or "malformed" in msg:
                return InvalidInputError(f"{self.path!r} is not an SQLite database (or it is corrupt): {msg}")
            if "unable to open" in msg:
                return InvalidInputError(f"sqlite store {self.path!r} cannot be opened: {why_unopenable(self.path)}")
        if isinstance(exc, sqlite3.OperationalError) and "no such table" in msg and table:
            self._meta_cache.pop(table, None)
            return TableNotFoundError(f"table {table!r} does not exist in {self.describe()}")
        if isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg):
            return StoreUnavailableError(
                f"sqlite {op}{where} failed: database is locked (busy timeout {self._busy_timeout_ms} ms exceeded)"
            )
        return StoreUnavailableError(f"sqlite {op}{where} failed: {type(exc).__name__}: {msg}")

    @contextmanager
    def _write(self, op: str, table: str | None):
        """One BEGIN IMMEDIATE transaction: serialised with every other writer of the file."""
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._translate(exc, op, table) from exc
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            if isinstance(exc, sqlite3.Error):
                raise self._translate(exc, op, table) from exc
            raise

    @contextmanager
    def _read(self, op: str, table: str | None):
        """A read transaction: every statement inside sees one snapshot."""
        conn = self._conn()
        try:
            conn.execute("BEGIN")
        except sqlite3.Error as exc:
            raise self._translate(exc, op, table) from exc
        try:
            yield conn
        except sqlite3.Error as exc:
            raise self._translate(exc, op, table) from exc
        finally:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error:
                pass

    # ----- lifecycle -------------------------------------------------------------------------------
    def set_fresh_timestamp_supplier(self, supplier: Callable[[], int]) -> None:
        """Checked like Cassandra's, not kept: SQLite has no write times (deletes are immediate)."""
        if not callable(supplier):
            raise InvalidInputError("the fresh timestamp supplier must be callable")

    def close(self) -> None:
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

    def describe(self) -> str:
        return f"sqlite {self.path}"

    # ----- metadata --------------------------------------------------------------------------------
    def _load_meta(self, conn: sqlite3.Connection, table: str) -> TableMetadata | None:
        row = conn.execute(f"SELECT metadata FROM {META} WHERE name = ?", (table,)).fetchone()
        if row is None:
            self._meta_cache.pop(table, None)
            return None
        meta = TableMetadata.from_json(json.loads(row[0]))
        self._meta_cache[table] = meta
        return meta

    def _meta(self, table: str, op: str) -> TableMetadata:
        """Cached metadata (the write mode never changes); TableNotFoundError for unknown tables."""
        C.check_table(table)
        meta = self._meta_cache.get(table)
        if meta is None:
            try:
                meta = self._load_meta(self._conn(), table)
            except sqlite3.Error as exc:
                raise self._translate(exc, op, table) from exc
            if meta is None:
                raise TableNotFoundError(f"table {table!r} does not exist in {self.describe()}")
        return meta

    def _require(self, table: str, op: str, *modes: WriteMode) -> TableMetadata:
        return C.check_write_mode(self._meta(table, op), table, op, modes)

    def create_table(self, table: str, metadata: TableMetadata = TableMetadata()) -> None:
        C.check_table(table)
        metadata = C.check_metadata(metadata)
        with self._write("create_table", table) as conn:
            existing = self._load_meta(conn, table)
            if existing is not None and existing.write_mode != metadata.write_mode:
                raise InvalidInputError(
                    f"table {table!r} exists with write mode {existing.write_mode.value.upper()}; "
                    f"the write mode of an existing table cannot change to {metadata.write_mode.value.upper()}"
                )
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {physical_name(table)} (r BLOB NOT NULL, c BLOB NOT NULL, ts INTEGER NOT NULL,"
                f" v BLOB NOT NULL, exp INTEGER, PRIMARY KEY (r, c, ts)) WITHOUT ROWID"
            )
            conn.execute(
                f"INSERT OR REPLACE INTO {META} (name, metadata) VALUES (?, ?)",
                (table, json.dumps(metadata.to_json(), sort_keys=True)),
            )
        self._meta_cache[table] = metadata

    def drop_table(self, table: str) -> None:
        C.check_table(table)
        with self._write("drop_table", table) as conn:
            conn.execute(f"DELETE FROM {META} WHERE name = ?", (table,))
            conn.execute(f"DROP TABLE IF EXISTS {physical_name(table)}")
        self._meta_cache.pop(table, None)

    def truncate_table(self, table: str) -> None:
        self._meta(table, "truncate_table")
        with self._write("truncate_table", table) as conn:
            conn.execute(f"DELETE FROM {physical_name(table)}")

    def table_exists(self, table: str) -> bool:
        C.check_table(table)
        try:
            return self._load_meta(self._conn(), table) is not None
        except sqlite3.Error as exc:
            raise self._translate(exc, "table_exists", table) from exc

    def get_metadata(self, table: str) -> TableMetadata:
        C.check_table(table)
        try:
            meta = self._load_meta(self._conn(), table)
        except sqlite3.Error as exc:
            raise self._translate(exc, "get_metadata", table) from exc
        if meta is None:
            raise TableNotFoundError(f"table {table!r} does not exist in {self.describe()}")
        return meta

    def set_sweep_strategy(self, table: str, strategy: SweepStrategy) -> None:
        C.check_table(table)
        strategy = SweepStrategy.parse(strategy)
        with self._write("set_sweep_strategy", table) as conn:
            meta = self._load_meta(conn, table)
            if meta is None:
                raise TableNotFoundError(f"table {table!r} does not exist in {self.describe()}")
            meta = TableMetadata(strategy, meta.write_mode, meta.cassandra_options)
            conn.execute(
                f"UPDATE {META} SET metadata = ? WHERE name = ?",
                (json.dumps(meta.to_json(), sort_keys=True), table),
            )
        self._meta_cache[table] = meta

    def list_tables(self) -> list[str]:
        try:
            return [r[0] for r in self._conn().execute(f"SELECT name FROM {META} ORDER BY name")]
        except sqlite3.Error as exc:
            raise self._translate(exc, "list_tables", None) from exc

    # ----- operations ------------------------------------------------------------------------------
    def space_used_bytes(self, table: str) -> int | None:
        """Bytes of the table's b-tree pages (SQLite's dbstat virtual table); None when unavailable."""
        self._meta(table, "space_used_bytes")
        try:
            row = self._conn().execute(
                "SELECT SUM(pgsize) FROM dbstat WHERE name = ?", (f"kvs_{table}",)
            ).fetchone()
        except sqlite3.Error:
            return None
        return int(row[0]) if row and row[0] is not None else 0

    def file_size_bytes(self) -> int:
        """Size on disk of the database file plus its WAL."""
        total = 0
        for suffix in ("", "-wal"):
            try:
                total += os.path.getsize(self.path + suffix)
            except OSError:
                pass
        return total

    def purge_expired(self) -> int:
        """Delete expired WALLCLOCK cells of every table; returns how many were removed."""
        removed = 0
        for table in self.list_tables():
            meta = self._meta(table, "purge_expired")
            if meta.write_mode is not WriteMode.WALLCLOCK:
                continue
            with self._write("purge_expired", table) as conn:
                cur = conn.execute(f"DELETE FROM {physical_name(table)} WHERE exp IS NOT NULL AND exp <= ?", (now_ms(),))
                removed += cur.rowcount
        return removed

    def vacuum(self) -> tuple[int, int]:
        """Purge expired cells, checkpoint the WAL and VACUUM. Returns (bytes before, bytes after) on disk."""
        before = self.file_size_bytes()
        self.purge_expired()
        conn = self._conn()
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            raise self._translate(exc, "vacuum", None) from exc
        return before, self.file_size_bytes()
