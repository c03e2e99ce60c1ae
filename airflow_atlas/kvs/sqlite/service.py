"""The embedded store's service: :class:`SqliteKeyValueService`, the contract on one SQLite file, composed
of parts on one database.

The service builds a :class:`~.database.SqliteDatabase` (connections, transactions, error translation) and
the parts that hold it: :class:`~.schema.SqliteTables`, :class:`~.reads.SqliteReads`,
:class:`~.writes.SqliteWrites`, :class:`~.lwt.SqliteLwt` and :class:`~.lwt.SqliteWallclock`; the contract's
public methods (:class:`~airflow_atlas.kvs.api.KeyValueService`) check the arguments and call them. Here:
construction (the path and options checked, the file's directory made), the lifecycle, and the file
operations beyond the contract (size, purge of expired cells, vacuum)."""
from __future__ import annotations

import os
import sqlite3

from ...errors import InvalidInputError, StoreNotInitializedError
from .. import _common as C
from ..api import KeyValueService
from ..tables import WriteMode
from .database import SqliteDatabase
from .files import check_path, now_ms, physical_name
from .lwt import SqliteLwt, SqliteWallclock
from .reads import SqliteReads
from .schema import SqliteTables
from .writes import SqliteWrites


class SqliteKeyValueService(KeyValueService):
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
        create = bool(create)
        if create:
            parent = os.path.dirname(self.path)
            try:
                os.makedirs(parent, exist_ok=True)
            except OSError as exc:
                raise InvalidInputError(
                    f"sqlite store {self.path!r}: cannot create its directory {parent!r} ({exc.strerror or exc})"
                ) from None
        elif not os.path.exists(self.path):
            raise StoreNotInitializedError(f"no store at sqlite {self.path} (the file does not exist)")
        self._db = SqliteDatabase(self.path, busy_timeout_ms=busy_timeout_ms, synchronous=synchronous, create=create)
        self._tables = tables = SqliteTables(self._db)
        self._reads = SqliteReads(self._db)
        self._writes = SqliteWrites(self._db)
        self._lwt = SqliteLwt(self._db)
        self._wallclock = SqliteWallclock(self._db)
        try:
            tables.open()
        except BaseException:
            self.close()
            raise

    # ----- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        self._db.close()

    def describe(self) -> str:
        return self._db.describe()

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection: what bench/delete_rate.py reaches into (to move to the database's)."""
        return self._db.connection()

    # ----- file operations---------------------------------------------------------------------------
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
            with self._db.write("purge_expired", table) as conn:
                cur = conn.execute(f"DELETE FROM {physical_name(table)} WHERE exp IS NOT NULL AND exp <= ?", (now_ms(),))
                removed += cur.rowcount
        return removed

    def vacuum(self) -> tuple[int, int]:
        """Purge expired cells, checkpoint the WAL and VACUUM. Returns (bytes before, bytes after) on disk."""
        before = self.file_size_bytes()
        self.purge_expired()
        conn = self._db.connection()
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            raise self._db.translate(exc, "vacuum", None) from exc
        return before, self.file_size_bytes()
