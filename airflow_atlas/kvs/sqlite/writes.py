"""LOGICAL writes of the embedded store (its :class:`~airflow_atlas.kvs.api.LogicalWrites` part): puts,
deletes, ranged deletes, sentinels, each call one BEGIN IMMEDIATE transaction. One copy of each cell and no
write times: the operation (a consistency level on Cassandra) changes nothing here, and deletes are
immediate, so no fresh timestamp is kept.
"""
from __future__ import annotations

from collections.abc import Callable

from ..api import SENTINEL_TIMESTAMP, Cell, LogicalWrites
from ..consistency import Operation
from .database import SqliteDatabase
from .files import DELETE_RANGE_SQL, SENTINEL_SQL, physical_name


class SqliteWrites(LogicalWrites):
    """The LOGICAL-table writes of :class:`~.service.SqliteKeyValueService`, on its database."""

    def __init__(self, db: SqliteDatabase):
        self._db = db

    def use_fresh_timestamps(self, supplier: Callable[[], int]) -> None:
        """Checked like Cassandra's (by the contract), not kept: SQLite has no write times (deletes are
        immediate; spec 002 concerns Cassandra only)."""

    def put(self, puts: dict[str, dict[Cell, bytes]], timestamp: int, op: str, operation: Operation) -> None:
        first = next(iter(puts))
        with self._db.write(op, first if len(puts) == 1 else None) as conn:
            for table, values in puts.items():
                if values:
                    self._db.execute_many(
                        conn,
                        f"INSERT OR REPLACE INTO {physical_name(table)} (r, c, ts, v, exp) VALUES (?, ?, ?, ?, NULL)",
                        [(cell.row, cell.col, timestamp, value) for cell, value in values.items()],
                        op,
                        table,
                    )

    def delete(self, table: str, versions: list[tuple[Cell, int]], operation: Operation) -> None:
        with self._db.write("delete", table) as conn:
            self._db.execute_many(
                conn,
                f"DELETE FROM {physical_name(table)} WHERE r = ? AND c = ? AND ts = ?",
                [(cell.row, cell.col, ts) for cell, ts in versions],
                "delete",
                table,
            )

    def delete_ranges(self, table: str, ranges: dict[Cell, tuple[int, int]], operation: Operation) -> None:
        with self._db.write("delete_all_timestamps", table) as conn:
            self._db.execute_many(
                conn,
                DELETE_RANGE_SQL.format(t=physical_name(table)),
                [(cell.row, cell.col, lo, hi) for cell, (lo, hi) in ranges.items()],
                "delete_all_timestamps",
                table,
            )

    def sentinels(self, table: str, cells: list[Cell], operation: Operation) -> None:
        with self._db.write("add_gc_sentinels", table) as conn:
            self._db.execute_many(
                conn,
                SENTINEL_SQL.format(t=physical_name(table)),
                [(cell.row, cell.col, SENTINEL_TIMESTAMP) for cell in cells],
                "add_gc_sentinels",
                table,
            )

    def sentinels_and_tombstones(self, table: str, cells: list[Cell], ranges: dict[Cell, tuple[int, int]]) -> None:
        """Sentinels, then ranged deletes, in one SQLite transaction (all or nothing)."""
        op = "add_gc_sentinels_and_delete_all_timestamps"
        with self._db.write(op, table) as conn:
            self._db.execute_many(
                conn,
                SENTINEL_SQL.format(t=physical_name(table)),
                [(cell.row, cell.col, SENTINEL_TIMESTAMP) for cell in cells],
                op,
                table,
            )
            if ranges:
                self._db.execute_many(
                    conn,
                    DELETE_RANGE_SQL.format(t=physical_name(table)),
                    [(cell.row, cell.col, lo, hi) for cell, (lo, hi) in ranges.items()],
                    op,
                    table,
                )

    def delete_rows(self, table: str, rows: list[bytes], operation: Operation) -> None:
        with self._db.write("delete_rows", table) as conn:
            self._db.execute_many(
                conn, f"DELETE FROM {physical_name(table)} WHERE r = ?", [(r,) for r in rows], "delete_rows", table
            )
