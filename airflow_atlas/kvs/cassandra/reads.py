"""Reads of the Cassandra key-value service (its :class:`~airflow_atlas.kvs.api.Reads` part): point reads,
version lists, row slices and token-range scans.

Every read runs at the data_read consistency level (:mod:`airflow_atlas.kvs.consistency`), concurrently
for many cells or rows; wide rows and scans page with the service's ``page_size``. Scans cover token
ranges: ``(start, end]`` of the Murmur3 ring.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from ...errors import InvalidInputError
from .. import _common as C
from ..api import Cell, Reads, ScanRange, Value
from .session import CqlSession
from .statements import RING_MAX, RING_MIN, row_tuple, token

if TYPE_CHECKING:
    from cassandra.query import PreparedStatement

IN_READ_PARTITIONS = 100
"""Rows per multi-partition read (``key IN ?``) of the cells of one column (get_all_timestamps).

The Python driver's cost per request, not Cassandra, bounds per-cell reads on a small client (issue 16,
item 3). Measured 2026-11-23 on the local node (2 shared cores, load 7-12), 10,000 cells of one column,
present and absent, median of 6: one query per cell 8.6 s; rows per request 10: 1.5 s, 25: 0.92 s,
50: 0.85 s, 100: 0.83 s, 200: 0.70 s, 500: 0.85 s, 1000: 0.79 s. From about 50 on it is flat; 100 keeps
each request (and the coordinator's fan-out to replicas) small and below any sane
``partition_keys_in_select_*`` guardrail an operator may set."""


class CassandraReads(Reads):
    """The reads of :class:`~airflow_atlas.kvs.cassandra.CassandraKeyValueService`, on its session."""

    def __init__(self, cql: CqlSession):
        self._cql = cql

    def get(self, table: str, cells: dict[Cell, int]) -> dict[Cell, Value]:
        """One ``column2 < ts ORDER BY DESC LIMIT 1`` query per cell, executed concurrently."""
        ps = self._cql.prepare(table, "get_latest")
        keys = list(cells.items())
        results = self._cql.concurrent("get", table, [(ps, (c.row, c.col, ts)) for c, ts in keys])
        out: dict[Cell, Value] = {}
        for (cell, _), rs in zip(keys, results, strict=True):
            rows = rs.current_rows
            if rows:
                ts, value = row_tuple(rows[0])
                out[cell] = Value(ts, value)
        return out

    def all_timestamps(self, table: str, cells: list[Cell], timestamp: int) -> dict[Cell, list[int]]:
        """Cells sharing a column are read :data:`IN_READ_PARTITIONS` rows per request (``key IN ?``); a
        column asked for one row alone is read with its own query. All requests run concurrently; every
        result pages on. Each list is ascending (the clustering order), as with one query per cell."""
        rows_of: dict[bytes, list[bytes]] = {}
        for cell in cells:
            rows_of.setdefault(cell.col, []).append(cell.row)
        statements: list = []
        columns: list[tuple[bytes, bytes | None]] = []  # per statement: (column, row of a single-cell read)
        for col, rows in rows_of.items():
            if len(rows) == 1:
                statements.append((self._cql.prepare(table, "get_ts"), (rows[0], col, timestamp)))
                columns.append((col, rows[0]))
                continue
            ps = self._cql.prepare(table, "get_ts_in")
            for i in range(0, len(rows), IN_READ_PARTITIONS):
                statements.append((ps, (rows[i : i + IN_READ_PARTITIONS], col, timestamp)))
                columns.append((col, None))
        results = self._cql.concurrent("get_all_timestamps", table, statements)
        found: dict[Cell, list[int]] = {}
        for (col, row), rs in zip(columns, results, strict=True):
            if row is not None:
                versions = [r[0] for r in self._cql.rows("get_all_timestamps", table, rs)]  # fetches further pages
                if versions:
                    found[Cell(row, col)] = versions
                continue
            for key, ts in self._cql.rows("get_all_timestamps", table, rs):  # a partition's rows arrive in order
                known = found.get(Cell(key, col))
                if known is None:
                    found[Cell(key, col)] = [ts]
                else:
                    known.append(ts)
        return {cell: found[cell] for cell in cells if cell in found}

    def _row_columns_statement(
        self, table: str, row: bytes, start_col: bytes | None, end_col: bytes | None
    ) -> tuple[PreparedStatement, tuple[bytes, ...]]:
        if start_col is None:
            if end_col is None:
                return self._cql.prepare(table, "rc"), (row,)
            return self._cql.prepare(table, "rc_e"), (row, end_col)
        if end_col is None:
            return self._cql.prepare(table, "rc_s"), (row, start_col)
        return self._cql.prepare(table, "rc_se"), (row, start_col, end_col)

    @staticmethod
    def _latest_per_column(rows: Iterable[tuple], timestamp: int, limit: int | None) -> list[tuple[bytes, Value]]:
        """Rows arrive ordered by (column1, column2) ascending: the last version below ``timestamp`` of each
        column is its latest. Stops reading (and paging) once ``limit`` columns are complete."""
        out: list[tuple[bytes, Value]] = []
        current_col: bytes | None = None
        current: tuple[bytes, Value] | None = None  # (current_col, its latest version so far)
        for col, ts, value in rows:
            if col != current_col:
                if current is not None:
                    out.append(current)
                    if limit is not None and len(out) >= limit:
                        return out
                current_col, current = col, None
            if ts < timestamp:
                current = (col, Value(ts, value))
        if current is not None:
            out.append(current)
        return out

    def row_columns(self, table: str, row: bytes, start_col: bytes | None, end_col: bytes | None, limit: int | None,
                    timestamp: int) -> list[tuple[bytes, Value]]:
        """Reads the row's versions in pages of ``page_size`` and keeps the latest below ``timestamp``."""
        ps, params = self._row_columns_statement(table, row, start_col, end_col)
        rs = self._cql.execute("get_row_columns", table, ps, params)
        return self._latest_per_column(self._cql.rows("get_row_columns", table, rs), timestamp, limit)

    def rows_columns(self, table: str, rows: list[bytes], start_col: bytes | None, end_col: bytes | None,
                     timestamp: int) -> dict[bytes, list[tuple[bytes, Value]]]:
        """First pages of all rows concurrently; wide rows then page on."""
        statements = [self._row_columns_statement(table, r, start_col, end_col) for r in rows]
        results = self._cql.concurrent("get_rows_columns", table, statements)
        out: dict[bytes, list[tuple[bytes, Value]]] = {}
        for row, rs in zip(rows, results, strict=True):
            cols = self._latest_per_column(self._cql.rows("get_rows_columns", table, rs), timestamp, None)
            if cols:
                out[row] = cols
        return out

    def full_range(self) -> ScanRange:
        return ScanRange("token", RING_MIN, RING_MAX)

    def split(self, table: str, parts: int) -> list[ScanRange]:
        """``parts`` equal slices of the Murmur3 ring (start exclusive, end inclusive)."""
        span = 1 << 64
        bounds = [RING_MIN + (i * span) // parts for i in range(parts)] + [RING_MAX]
        return [ScanRange("token", bounds[i], bounds[i + 1]) for i in range(parts)]

    def scan_bounds(self, scan_range: ScanRange | None, start_after_row: bytes | None) -> tuple[int, int]:
        """Token order, then column, then timestamp. ``start_after_row`` resumes at ``token(key) >
        token(start_after_row)``: rows sharing that row's token (a Murmur3 collision, astronomically rare)
        would be skipped."""
        if scan_range is None:
            scan_range = ScanRange("token", RING_MIN, RING_MAX)
        if not isinstance(scan_range, ScanRange) or scan_range.kind != "token":
            raise InvalidInputError(f"Cassandra scans token ranges (ScanRange kind 'token'), got {scan_range!r}")
        start = C.check_int(scan_range.start, "scan range start")
        end = C.check_int(scan_range.end, "scan range end")
        if start_after_row is not None:
            start = max(start, token(C.check_row(start_after_row)))
        return start, end

    def scan(self, table: str, bounds: tuple, page_size: int, timestamp: int) -> Iterator[tuple[Cell, int, bytes]]:
        start, end = bounds
        if start >= end:
            return
        bound = self._cql.prepare(table, "scan").bind((start, end))
        bound.fetch_size = page_size
        rs = self._cql.execute("scan", table, bound)
        for key, col, ts, value in self._cql.rows("scan", table, rs):
            if ts < timestamp:
                yield Cell(key, col), ts, value
