"""LOGICAL writes of the embedded store: puts, deletes, ranged deletes, sentinels (each one BEGIN IMMEDIATE
transaction)."""
from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping

from .. import _common as C
from ..api import SENTINEL_TIMESTAMP, Cell, check_cells, check_mapping, check_ranges, check_ranges_within, check_rows
from ..consistency import WRITE_OPERATIONS, Operation, resolve_operation
from ..tables import WriteMode
from .files import DELETE_RANGE_SQL, SENTINEL_SQL, physical_name
from .host import SqliteHost


class WritesMixin(SqliteHost):
    """Mixin of :class:`~.service.SqliteKeyValueService` (uses its ``_conn``, ``_read``, ``_write``, ``_meta``)."""

    # ----- LOGICAL writes --------------------------------------------------------------------------
    def put(self, table: str, values: Mapping[Cell, bytes], timestamp: int, *, operation: Operation | None = None) -> None:
        resolve_operation(operation, Operation.DATA_WRITE, WRITE_OPERATIONS, "put")  # one copy: no levels
        self._multi_put({table: values}, timestamp, "put")

    def multi_put(self, puts: Mapping[str, Mapping[Cell, bytes]], timestamp: int) -> None:
        self._multi_put(puts, timestamp, "multi_put")

    def _multi_put(self, puts: Mapping[str, Mapping[Cell, bytes]], timestamp: int, op: str) -> None:
        check_mapping(puts, "puts")
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
                        f"INSERT OR REPLACE INTO {physical_name(table)} (r, c, ts, v, exp) VALUES (?, ?, ?, ?, NULL)",
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
                f"DELETE FROM {physical_name(table)} WHERE r = ? AND c = ? AND ts = ?",
                [(cell.row, cell.col, ts) for cell, ts in versions],
                "delete",
                table,
            )

    def delete_all_timestamps(self, table: str, ranges: Mapping[Cell, tuple[int, int]], *, operation: Operation | None = None) -> None:
        resolve_operation(operation, Operation.SWEEP_DELETE, WRITE_OPERATIONS, "delete_all_timestamps")
        self._require(table, "delete_all_timestamps", WriteMode.LOGICAL)
        ranges = check_ranges(ranges)
        if not ranges:
            return
        with self._write("delete_all_timestamps", table) as conn:
            self._exec_many(
                conn,
                DELETE_RANGE_SQL.format(t=physical_name(table)),
                [(cell.row, cell.col, lo, hi) for cell, (lo, hi) in ranges.items()],
                "delete_all_timestamps",
                table,
            )

    def add_gc_sentinels(self, table: str, cells: Iterable[Cell], *, operation: Operation | None = None) -> None:
        resolve_operation(operation, Operation.SENTINEL, WRITE_OPERATIONS, "add_gc_sentinels")
        self._require(table, "add_gc_sentinels", WriteMode.LOGICAL)
        cells = check_cells(cells)
        if not cells:
            return
        with self._write("add_gc_sentinels", table) as conn:
            self._exec_many(
                conn,
                SENTINEL_SQL.format(t=physical_name(table)),
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
        cells = check_cells(cells)
        ranges = check_ranges(ranges)
        check_ranges_within(ranges, cells)
        if not cells:
            return
        with self._write(op, table) as conn:
            self._exec_many(
                conn,
                SENTINEL_SQL.format(t=physical_name(table)),
                [(cell.row, cell.col, SENTINEL_TIMESTAMP) for cell in cells],
                op,
                table,
            )
            if ranges:
                self._exec_many(
                    conn,
                    DELETE_RANGE_SQL.format(t=physical_name(table)),
                    [(cell.row, cell.col, lo, hi) for cell, (lo, hi) in ranges.items()],
                    op,
                    table,
                )

    def delete_rows(self, table: str, rows: Iterable[bytes], *, operation: Operation | None = None) -> None:
        resolve_operation(operation, Operation.SWEEP_DELETE, WRITE_OPERATIONS, "delete_rows")
        self._require(table, "delete_rows", WriteMode.LOGICAL)
        rows = check_rows(rows)
        if not rows:
            return
        with self._write("delete_rows", table) as conn:
            self._exec_many(conn, f"DELETE FROM {physical_name(table)} WHERE r = ?", [(r,) for r in rows], "delete_rows", table)
