"""LWT and WALLCLOCK tables of the Cassandra key-value service (its :class:`~airflow_atlas.kvs.api.LwtTables`
and :class:`~airflow_atlas.kvs.api.WallclockTables` parts).

LWT: ``put_unless_exists`` / ``check_and_set`` are lightweight transactions - Paxos at the serial level,
commit at the lwt_commit level (:mod:`airflow_atlas.kvs.consistency`); cells live at
``column2 = LWT_TIMESTAMP`` and never carry ``USING TIMESTAMP``. WALLCLOCK: plain writes at client (driver)
time at the data_write level, optional TTL.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cassandra.query import BatchStatement, BatchType

from ...errors import KeyAlreadyExistsError
from .. import _common as C
from ..api import LWT_TIMESTAMP, Cell, LwtTables, WallclockTables
from ..consistency import Operation
from .session import CqlSession
from .statements import row_tuple

if TYPE_CHECKING:
    from cassandra.cluster import ResultSet


class CassandraLwt(LwtTables):
    """The LWT tables of :class:`~airflow_atlas.kvs.cassandra.CassandraKeyValueService`, on its session."""

    def __init__(self, cql: CqlSession):
        self._cql = cql

    def put_unless_exists(self, table: str, values: dict[Cell, bytes]) -> None:
        """``INSERT ... IF NOT EXISTS`` per cell; cells of one row go in one conditional batch (all or none
        of that row); rows run concurrently. Commit phase at lwt_commit, Paxos at serial."""
        ps = self._cql.prepare(table, "lwt_insert")
        statements: list[tuple[Any, tuple | None]] = []  # (statement or batch, parameters)
        for cells in C.group_by_row(values).values():
            if len(cells) == 1:
                c = cells[0]
                statements.append((ps, (c.row, c.col, values[c])))
            else:
                batch = BatchStatement(
                    batch_type=BatchType.UNLOGGED,
                    consistency_level=self._cql.levels[Operation.LWT_COMMIT],
                    serial_consistency_level=self._cql.levels[Operation.SERIAL],
                )
                for c in cells:
                    batch.add(ps, (c.row, c.col, values[c]))
                statements.append((batch, None))
        results = self._cql.concurrent("put_unless_exists", table, statements, lwt=True)
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
    def _lwt_applied(rs: ResultSet) -> bool:
        rows = rs.current_rows
        return bool(row_tuple(rows[0])[0]) if rows else False

    def _lwt_existing(self, rs: ResultSet) -> dict[Cell, bytes]:
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

    def check_and_set(self, table: str, cell: Cell, expected: bytes | None, new: bytes | None) -> bool:
        if expected is None and new is None:
            return cell not in self.get(table, [cell], serial=True)
        params: tuple
        if expected is None:
            ps, params = self._cql.prepare(table, "lwt_insert"), (cell.row, cell.col, new)
        elif new is None:
            ps, params = self._cql.prepare(table, "lwt_delete"), (cell.row, cell.col, expected)
        else:
            ps, params = self._cql.prepare(table, "lwt_update"), (new, cell.row, cell.col, expected)
        rs = self._cql.execute("check_and_set", table, ps, params, lwt=True)
        return self._lwt_applied(rs)

    def get(self, table: str, cells: list[Cell], serial: bool) -> dict[Cell, bytes]:
        ps = self._cql.prepare(table, "lwt_get_serial" if serial else "lwt_get")
        results = self._cql.concurrent("get_lwt", table, [(ps, (c.row, c.col)) for c in cells])
        out: dict[Cell, bytes] = {}
        for cell, rs in zip(cells, results, strict=True):
            rows = rs.current_rows
            if rows:
                out[cell] = row_tuple(rows[0])[0]
        return out

    def row(self, table: str, row: bytes, serial: bool) -> dict[bytes, bytes]:
        ps = self._cql.prepare(table, "lwt_row_serial" if serial else "rc")
        rs = self._cql.execute("get_lwt_row", table, ps, (row,))
        return {col: value for col, ts, value in self._cql.rows("get_lwt_row", table, rs) if ts == LWT_TIMESTAMP}


class CassandraWallclock(WallclockTables):
    """The WALLCLOCK tables of :class:`~airflow_atlas.kvs.cassandra.CassandraKeyValueService`, on its session."""

    def __init__(self, cql: CqlSession):
        self._cql = cql

    def put(self, table: str, values: dict[Cell, bytes], ttl_seconds: int | None) -> None:
        statements: list[tuple[Any, tuple]]
        if ttl_seconds is None:
            ps = self._cql.prepare(table, "wc_put")
            statements = [(ps, (c.row, c.col, v)) for c, v in values.items()]
        else:
            ps = self._cql.prepare(table, "wc_put_ttl")
            statements = [(ps, (c.row, c.col, v, ttl_seconds)) for c, v in values.items()]
        self._cql.concurrent("put_wallclock", table, statements)

    def delete(self, table: str, cells: list[Cell]) -> None:
        ps = self._cql.prepare(table, "wc_delete")
        self._cql.concurrent("delete_wallclock", table, [(ps, (c.row, c.col)) for c in cells])

    def row(self, table: str, row: bytes, start_col: bytes | None, limit: int | None) -> list[tuple[bytes, bytes]]:
        params: tuple
        if start_col is None:
            ps, params = self._cql.prepare(table, "rc"), (row,)
        else:
            ps, params = self._cql.prepare(table, "wc_row_s"), (row, start_col)
        rs = self._cql.execute("get_wallclock_row", table, ps, params)
        out: list[tuple[bytes, bytes]] = []
        for col, ts, value in self._cql.rows("get_wallclock_row", table, rs):
            if ts == LWT_TIMESTAMP:
                out.append((col, value))
                if limit is not None and len(out) >= limit:
                    break
        return out
