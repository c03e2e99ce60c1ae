"""The embedded store's tables and metadata registry (its :class:`~airflow_atlas.kvs.api.Tables` part), and
the check that a file is an Atlas store before anything is written to it.

The registry is ``kvs_meta (name, metadata JSON)``; each Atlas table is one physical table (:mod:`.files`).
The metadata is cached in-process for the write-mode checks (a table's write mode never changes);
:meth:`SqliteTables.metadata` reads it afresh.
"""
from __future__ import annotations

import json
import sqlite3

from ...errors import InvalidInputError, StoreNotInitializedError, StoreUnavailableError, TableNotFoundError
from .. import _common as C
from ..api import Tables
from ..tables import SweepStrategy, TableMetadata
from .database import SqliteDatabase
from .files import META, physical_name


class SqliteTables(Tables):
    """The tables of the store file of ``db``."""

    def __init__(self, db: SqliteDatabase):
        self._db = db
        self._meta_cache: dict[str, TableMetadata] = {}
        db.when_table_gone(lambda table: self._meta_cache.pop(table, None))

    def open(self) -> None:
        """Check the file is an Atlas store (or, when the database creates, a new or empty database) before
        writing anything to it; then WAL and the registry."""
        db = self._db
        conn = db.connection()
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if META not in tables:
                if not db.create:
                    raise StoreNotInitializedError(
                        f"sqlite {db.path} is not an Atlas store (no {META} table)"
                        + (f"; it holds other tables: {', '.join(sorted(tables)[:5])}" if tables else "")
                    )
                if tables:
                    raise InvalidInputError(
                        f"sqlite {db.path} is a database of something else (tables {', '.join(sorted(tables)[:5])}): "
                        "an Atlas store needs its own file"
                    )
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreUnavailableError(f"sqlite {db.path}: could not enable WAL (journal_mode={mode})")
            if META not in tables:
                with db.write("open", None) as c:
                    c.execute(f"CREATE TABLE IF NOT EXISTS {META} (name TEXT PRIMARY KEY, metadata TEXT NOT NULL)")
        except sqlite3.Error as exc:
            raise db.translate(exc, "open", None) from exc

    # ----- metadata --------------------------------------------------------------------------------
    def _load_meta(self, conn: sqlite3.Connection, table: str) -> TableMetadata | None:
        row = conn.execute(f"SELECT metadata FROM {META} WHERE name = ?", (table,)).fetchone()
        if row is None:
            self._meta_cache.pop(table, None)
            return None
        meta = TableMetadata.from_json(json.loads(row[0]))
        self._meta_cache[table] = meta
        return meta

    def meta(self, table: str, op: str) -> TableMetadata:
        """Cached metadata (the write mode never changes); TableNotFoundError for unknown tables."""
        C.check_table(table)
        meta = self._meta_cache.get(table)
        if meta is None:
            try:
                meta = self._load_meta(self._db.connection(), table)
            except sqlite3.Error as exc:
                raise self._db.translate(exc, op, table) from exc
            if meta is None:
                raise TableNotFoundError(f"table {table!r} does not exist in {self._db.describe()}")
        return meta

    def create(self, table: str, metadata: TableMetadata) -> None:
        with self._db.write("create_table", table) as conn:
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

    def drop(self, table: str) -> None:
        with self._db.write("drop_table", table) as conn:
            conn.execute(f"DELETE FROM {META} WHERE name = ?", (table,))
            conn.execute(f"DROP TABLE IF EXISTS {physical_name(table)}")
        self._meta_cache.pop(table, None)

    def truncate(self, table: str) -> None:
        with self._db.write("truncate_table", table) as conn:
            conn.execute(f"DELETE FROM {physical_name(table)}")

    def exists(self, table: str) -> bool:
        try:
            return self._load_meta(self._db.connection(), table) is not None
        except sqlite3.Error as exc:
            raise self._db.translate(exc, "table_exists", table) from exc

    def metadata(self, table: str) -> TableMetadata:
        try:
            meta = self._load_meta(self._db.connection(), table)
        except sqlite3.Error as exc:
            raise self._db.translate(exc, "get_metadata", table) from exc
        if meta is None:
            raise TableNotFoundError(f"table {table!r} does not exist in {self._db.describe()}")
        return meta

    def set_strategy(self, table: str, strategy: SweepStrategy) -> None:
        with self._db.write("set_sweep_strategy", table) as conn:
            meta = self._load_meta(conn, table)
            if meta is None:
                raise TableNotFoundError(f"table {table!r} does not exist in {self._db.describe()}")
            meta = TableMetadata(strategy, meta.write_mode, meta.cassandra_options)
            conn.execute(
                f"UPDATE {META} SET metadata = ? WHERE name = ?",
                (json.dumps(meta.to_json(), sort_keys=True), table),
            )
        self._meta_cache[table] = meta

    def names(self) -> list[str]:
        try:
            return [r[0] for r in self._db.connection().execute(f"SELECT name FROM {META} ORDER BY name")]
        except sqlite3.Error as exc:
            raise self._db.translate(exc, "list_tables", None) from exc

    def space_used_bytes(self, table: str) -> int | None:
        """Bytes of the table's b-tree pages (SQLite's dbstat virtual table); None when unavailable."""
        try:
            row = self._db.connection().execute(
                "SELECT SUM(pgsize) FROM dbstat WHERE name = ?", (f"kvs_{table}",)
            ).fetchone()
        except sqlite3.Error:
            return None
        return int(row[0]) if row and row[0] is not None else 0
