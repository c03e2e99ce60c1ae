"""The LOGICAL writes of :class:`~airflow_atlas.kvs.cassandra.CassandraKeyValueService`: puts at the Atlas
timestamp, deletes of versions, ranged tombstones, sentinels and partition tombstones, each at a fresh
Cassandra write timestamp where it must shadow what it deletes (the package docstring says why), batched by
:mod:`.batching` through the service's ``_write``.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from .. import _common as C
from ..api import Cell, check_cells, check_mapping, check_ranges, check_ranges_within, check_rows
from ..consistency import WRITE_OPERATIONS, Operation, resolve_operation
from ..tables import WriteMode
from .batching import Statement, WriteItem, single
from .host import CassandraHost


class WritesMixin(CassandraHost):
    """The LOGICAL-table writes of the Cassandra service."""

    if TYPE_CHECKING:

        def _fresh(self, op: str, table: str) -> int: ...

        def _write(self, op: str, table: str | None, items: list[WriteItem], operation: Operation) -> None: ...

    # ----- LOGICAL writes --------------------------------------------------------------------------
    def put(
        self, table: str, values: Mapping[Cell, bytes], timestamp: int, *, operation: Operation | None = None
    ) -> None:
        operation = resolve_operation(operation, Operation.DATA_WRITE, WRITE_OPERATIONS, "put")
        self._multi_put({table: values}, timestamp, "put", operation)

    def multi_put(self, puts: Mapping[str, Mapping[Cell, bytes]], timestamp: int) -> None:
        self._multi_put(puts, timestamp, "multi_put", Operation.DATA_WRITE)

    def _multi_put(
        self, puts: Mapping[str, Mapping[Cell, bytes]], timestamp: int, op: str, operation: Operation
    ) -> None:
        check_mapping(puts, "puts")
        timestamp = C.check_write_timestamp(timestamp)
        items: list[WriteItem] = []
        for table, values in puts.items():
            self._require(table, op, WriteMode.LOGICAL)
            values = C.check_values(values)
            if values:
                ps = self._prep(table, "put", operation)
                items.extend(
                    single(ps, (c.row, c.col, timestamp, v, timestamp), table, c.row, len(c.row) + len(c.col) + len(v) + 32)
                    for c, v in values.items()
                )
        self._write(op, next(iter(puts)) if len(puts) == 1 else None, items, operation)

    def delete(
        self, table: str, versions: Iterable[tuple[Cell, int]], *, operation: Operation | None = None
    ) -> None:
        operation = resolve_operation(operation, Operation.ABORT_DELETE, WRITE_OPERATIONS, "delete")
        self._require(table, "delete", WriteMode.LOGICAL)
        versions = C.check_versions(versions)
        if not versions:
            return
        ps = self._prep(table, "delete", operation)
        fresh = self._fresh("delete", table)
        self._write(
            "delete",
            table,
            [single(ps, (fresh, c.row, c.col, ts), table, c.row, len(c.row) + len(c.col) + 32) for c, ts in versions],
            operation,
        )

    def delete_all_timestamps(
        self, table: str, ranges: Mapping[Cell, tuple[int, int]], *, operation: Operation | None = None
    ) -> None:
        operation = resolve_operation(operation, Operation.SWEEP_DELETE, WRITE_OPERATIONS, "delete_all_timestamps")
        self._require(table, "delete_all_timestamps", WriteMode.LOGICAL)
        ranges = check_ranges(ranges)
        if not ranges:
            return
        ps = self._prep(table, "delete_range", operation)
        fresh = self._fresh("delete_all_timestamps", table)
        self._write(
            "delete_all_timestamps",
            table,
            [
                single(ps, (fresh, c.row, c.col, lo, hi), table, c.row, len(c.row) + len(c.col) + 40)
                for c, (lo, hi) in ranges.items()
            ],
            operation,
        )

    def add_gc_sentinels(self, table: str, cells: Iterable[Cell], *, operation: Operation | None = None) -> None:
        operation = resolve_operation(operation, Operation.SENTINEL, WRITE_OPERATIONS, "add_gc_sentinels")
        self._require(table, "add_gc_sentinels", WriteMode.LOGICAL)
        cells = check_cells(cells)
        if not cells:
            return
        ps = self._prep(table, "sentinel", operation)
        fresh = self._fresh("add_gc_sentinels", table)
        self._write(
            "add_gc_sentinels",
            table,
            [single(ps, (c.row, c.col, b"", fresh), table, c.row, len(c.row) + len(c.col) + 32) for c in cells],
            operation,
        )

    def add_gc_sentinels_and_delete_all_timestamps(
        self, table: str, cells: Iterable[Cell], ranges: Mapping[Cell, tuple[int, int]]
    ) -> None:
        """Each cell's sentinel and ranged tombstone go together as one unit of a batch: statements on one
        partition in a batch are applied as ONE mutation, atomically and in isolation, so no reader ever sees
        the tombstone without the sentinel (the guarantee "sentinel first" gives), at half the requests and
        half the mutations of two calls. Units are never split across batches; the two fresh timestamps are
        taken as the two separate calls take them (sentinels first).

        Consistency: a unit is one batch, so its sentinel is written at the SWEEP_DELETE level together
        with the tombstone (on every replica the two land as one mutation or not at all); a sentinel with
        no tombstone (a cell whose newest sweepable write is at timestamp 0) goes at the SENTINEL level."""
        self._require(table, "add_gc_sentinels_and_delete_all_timestamps", WriteMode.LOGICAL)
        cells = check_cells(cells)
        ranges = check_ranges(ranges)
        check_ranges_within(ranges, cells)
        if not cells:
            return
        op = "add_gc_sentinels_and_delete_all_timestamps"
        lone_ps = self._prep(table, "sentinel", Operation.SENTINEL)
        unit_sentinel_ps = self._prep(table, "sentinel", Operation.SWEEP_DELETE)
        range_ps = self._prep(table, "delete_range", Operation.SWEEP_DELETE) if ranges else None
        sentinel_at = self._fresh(op, table)
        delete_at = self._fresh(op, table) if ranges else None
        lone, units = [], []
        for c in cells:
            bounds = ranges.get(c)
            if bounds is None:
                lone.append(single(lone_ps, (c.row, c.col, b"", sentinel_at), table, c.row, len(c.row) + len(c.col) + 32))
            else:
                unit = (
                    Statement(unit_sentinel_ps, (c.row, c.col, b"", sentinel_at)),
                    Statement(range_ps, (delete_at, c.row, c.col, bounds[0], bounds[1])),
                )
                units.append(WriteItem(unit, table, c.row, 2 * (len(c.row) + len(c.col)) + 72))
        if self.consistency.sentinel == self.consistency.sweep_delete:
            self._write(op, table, lone + units, Operation.SWEEP_DELETE)
        else:  # two levels: two sets of batches (lone sentinels are rare: newest sweepable write at ts 0)
            self._write(op, table, lone, Operation.SENTINEL)
            self._write(op, table, units, Operation.SWEEP_DELETE)

    def delete_rows(self, table: str, rows: Iterable[bytes], *, operation: Operation | None = None) -> None:
        """Partition tombstones at one fresh timestamp T: later writes to these rows at Atlas timestamps
        below T stay hidden (Cassandra semantics; the embedded store has no such shadow)."""
        operation = resolve_operation(operation, Operation.SWEEP_DELETE, WRITE_OPERATIONS, "delete_rows")
        self._require(table, "delete_rows", WriteMode.LOGICAL)
        rows = check_rows(rows)
        if not rows:
            return
        ps = self._prep(table, "delete_row", operation)
        fresh = self._fresh("delete_rows", table)
        self._write("delete_rows", table, [single(ps, (fresh, r), table, r, len(r) + 24) for r in rows], operation)
