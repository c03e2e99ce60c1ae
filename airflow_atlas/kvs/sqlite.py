"""The embedded key-value store: one SQLite file, safe for several threads and processes on one machine.

Layout: one physical table per Atlas table, ``"kvs_<name>" (r BLOB, c BLOB, ts INTEGER, v BLOB, exp INTEGER,
PRIMARY KEY (r, c, ts)) WITHOUT ROWID``, plus the registry ``kvs_meta (name, metadata JSON)``. Blobs compare
with memcmp, so row and column order is unsigned byte order, as on Cassandra. LWT and WALLCLOCK cells live at
``ts = -1``; ``exp`` (epoch milliseconds) is set only by WALLCLOCK puts with a TTL.

Concurrency: WAL journal, a busy timeout, one connection per thread (``threading.local``), recreated after a
fork (``os.getpid()`` check). Every write is one ``BEGIN IMMEDIATE`` transaction, so put_unless_exists and
check_and_set are atomic across processes. Multi-statement reads run in one read transaction (a snapshot).

SQLite has no write times: deletes are immediate ``DELETE`` statements and the fresh timestamp supplier is
accepted but unused (spec 002 concerns Cassandra only).
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import weakref
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Mapping, Sequence
from urllib.parse import quote

from ..errors import (
    InvalidInputError,
    KeyAlreadyExistsError,
    StoreNotInitializedError,
    StoreUnavailableError,
    TableNotFoundError,
)
from . import _common as C
from .consistency import LWT_OPERATIONS, WRITE_OPERATIONS, Operation, resolve_operation
from .api import (
    LWT_TIMESTAMP,
    MAX_TIMESTAMP,
    SENTINEL_TIMESTAMP,
    Cell,
    KeyValueService,
    ScanRange,
    SweepStrategy,
    TableMetadata,
    Value,
    WriteMode,
    validate_cell,
    validate_value,
)

_META = "kvs_meta"
_MAX_NAME_BYTES = 255
_NOT_EXPIRED = "(exp IS NULL OR exp > ?)"
_PURGE_INTERVAL_S = 60.0


_INHERITED: list = []
"""Connections inherited through fork: referenced forever so the child never closes the parent's handles."""


_SENTINEL_SQL = "INSERT OR REPLACE INTO {t} (r, c, ts, v, exp) VALUES (?, ?, ?, X'', NULL)"
_DELETE_RANGE_SQL = "DELETE FROM {t} WHERE r = ? AND c = ? AND ts >= ? AND ts <= ?"


class _Connection(sqlite3.Connection):
    """A connection that can be weakly referenced: a thread's connection closes when the thread ends."""


def _now_ms() -> int:
    return int(time.time() * 1000)


def check_path(path: str) -> str:
    """The absolute path of a store file, or InvalidInputError naming the path: a NUL byte, a file or
    directory name over 255 bytes (the usual file-system limit) or a directory."""
    if "\x00" in path:
        raise InvalidInputError(f"sqlite path {path!r} contains a NUL byte")
    path = os.path.abspath(path)
    for part in path.split(os.sep):
        size = len(os.fsencode(part))
        if size > _MAX_NAME_BYTES:
            raise InvalidInputError(
                f"sqlite path {path!r}: the name {part[:32]!r}... is {size} bytes long (at most {_MAX_NAME_BYTES})"
            )
    if os.path.isdir(path):
        raise InvalidInputError(f"sqlite path {path!r} is a directory, not a database file")
    return path


def _why_unopenable(path: str) -> str:
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        return f"{parent!r} is not a directory"
    if os.path.exists(path) and not os.access(path, os.R_OK | os.W_OK):
        return "the file is not readable and writable by this user"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"the directory {parent!r} is not writable by this user"
    return "the location cannot hold a database file"


def _phys(table: str) -> str:
    """Quoted physical name of an Atlas table. ``table`` must already be validated."""
    return f'"kvs_{table}"'


