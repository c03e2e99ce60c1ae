"""LWT and WALLCLOCK tables of the Cassandra key-value service.

LWT: ``put_unless_exists`` / ``check_and_set`` are lightweight transactions - Paxos at the serial level,
commit at the lwt_commit level (:mod:`airflow_atlas.kvs.consistency`); cells live at
``column2 = LWT_TIMESTAMP`` and never carry ``USING TIMESTAMP``. WALLCLOCK: plain writes at client (driver)
time at the data_write level, optional TTL.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cassandra.query import BatchStatement, BatchType

from ...errors import KeyAlreadyExistsError
from .. import _common as C
from ..api import LWT_TIMESTAMP, Cell, check_cells, check_row
from ..consistency import LWT_OPERATIONS, Operation, resolve_operation
from ..tables import WriteMode
from .host import CassandraHost
from .statements import row_tuple


class LwtMixin(CassandraHost):
    """The LWT and WALLCLOCK part of :class:`~airflow_atlas.kvs.cassandra.CassandraKeyValueService`."""

    def put_unless_exists(
        self, table: str, values: Mapping[Cell, bytes], *, operation: Operation | None = None
    ) -> None:
        """``INSERT ... IF NOT EXISTS`` per cell; cells of one row go in one conditional batch (all or none
        of that row); rows run concurrently. Commit phase at lwt_commit, Paxos at serial."""
        resolve_operation(operation, Operation.LWT_COMMIT, LWT_OPERATIONS, "put_unless_exists")
        self._require(table, "put_unless_exists", WriteMode.LWT)
        values = C.check_values(values)
        if not values:
            return
        ps = self._prep(table, "lwt_insert")
        statements: list[tuple[Any, tuple | None]] = []  # (statement or batch, parameters)
        for cells in C.group_by_row(values).values():
            if len(cells) == 1:
                c = cells[0]
                statements.append((ps, (c.row, c.col, values[c])))
            else:
                batch = BatchStatement(
                    batch_type=BatchType.UNLOGGED,
                    consistency_level=self._levels[Operation.LWT_COMMIT],
                    serial_consistency_level=self._levels[Operation.SERIAL],
                )
                for c in cells:
                    batch.add(ps, (c.row, c.col, values[c]))
                statements.append((batch, None))
        results = self._concurrent("put_unless_exists", table, statements, lwt=True)
        existing: dict[Cell, bytes] = {}
        for rs in results:
            existing.update(self._lwt_existing(rs))
        if existing:
            raise KeyAlreadyExistsError(
                f"put_unless_exists into table {table!r}: {len(existing)} cell(s) already exist: "
                f"{C.describe_cells(existing)}",
                existing,
            )

    @staticmethod
    def _lwt_applied(rs) -> bool:
        rows = rs.current_rows
        return bool(row_tuple(rows[0])[0]) if rows else False

    def _lwt_existing(self, rs) -> dict[Cell, bytes]:
        """Cells an unapplied IF NOT EXISTS found, from the rows the coordinator returns."""
        if self._lwt_applied(rs):
            return {}
        names = list(rs.column_names or [])
        found: dict[Cell, bytes] = {}
        if not {"key", "column1", "value"} <= set(names):
            return found
        ki, ci, vi = names.index("key"), names.index("column1"), names.index("value")
        for row in rs.current_rows:
            row = row_tuple(row)
            if row[ki] is not None:
                found[Cell(row[ki], row[ci])] = row[vi]
        return found

    def _check_and_set(self, table: str, cell: Cell, expected: bytes | None, new: bytes | None) -> bool:
        if expected is None and new is None:
            return cell not in self.get_lwt(table, [cell], serial=True)
        params: tuple
        if expected is None:
            ps, params = self._prep(table, "lwt_insert"), (cell.row, cell.col, new)
        elif new is None:
            ps, params = self._prep(table, "lwt_delete"), (cell.row, cell.col, expected)
        else:
            ps, params = self._prep(table, "lwt_update"), (new, cell.row, cell.col, expected)
        rs = self._execute("check_and_set", table, ps, params, lwt=True)
        return self._lwt_applied(rs)

    def get_lwt(self, table: str, cells: Iterable[Cell], serial: bool = False) -> dict[Cell, bytes]:
        self._require(table, "get_lwt", WriteMode.LWT, WriteMode.WALLCLOCK)
        cells = check_cells(cells)
        if not cells:
            return {}
        ps = self._prep(table, "lwt_get_serial" if serial else "lwt_get")
        results = self._concurrent("get_lwt", table, [(ps, (c.row, c.col)) for c in cells])
        out: dict[Cell, bytes] = {}
        for cell, rs in zip(cells, results, strict=True):
            rows = rs.current_rows
            if rows:
                out[cell] = row_tuple(rows[0])[0]
        return out

    def get_lwt_row(self, table: str, row: bytes, serial: bool = False) -> dict[bytes, bytes]:
        self._require(table, "get_lwt_row", WriteMode.LWT, WriteMode.WALLCLOCK)
        row = check_row(row)
        ps = self._prep(table, "lwt_row_serial" if serial else "rc")
        rs = self._execute("get_lwt_row", table, ps, (row,))
        return {col: value for col, ts, value in self._rows("get_lwt_row", table, rs) if ts == LWT_TIMESTAMP}

    # ----- WALLCLOCK tables ------------------------------------------------------------------------
    def put_wallclock(self, table: str, values: Mapping[Cell, bytes], ttl_seconds: int | None = None) -> None:
        self._require(table, "put_wallclock", WriteMode.WALLCLOCK)
        values = C.check_values(values)
        ttl_seconds = C.check_ttl(ttl_seconds)
        if not values:
            return
        statements: list[tuple[Any, tuple]]
        if ttl_seconds is None:
            ps = self._prep(table, "wc_put")
            statements = [(ps, (c.row, c.col, v)) for c, v in values.items()]
        else:
            ps = self._prep(table, "wc_put_ttl")
            statements = [(ps, (c.row, c.col, v, ttl_seconds)) for c, v in values.items()]
        self._concurrent("put_wallclock", table, statements)

    def delete_wallclock(self, table: str, cells: Iterable[Cell]) -> None:
        self._require(table, "delete_wallclock", WriteMode.WALLCLOCK)
        cells = check_cells(cells)
        if not cells:
            return
        ps = self._prep(table, "wc_delete")
        self._concurrent("delete_wallclock", table, [(ps, (c.row, c.col)) for c in cells])

    def _wallclock_row(self, table: str, row: bytes, start_col: bytes | None, limit: int | None) -> list[tuple[bytes, bytes]]:
        params: tuple
        if start_col is None:
            ps, params = self._prep(table, "rc"), (row,)
        else:
            ps, params = self._prep(table, "wc_row_s"), (row, start_col)
        rs = self._execute("get_wallclock_row", table, ps, params)
        out: list[tuple[bytes, bytes]] = []
        for col, ts, value in self._rows("get_wallclock_row", table, rs):
            if ts == LWT_TIMESTAMP:
                out.append((col, value))
                if limit is not None and len(out) >= limit:
                    break
        return out
