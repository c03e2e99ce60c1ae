"""Reads of the embedded store (its :class:`~airflow_atlas.kvs.api.Reads` part): point reads, version
lists, row slices, range scans (multi-statement reads in one read transaction)."""
from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from ...errors import InvalidInputError
from .. import _common as C
from ..api import Cell, Reads, ScanRange, Value
from .database import SqliteDatabase
from .files import NOT_EXPIRED, now_ms, optional_filters, physical_name


class SqliteReads(Reads):
    """The reads of :class:`~.service.SqliteKeyValueService`, on its database."""

    def __init__(self, db: SqliteDatabase):
        self._db = db

    def get(self, table: str, cells: dict[Cell, int]) -> dict[Cell, Value]:
        out: dict[Cell, Value] = {}
        sql = (
            f"SELECT ts, v FROM {physical_name(table)} WHERE r = ? AND c = ? AND ts < ? AND {NOT_EXPIRED}"
            " ORDER BY ts DESC LIMIT 1"
        )
        now = now_ms()
        with self._db.read("get", table) as conn:
            for cell, ts in cells.items():
                row = conn.execute(sql, (cell.row, cell.col, ts, now)).fetchone()
                if row is not None:
                    out[cell] = Value(row[0], row[1])
        return out

    def all_timestamps(self, table: str, cells: list[Cell], timestamp: int) -> dict[Cell, list[int]]:
        out: dict[Cell, list[int]] = {}
        sql = f"SELECT ts FROM {physical_name(table)} WHERE r = ? AND c = ? AND ts < ? AND {NOT_EXPIRED} ORDER BY ts"
        now = now_ms()
        with self._db.read("get_all_timestamps", table) as conn:
            for cell in cells:
                found = [r[0] for r in conn.execute(sql, (cell.row, cell.col, timestamp, now))]
                if found:
                    out[cell] = found
        return out

    def _row_columns_sql(
        self, table: str, start_col: bytes | None, end_col: bytes | None, limit: int | None
    ) -> tuple[str, list]:
        # SQLite: bare columns next to MAX() come from the row holding the maximum.
        bounds, extra = optional_filters(("c >= ?", start_col), ("c < ?", end_col))
        sql = f"SELECT c, MAX(ts), v FROM {physical_name(table)} WHERE r = ? AND ts < ? AND {NOT_EXPIRED}{bounds}"
        sql += " GROUP BY c ORDER BY c"
        if limit is not None:
            sql += " LIMIT ?"
        return sql, extra

    def row_columns(self, table: str, row: bytes, start_col: bytes | None, end_col: bytes | None, limit: int | None,
                    timestamp: int) -> list[tuple[bytes, Value]]:
        sql, extra = self._row_columns_sql(table, start_col, end_col, limit)
        params = [row, timestamp, now_ms(), *extra] + ([limit] if limit is not None else [])
        with self._db.read("get_row_columns", table) as conn:
            return [(c, Value(ts, v)) for c, ts, v in conn.execute(sql, params)]

    def rows_columns(self, table: str, rows: list[bytes], start_col: bytes | None, end_col: bytes | None,
                     timestamp: int) -> dict[bytes, list[tuple[bytes, Value]]]:
        sql, extra = self._row_columns_sql(table, start_col, end_col, None)
        now = now_ms()
        out: dict[bytes, list[tuple[bytes, Value]]] = {}
        with self._db.read("get_rows_columns", table) as conn:
            for row in rows:
                cols = [(c, Value(ts, v)) for c, ts, v in conn.execute(sql, [row, timestamp, now, *extra])]
                if cols:
                    out[row] = cols
        return out

    def full_range(self) -> ScanRange:
        return ScanRange("key", None, None)

    def split(self, table: str, parts: int) -> list[ScanRange]:
        """Key ranges with about the same number of rows each (boundaries are existing row keys)."""
        if parts == 1:
            return [ScanRange("key", None, None)]
        with self._db.read("split_ranges", table) as conn:
            rows = [r[0] for r in conn.execute(f"SELECT DISTINCT r FROM {physical_name(table)} ORDER BY r")]
        if len(rows) < 2:
            return [ScanRange("key", None, None)]
        parts = min(parts, len(rows))
        bounds = sorted({rows[(i * len(rows)) // parts] for i in range(1, parts)})
        edges: list[bytes | None] = [None, *bounds, None]
        return [ScanRange("key", edges[i], edges[i + 1]) for i in range(len(edges) - 1)]

    def scan_bounds(
        self, scan_range: ScanRange | None, start_after_row: bytes | None
    ) -> tuple[bytes | None, bytes | None, bytes | None]:
        """Key order (unsigned bytes), keyset-paged: no cursor stays open between pages, so the caller may
        write to the store from the same thread while iterating."""
        if scan_range is None:
            scan_range = ScanRange("key", None, None)
        if not isinstance(scan_range, ScanRange) or scan_range.kind != "key":
            raise InvalidInputError(f"the sqlite store scans key ranges (ScanRange kind 'key'), got {scan_range!r}")
        start = C.check_optional_bytes(scan_range.start, "scan range start")
        end = C.check_optional_bytes(scan_range.end, "scan range end")
        after = None if start_after_row is None else C.check_row(start_after_row)
        return start, end, after

    def scan(self, table: str, bounds: tuple, page_size: int, timestamp: int) -> Iterator[tuple[Cell, int, bytes]]:
        start, end, after = bounds
        # First page: the range's lower bounds. Later pages: only the keyset position (r, c, ts) > last,
        # which SQLite turns into one index seek (extra lower bounds on r would make it seek by row only,
        # re-reading a wide row for every page).
        common = f"SELECT r, c, ts, v FROM {physical_name(table)} WHERE ts < ? AND {NOT_EXPIRED}"
        upper, upper_args = optional_filters(("r < ?", end))
        lower, lower_args = optional_filters(("r >= ?", start), ("r > ?", after))
        first, first_args = common + upper + lower, [timestamp, now_ms(), *upper_args, *lower_args]
        last = None
        while True:
            if last is None:
                sql, args = first + " ORDER BY r, c, ts LIMIT ?", [*first_args, page_size]
            else:
                sql = common + upper + " AND (r, c, ts) > (?, ?, ?) ORDER BY r, c, ts LIMIT ?"
                args = [timestamp, now_ms(), *upper_args, *last, page_size]
            try:
                page = self._db.connection().execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise self._db.translate(exc, "scan", table) from exc
            for r, c, ts, v in page:
                yield Cell(r, c), ts, v
            if len(page) < page_size:
                return
            last = page[-1][:3]
