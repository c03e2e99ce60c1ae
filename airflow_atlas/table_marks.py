"""Drop and truncate marks: the fresh timestamp at which a table was last dropped or truncated.

Sweep-queue entries of a table with a start timestamp below its mark refer to data that no longer
exists. The sweepers skip them, so a dropped table never makes a shard retry forever and a truncated
table never gets sentinels written into it (a lesson of the reference implementation). The mark is
recorded *before* the drop or truncate: a crash in between leaves a mark and the data, so at worst some
old versions stay unswept, never the reverse.
"""
from __future__ import annotations

from .encoding import fixed_long, from_fixed_long
from .kvs.api import Cell, KeyValueService
from .kvs.tables import TableMetadata, WriteMode

TABLE = "_table_marks"
_COL = b"cutoff"


class TableMarks:
    def __init__(self, kvs: KeyValueService):
        self._kvs = kvs

    def ensure_tables(self) -> None:
        self._kvs.create_table(TABLE, TableMetadata(write_mode=WriteMode.WALLCLOCK))

    def mark(self, table: str, timestamp: int) -> None:
        self._kvs.put_wallclock(TABLE, {Cell(table.encode(), _COL): fixed_long(timestamp)})

    def cutoff(self, table: str) -> int:
        """Queue entries of ``table`` with start timestamp below this are obsolete (0 when never marked).

        Not cached: a sweeper in another process must see a truncate at once."""
        row = self._kvs.get_wallclock_row(TABLE, table.encode())
        value = 0
        for col, raw in row:
            if col == _COL:
                value = from_fixed_long(raw)
        return value
