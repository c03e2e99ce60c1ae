"""Reading the versions a commit's conflict checks walk, fast for large transactions.

The write-write checks of :meth:`SnapshotTransaction.commit` (before and after writing, see
``commit.py``) walk each written cell's versions from the newest down; every step reads "the latest
version below a bound" for many cells. Asked cell by cell that is one query per cell per step - on
Cassandra about 1 ms each on a busy node, so a 30,000-cell commit spent over a minute in them, more than
in its writes (issue 16, item 3).

:class:`VersionWalk` answers the same question with fewer requests: the cells of one row that share a
bound (every cell in a check's first step; every cell after the write in the post-write check's second
step) are read with one row slice per row (``get_rows_columns`` over ``[min column, max column]``, the
rows concurrently) when the row holds at least :data:`ROW_SLICE_MIN_CELLS` of them; any other cell has all
its version timestamps read once (``get_all_timestamps``) and its later steps cost nothing. The answers
are the same - the latest version strictly below the bound, sentinels included, absent cells omitted -
and only the requested cells are returned. The cost is reading the other columns inside each slice's
span, which is why sparse rows keep per-cell reads, and reading a sparse cell's whole history (short
where sweep runs).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from ..kvs.api import Cell, KeyValueService

ROW_SLICE_MIN_CELLS = 16
"""A row with at least this many cells (sharing one bound) is read with one slice instead of point reads."""


class VersionWalk:
    """The versions of one check's cells, read as the check walks down (see the module docstring).

    :meth:`latest` returns, per cell, the timestamp of the latest version strictly below its bound (absent
    cells omitted). Cells of dense rows are read with one row slice per row and step; every other cell has
    all of its version timestamps read once, on its first step, and later steps are answered from them.
    One read of all versions after our own write is what the post-write check's argument needs (every
    version written before that read began is in it), and it saves the post-write check's second round
    trip per cell."""

    def __init__(self, kvs: KeyValueService, table: str):
        self._kvs = kvs
        self._table = table
        self._history: dict[Cell, list[int]] = {}

    def latest(self, bounds: Mapping[Cell, int]) -> dict[Cell, int]:
        groups: dict[tuple[int, bytes], list[Cell]] = defaultdict(list)
        history_of = self._history
        for cell, bound in bounds.items():
            if cell not in history_of:
                groups[(bound, cell.row)].append(cell)
        by_bound: dict[int, list[bytes]] = defaultdict(list)
        sparse: list[Cell] = []
        for (bound, row), cells in groups.items():
            if len(cells) >= ROW_SLICE_MIN_CELLS:
                by_bound[bound].append(row)
            else:
                sparse.extend(cells)
        if sparse:
            found_all = self._kvs.get_all_timestamps(self._table, sparse)
            for cell in sparse:
                history_of[cell] = found_all.get(cell, [])
        found: dict[Cell, int] = {}
        for cell, bound in bounds.items():
            history = history_of.get(cell)
            if history:
                below = [ts for ts in history if ts < bound]
                if below:
                    found[cell] = max(below)
        for bound, rows in by_bound.items():
            # Each row is read over its own span (one span covering all rows would overread); rows with the
            # same span (dense loads) share one concurrent call.
            by_span: dict[tuple[bytes, bytes], list[bytes]] = defaultdict(list)
            for row in rows:
                cols = [cell.col for cell in groups[(bound, row)]]
                by_span[(min(cols), max(cols))].append(row)
            for (lo, hi), span_rows in by_span.items():
                result = self._kvs.get_rows_columns(self._table, span_rows, start_col=lo, end_col=hi + b"\x00", timestamp=bound)
                for row in span_rows:
                    wanted = {cell.col for cell in groups[(bound, row)]}
                    for col, value in result.get(row, ()):
                        if col in wanted:
                            found[Cell(row, col)] = value.timestamp
        return found