class SqliteKeyValueService(KeyValueService):
    """Embedded store on one SQLite file. Thread- and process-safe (WAL, BEGIN IMMEDIATE)."""

    backend = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        busy_timeout_ms: int = 30_000,
        synchronous: str = "NORMAL",
        fresh_timestamp_supplier: Callable[[], int] | None = None,
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
        self._supplier = fresh_timestamp_supplier
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._conns: "weakref.WeakSet[_Connection]" = weakref.WeakSet()
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
            if _META not in tables:
                if not self._create:
                    raise StoreNotInitializedError(
                        f"sqlite {self.path} is not an Atlas store (no {_META} table)"
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
            if _META not in tables:
                with self._write("open", None) as c:
                    c.execute(f"CREATE TABLE IF NOT EXISTS {_META} (name TEXT PRIMARY KEY, metadata TEXT NOT NULL)")
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
            _INHERITED.append((self._local, list(self._conns)))
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
                    factory=_Connection,
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
                return InvalidInputError(f"sqlite store {self.path!r} cannot be opened: {_why_unopenable(self.path)}")
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
        if not callable(supplier):
            raise InvalidInputError("the fresh timestamp supplier must be callable")
        self._supplier = supplier  # unused: SQLite deletes are immediate

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
        row = conn.execute(f"SELECT metadata FROM {_META} WHERE name = ?", (table,)).fetchone()
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
        meta = self._meta(table, op)
        if meta.write_mode not in modes:
            allowed = " or ".join(m.value.upper() for m in modes)
            raise InvalidInputError(
                f"{op} is not allowed on table {table!r}: its write mode is {meta.write_mode.value.upper()}, "
                f"{op} needs {allowed}"
            )
        return meta

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
                f"CREATE TABLE IF NOT EXISTS {_phys(table)} (r BLOB NOT NULL, c BLOB NOT NULL, ts INTEGER NOT NULL,"
                f" v BLOB NOT NULL, exp INTEGER, PRIMARY KEY (r, c, ts)) WITHOUT ROWID"
            )
            conn.execute(
                f"INSERT OR REPLACE INTO {_META} (name, metadata) VALUES (?, ?)",
                (table, json.dumps(metadata.to_json(), sort_keys=True)),
            )
        self._meta_cache[table] = metadata

    def drop_table(self, table: str) -> None:
        C.check_table(table)
        with self._write("drop_table", table) as conn:
            conn.execute(f"DELETE FROM {_META} WHERE name = ?", (table,))
            conn.execute(f"DROP TABLE IF EXISTS {_phys(table)}")
        self._meta_cache.pop(table, None)

    def truncate_table(self, table: str) -> None:
        self._meta(table, "truncate_table")
        with self._write("truncate_table", table) as conn:
            conn.execute(f"DELETE FROM {_phys(table)}")

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
                f"UPDATE {_META} SET metadata = ? WHERE name = ?",
                (json.dumps(meta.to_json(), sort_keys=True), table),
            )
        self._meta_cache[table] = meta

    def list_tables(self) -> list[str]:
        try:
            return [r[0] for r in self._conn().execute(f"SELECT name FROM {_META} ORDER BY name")]
        except sqlite3.Error as exc:
            raise self._translate(exc, "list_tables", None) from exc

    # ----- LOGICAL writes --------------------------------------------------------------------------
    def put(self, table: str, values: Mapping[Cell, bytes], timestamp: int, *, operation: Operation | None = None) -> None:
        resolve_operation(operation, Operation.DATA_WRITE, WRITE_OPERATIONS, "put")  # one copy: no levels
        self._multi_put({table: values}, timestamp, "put")

    def multi_put(self, puts: Mapping[str, Mapping[Cell, bytes]], timestamp: int) -> None:
        self._multi_put(puts, timestamp, "multi_put")

    def _multi_put(self, puts: Mapping[str, Mapping[Cell, bytes]], timestamp: int, op: str) -> None:
        C.check_mapping(puts, "puts")
        timestamp = C.check_write_timestamp(timestamp)
        checked = {}
        for table, values in puts.items():
            self._require(table, op, WriteMode.LOGICAL)
            checked[table] = C.check_values(values)
        if not any(checked.values()):
            return
        first = next(iter(checked))
        with self._write(op, first if len(checked) == 1 else None) as conn:
            for table, values in checked.items():
                if values:
                    self._exec_many(
                        conn,
                        f"INSERT OR REPLACE INTO {_phys(table)} (r, c, ts, v, exp) VALUES (?, ?, ?, ?, NULL)",
                        [(cell.row, cell.col, timestamp, value) for cell, value in values.items()],
                        op,
                        table,
                    )

    def _exec_many(self, conn, sql: str, params: list, op: str, table: str) -> None:
        try:
            conn.executemany(sql, params)
        except sqlite3.Error as exc:
            raise self._translate(exc, op, table) from exc

    def delete(self, table: str, versions: Iterable[tuple[Cell, int]], *, operation: Operation | None = None) -> None:
        resolve_operation(operation, Operation.ABORT_DELETE, WRITE_OPERATIONS, "delete")
        self._require(table, "delete", WriteMode.LOGICAL)
        versions = C.check_versions(versions)
        if not versions:
            return
        with self._write("delete", table) as conn:
            self._exec_many(
                conn,
                f"DELETE FROM {_phys(table)} WHERE r = ? AND c = ? AND ts = ?",
                [(cell.row, cell.col, ts) for cell, ts in versions],
                "delete",
                table,
            )

    def delete_all_timestamps(self, table: str, ranges: Mapping[Cell, tuple[int, int]], *, operation: Operation | None = None) -> None:
        resolve_operation(operation, Operation.SWEEP_DELETE, WRITE_OPERATIONS, "delete_all_timestamps")
        self._require(table, "delete_all_timestamps", WriteMode.LOGICAL)
        ranges = C.check_ranges(ranges)
        if not ranges:
            return
        with self._write("delete_all_timestamps", table) as conn:
            self._exec_many(
                conn,
                _DELETE_RANGE_SQL.format(t=_phys(table)),
                [(cell.row, cell.col, lo, hi) for cell, (lo, hi) in ranges.items()],
                "delete_all_timestamps",
                table,
            )

    def add_gc_sentinels(self, table: str, cells: Iterable[Cell], *, operation: Operation | None = None) -> None:
        resolve_operation(operation, Operation.SENTINEL, WRITE_OPERATIONS, "add_gc_sentinels")
        self._require(table, "add_gc_sentinels", WriteMode.LOGICAL)
        cells = C.check_cells(cells)
        if not cells:
            return
        with self._write("add_gc_sentinels", table) as conn:
            self._exec_many(
                conn,
                _SENTINEL_SQL.format(t=_phys(table)),
                [(cell.row, cell.col, SENTINEL_TIMESTAMP) for cell in cells],
                "add_gc_sentinels",
                table,
            )

    def add_gc_sentinels_and_delete_all_timestamps(
        self, table: str, cells: Iterable[Cell], ranges: Mapping[Cell, tuple[int, int]]
    ) -> None:
        """Sentinels, then ranged deletes, in one SQLite transaction (all or nothing)."""
        op = "add_gc_sentinels_and_delete_all_timestamps"
        self._require(table, op, WriteMode.LOGICAL)
        cells = C.check_cells(cells)
        ranges = C.check_ranges(ranges)
        C.check_ranges_within(ranges, cells)
        if not cells:
            return
        with self._write(op, table) as conn:
            self._exec_many(
                conn,
                _SENTINEL_SQL.format(t=_phys(table)),
                [(cell.row, cell.col, SENTINEL_TIMESTAMP) for cell in cells],
                op,
                table,
            )
            if ranges:
                self._exec_many(
                    conn,
                    _DELETE_RANGE_SQL.format(t=_phys(table)),
                    [(cell.row, cell.col, lo, hi) for cell, (lo, hi) in ranges.items()],
                    op,
                    table,
                )

    def delete_rows(self, table: str, rows: Iterable[bytes], *, operation: Operation | None = None) -> None:
        resolve_operation(operation, Operation.SWEEP_DELETE, WRITE_OPERATIONS, "delete_rows")
        self._require(table, "delete_rows", WriteMode.LOGICAL)
        rows = C.check_rows(rows)
        if not rows:
            return
        with self._write("delete_rows", table) as conn:
            self._exec_many(conn, f"DELETE FROM {_phys(table)} WHERE r = ?", [(r,) for r in rows], "delete_rows", table)

    # ----- reads -----------------------------------------------------------------------------------
    def get(self, table: str, cells: Mapping[Cell, int]) -> dict[Cell, Value]:
        self._meta(table, "get")
        cells = C.check_cell_timestamps(cells)
        out: dict[Cell, Value] = {}
        if not cells:
            return out
        sql = (
            f"SELECT ts, v FROM {_phys(table)} WHERE r = ? AND c = ? AND ts < ? AND {_NOT_EXPIRED}"
            " ORDER BY ts DESC LIMIT 1"
        )
        now = _now_ms()
        with self._read("get", table) as conn:
            for cell, ts in cells.items():
                row = conn.execute(sql, (cell.row, cell.col, ts, now)).fetchone()
                if row is not None:
                    out[cell] = Value(row[0], row[1])
        return out

    def get_all_timestamps(
        self, table: str, cells: Iterable[Cell], timestamp: int = MAX_TIMESTAMP
    ) -> dict[Cell, list[int]]:
        self._meta(table, "get_all_timestamps")
        cells = C.check_cells(cells)
        timestamp = C.check_read_timestamp(timestamp)
        out: dict[Cell, list[int]] = {}
        sql = f"SELECT ts FROM {_phys(table)} WHERE r = ? AND c = ? AND ts < ? AND {_NOT_EXPIRED} ORDER BY ts"
        now = _now_ms()
        with self._read("get_all_timestamps", table) as conn:
            for cell in cells:
                found = [r[0] for r in conn.execute(sql, (cell.row, cell.col, timestamp, now))]
                if found:
                    out[cell] = found
        return out

    def _row_columns_sql(self, table: str, start_col, end_col, limit) -> tuple[str, list]:
        # SQLite: bare columns next to MAX() come from the row holding the maximum.
        sql = f"SELECT c, MAX(ts), v FROM {_phys(table)} WHERE r = ? AND ts < ? AND {_NOT_EXPIRED}"
        extra: list = []
        if start_col is not None:
            sql += " AND c >= ?"
            extra.append(start_col)
        if end_col is not None:
            sql += " AND c < ?"
            extra.append(end_col)
        sql += " GROUP BY c ORDER BY c"
        if limit is not None:
            sql += " LIMIT ?"
        return sql, extra

    def get_row_columns(
        self,
        table: str,
        row: bytes,
        start_col: bytes | None = None,
        end_col: bytes | None = None,
        limit: int | None = None,
        timestamp: int = MAX_TIMESTAMP,
    ) -> list[tuple[bytes, Value]]:
        self._meta(table, "get_row_columns")
        row = C.check_row(row)
        start_col = C.check_optional_bytes(start_col, "start_col")
        end_col = C.check_optional_bytes(end_col, "end_col")
        limit = C.check_limit(limit)
        timestamp = C.check_read_timestamp(timestamp)
        if limit == 0:
            return []
        sql, extra = self._row_columns_sql(table, start_col, end_col, limit)
        params = [row, timestamp, _now_ms(), *extra] + ([limit] if limit is not None else [])
        with self._read("get_row_columns", table) as conn:
            return [(c, Value(ts, v)) for c, ts, v in conn.execute(sql, params)]

    def get_rows_columns(
        self,
        table: str,
        rows: Sequence[bytes],
        start_col: bytes | None = None,
        end_col: bytes | None = None,
        timestamp: int = MAX_TIMESTAMP,
    ) -> dict[bytes, list[tuple[bytes, Value]]]:
        self._meta(table, "get_rows_columns")
        rows = C.check_rows(rows)
        start_col = C.check_optional_bytes(start_col, "start_col")
        end_col = C.check_optional_bytes(end_col, "end_col")
        timestamp = C.check_read_timestamp(timestamp)
        sql, extra = self._row_columns_sql(table, start_col, end_col, None)
        now = _now_ms()
        out: dict[bytes, list[tuple[bytes, Value]]] = {}
        with self._read("get_rows_columns", table) as conn:
            for row in rows:
                cols = [(c, Value(ts, v)) for c, ts, v in conn.execute(sql, [row, timestamp, now, *extra])]
                if cols:
                    out[row] = cols
        return out

    def full_range(self, table: str) -> ScanRange:
        self._meta(table, "full_range")
        return ScanRange("key", None, None)

    def split_ranges(self, table: str, parts: int) -> list[ScanRange]:
        """Key ranges with about the same number of rows each (boundaries are existing row keys)."""
        self._meta(table, "split_ranges")
        parts = C.check_parts(parts)
        if parts == 1:
            return [ScanRange("key", None, None)]
        with self._read("split_ranges", table) as conn:
            rows = [r[0] for r in conn.execute(f"SELECT DISTINCT r FROM {_phys(table)} ORDER BY r")]
        if len(rows) < 2:
            return [ScanRange("key", None, None)]
        parts = min(parts, len(rows))
        bounds = sorted({rows[(i * len(rows)) // parts] for i in range(1, parts)})
        edges: list[bytes | None] = [None, *bounds, None]
        return [ScanRange("key", edges[i], edges[i + 1]) for i in range(len(edges) - 1)]

    def scan(
        self,
        table: str,
        scan_range: ScanRange | None = None,
        start_after_row: bytes | None = None,
        page_size: int = 1000,
        timestamp: int = MAX_TIMESTAMP,
    ) -> Iterator[tuple[Cell, int, bytes]]:
        """Key order (unsigned bytes), keyset-paged: no cursor stays open between pages, so the caller may
        write to the store from the same thread while iterating."""
        self._meta(table, "scan")
        if scan_range is None:
            scan_range = ScanRange("key", None, None)
        if not isinstance(scan_range, ScanRange) or scan_range.kind != "key":
            raise InvalidInputError(f"the sqlite store scans key ranges (ScanRange kind 'key'), got {scan_range!r}")
        start = C.check_optional_bytes(scan_range.start, "scan range start")
        end = C.check_optional_bytes(scan_range.end, "scan range end")
        after = None if start_after_row is None else C.check_row(start_after_row)
        page_size = C.check_page_size(page_size)
        timestamp = C.check_read_timestamp(timestamp)
        return self._scan(table, start, end, after, page_size, timestamp)

    def _scan(self, table, start, end, after, page_size, timestamp) -> Iterator[tuple[Cell, int, bytes]]:
        # First page: the range's lower bounds. Later pages: only the keyset position (r, c, ts) > last,
        # which SQLite turns into one index seek (extra lower bounds on r would make it seek by row only,
        # re-reading a wide row for every page).
        common = f"SELECT r, c, ts, v FROM {_phys(table)} WHERE ts < ? AND {_NOT_EXPIRED}"
        upper, upper_args = ("", []) if end is None else (" AND r < ?", [end])
        first, first_args = common + upper, [timestamp, _now_ms(), *upper_args]
        if start is not None:
            first += " AND r >= ?"
            first_args.append(start)
        if after is not None:
            first += " AND r > ?"
            first_args.append(after)
        last = None
        while True:
            if last is None:
                sql, args = first + " ORDER BY r, c, ts LIMIT ?", [*first_args, page_size]
            else:
                sql = common + upper + " AND (r, c, ts) > (?, ?, ?) ORDER BY r, c, ts LIMIT ?"
                args = [timestamp, _now_ms(), *upper_args, *last, page_size]
            try:
                page = self._conn().execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise self._translate(exc, "scan", table) from exc
            for r, c, ts, v in page:
                yield Cell(r, c), ts, v
            if len(page) < page_size:
                return
            last = page[-1][:3]

    # ----- LWT tables ------------------------------------------------------------------------------
    def put_unless_exists(self, table: str, values: Mapping[Cell, bytes], *, operation: Operation | None = None) -> None:
        """Per row all-or-nothing (as one Cassandra LWT batch per row): a row with any existing cell gets
        none of its cells written; other rows are written. Raises KeyAlreadyExistsError naming the cells
        that existed, with their values in ``existing``."""
        resolve_operation(operation, Operation.LWT_COMMIT, LWT_OPERATIONS, "put_unless_exists")
        self._require(table, "put_unless_exists", WriteMode.LWT)
        values = C.check_values(values)
        if not values:
            return
        existing: dict[Cell, bytes] = {}
        select = f"SELECT v FROM {_phys(table)} WHERE r = ? AND c = ? AND ts = ?"
        insert = f"INSERT INTO {_phys(table)} (r, c, ts, v, exp) VALUES (?, ?, ?, ?, NULL)"
        with self._write("put_unless_exists", table) as conn:
            for row, cells in C.group_by_row(values).items():
                found = {}
                for cell in cells:
                    hit = conn.execute(select, (cell.row, cell.col, LWT_TIMESTAMP)).fetchone()
                    if hit is not None:
                        found[cell] = hit[0]
                if found:
                    existing.update(found)
                    continue
                conn.executemany(insert, [(c.row, c.col, LWT_TIMESTAMP, values[c]) for c in cells])
        if existing:
            raise KeyAlreadyExistsError(
                f"put_unless_exists into table {table!r}: {len(existing)} cell(s) already exist: "
                f"{C.describe_cells(existing)}",
                existing,
            )

    def check_and_set(
        self, table: str, cell: Cell, expected: bytes | None, new: bytes | None, *, operation: Operation | None = None
    ) -> bool:
        resolve_operation(operation, Operation.LWT_COMMIT, LWT_OPERATIONS, "check_and_set")
        self._require(table, "check_and_set", WriteMode.LWT)
        cell = validate_cell(cell)
        expected = None if expected is None else validate_value(expected, what="expected value")
        new = None if new is None else validate_value(new, what="new value")
        phys = _phys(table)
        with self._write("check_and_set", table) as conn:
            hit = conn.execute(
                f"SELECT v FROM {phys} WHERE r = ? AND c = ? AND ts = ?", (cell.row, cell.col, LWT_TIMESTAMP)
            ).fetchone()
            current = None if hit is None else hit[0]
            if current != expected:
                return False
            if new is None:
                if current is not None:
                    conn.execute(
                        f"DELETE FROM {phys} WHERE r = ? AND c = ? AND ts = ?", (cell.row, cell.col, LWT_TIMESTAMP)
                    )
            else:
                conn.execute(
                    f"INSERT OR REPLACE INTO {phys} (r, c, ts, v, exp) VALUES (?, ?, ?, ?, NULL)",
                    (cell.row, cell.col, LWT_TIMESTAMP, new),
                )
            return True

    def get_lwt(self, table: str, cells: Iterable[Cell], serial: bool = False) -> dict[Cell, bytes]:
        """``serial`` is accepted for the contract; every SQLite read is already linearizable."""
        self._require(table, "get_lwt", WriteMode.LWT, WriteMode.WALLCLOCK)
        cells = C.check_cells(cells)
        sql = f"SELECT v FROM {_phys(table)} WHERE r = ? AND c = ? AND ts = ? AND {_NOT_EXPIRED}"
        now = _now_ms()
        out: dict[Cell, bytes] = {}
        with self._read("get_lwt", table) as conn:
            for cell in cells:
                hit = conn.execute(sql, (cell.row, cell.col, LWT_TIMESTAMP, now)).fetchone()
                if hit is not None:
                    out[cell] = hit[0]
        return out

    def get_lwt_row(self, table: str, row: bytes, serial: bool = False) -> dict[bytes, bytes]:
        self._require(table, "get_lwt_row", WriteMode.LWT, WriteMode.WALLCLOCK)
        row = C.check_row(row)
        sql = f"SELECT c, v FROM {_phys(table)} WHERE r = ? AND ts = ? AND {_NOT_EXPIRED} ORDER BY c"
        with self._read("get_lwt_row", table) as conn:
            return {c: v for c, v in conn.execute(sql, (row, LWT_TIMESTAMP, _now_ms()))}

    # ----- WALLCLOCK tables ------------------------------------------------------------------------
    def put_wallclock(self, table: str, values: Mapping[Cell, bytes], ttl_seconds: int | None = None) -> None:
        self._require(table, "put_wallclock", WriteMode.WALLCLOCK)
        values = C.check_values(values)
        ttl_seconds = C.check_ttl(ttl_seconds)
        if not values:
            return
        exp = None if ttl_seconds is None else _now_ms() + ttl_seconds * 1000
        with self._write("put_wallclock", table) as conn:
            self._exec_many(
                conn,
                f"INSERT OR REPLACE INTO {_phys(table)} (r, c, ts, v, exp) VALUES (?, ?, ?, ?, ?)",
                [(c.row, c.col, LWT_TIMESTAMP, v, exp) for c, v in values.items()],
                "put_wallclock",
                table,
            )
            now = time.monotonic()
            if now - self._last_purge.get(table, 0.0) > _PURGE_INTERVAL_S:
                self._last_purge[table] = now
                conn.execute(f"DELETE FROM {_phys(table)} WHERE exp IS NOT NULL AND exp <= ?", (_now_ms(),))

    def delete_wallclock(self, table: str, cells: Iterable[Cell]) -> None:
        self._require(table, "delete_wallclock", WriteMode.WALLCLOCK)
        cells = C.check_cells(cells)
        if not cells:
            return
        with self._write("delete_wallclock", table) as conn:
            self._exec_many(
                conn,
                f"DELETE FROM {_phys(table)} WHERE r = ? AND c = ? AND ts = ?",
                [(c.row, c.col, LWT_TIMESTAMP) for c in cells],
                "delete_wallclock",
                table,
            )

    def get_wallclock_row(
        self, table: str, row: bytes, start_col: bytes | None = None, limit: int | None = None
    ) -> list[tuple[bytes, bytes]]:
        self._require(table, "get_wallclock_row", WriteMode.WALLCLOCK, WriteMode.LWT)
        row = C.check_row(row)
        start_col = C.check_optional_bytes(start_col, "start_col")
        limit = C.check_limit(limit)
        if limit == 0:
            return []
        sql = f"SELECT c, v FROM {_phys(table)} WHERE r = ? AND ts = ? AND {_NOT_EXPIRED}"
        params: list = [row, LWT_TIMESTAMP, _now_ms()]
        if start_col is not None:
            sql += " AND c >= ?"
            params.append(start_col)
        sql += " ORDER BY c"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._read("get_wallclock_row", table) as conn:
            return [(c, v) for c, v in conn.execute(sql, params)]

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
                cur = conn.execute(f"DELETE FROM {_phys(table)} WHERE exp IS NOT NULL AND exp <= ?", (_now_ms(),))
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
