"""LWT and WALLCLOCK tables of the embedded store (its :class:`~airflow_atlas.kvs.api.LwtTables` and
:class:`~airflow_atlas.kvs.api.WallclockTables` parts): put_unless_exists and check_and_set are atomic
across processes because every write is one BEGIN IMMEDIATE transaction; WALLCLOCK cells may carry a TTL."""
from __future__ import annotations

import time

from ...errors import KeyAlreadyExistsError
from .. import _common as C
from ..api import LWT_TIMESTAMP, Cell, LwtTables, WallclockTables
from .database import SqliteDatabase
from .files import NOT_EXPIRED, PURGE_INTERVAL_S, now_ms, optional_filters, physical_name


class SqliteLwt(LwtTables):
    """The LWT tables of :class:`~.service.SqliteKeyValueService`, on its database."""

    def __init__(self, db: SqliteDatabase):
        self._db = db

    def put_unless_exists(self, table: str, values: dict[Cell, bytes]) -> None:
        """Per row all-or-nothing (as one Cassandra LWT batch per row): a row with any existing cell gets
        none of its cells written; other rows are written. Raises KeyAlreadyExistsError naming the cells
        that existed, with their values in ``existing``."""
        existing: dict[Cell, bytes] = {}
        select = f"SELECT v FROM {physical_name(table)} WHERE r = ? AND c = ? AND ts = ?"
        insert = f"INSERT INTO {physical_name(table)} (r, c, ts, v, exp) VALUES (?, ?, ?, ?, NULL)"
        with self._db.write("put_unless_exists", table) as conn:
            for cells in C.group_by_row(values).values():
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

    def check_and_set(self, table: str, cell: Cell, expected: bytes | None, new: bytes | None) -> bool:
        phys = physical_name(table)
        with self._db.write("check_and_set", table) as conn:
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

    def get(self, table: str, cells: list[Cell], serial: bool) -> dict[Cell, bytes]:
        """``serial`` is accepted for the contract; every SQLite read is already linearizable."""
        sql = f"SELECT v FROM {physical_name(table)} WHERE r = ? AND c = ? AND ts = ? AND {NOT_EXPIRED}"
        now = now_ms()
        out: dict[Cell, bytes] = {}
        with self._db.read("get_lwt", table) as conn:
            for cell in cells:
                hit = conn.execute(sql, (cell.row, cell.col, LWT_TIMESTAMP, now)).fetchone()
                if hit is not None:
                    out[cell] = hit[0]
        return out

    def row(self, table: str, row: bytes, serial: bool) -> dict[bytes, bytes]:
        sql = f"SELECT c, v FROM {physical_name(table)} WHERE r = ? AND ts = ? AND {NOT_EXPIRED} ORDER BY c"
        with self._db.read("get_lwt_row", table) as conn:
            return {c: v for c, v in conn.execute(sql, (row, LWT_TIMESTAMP, now_ms()))}


class SqliteWallclock(WallclockTables):
    """The WALLCLOCK tables of :class:`~.service.SqliteKeyValueService`, on its database: a put into a table
    also deletes its expired cells, at most once a ``PURGE_INTERVAL_S`` per table."""

    def __init__(self, db: SqliteDatabase):
        self._db = db
        self._last_purge: dict[str, float] = {}

    def put(self, table: str, values: dict[Cell, bytes], ttl_seconds: int | None) -> None:
        exp = None if ttl_seconds is None else now_ms() + ttl_seconds * 1000
        with self._db.write("put_wallclock", table) as conn:
            self._db.execute_many(
                conn,
                f"INSERT OR REPLACE INTO {physical_name(table)} (r, c, ts, v, exp) VALUES (?, ?, ?, ?, ?)",
                [(c.row, c.col, LWT_TIMESTAMP, v, exp) for c, v in values.items()],
                "put_wallclock",
                table,
            )
            now = time.monotonic()
            if now - self._last_purge.get(table, 0.0) > PURGE_INTERVAL_S:
                self._last_purge[table] = now
                conn.execute(f"DELETE FROM {physical_name(table)} WHERE exp IS NOT NULL AND exp <= ?", (now_ms(),))

    def delete(self, table: str, cells: list[Cell]) -> None:
        with self._db.write("delete_wallclock", table) as conn:
            self._db.execute_many(
                conn,
                f"DELETE FROM {physical_name(table)} WHERE r = ? AND c = ? AND ts = ?",
                [(c.row, c.col, LWT_TIMESTAMP) for c in cells],
                "delete_wallclock",
                table,
            )

    def row(self, table: str, row: bytes, start_col: bytes | None, limit: int | None) -> list[tuple[bytes, bytes]]:
        bounds, extra = optional_filters(("c >= ?", start_col))
        sql = f"SELECT c, v FROM {physical_name(table)} WHERE r = ? AND ts = ? AND {NOT_EXPIRED}{bounds} ORDER BY c"
        params: list = [row, LWT_TIMESTAMP, now_ms(), *extra]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._db.read("get_wallclock_row", table) as conn:
            return [(c, v) for c, v in conn.execute(sql, params)]
