"""The punch table: wall-clock time -> timestamp, for the unreadable timestamp of CONSERVATIVE sweep.

About once a minute something that has just drawn a fresh timestamp punches it here together with the
wall-clock time read *after* the draw. So a punch (w, P) means: every transaction whose start timestamp is
below P started before w. Read-only transactions do not register; they are protected instead by the
*unreadable timestamp* U = the timestamp punched at or before ``now - window``: CONSERVATIVE sweep stays below
U, so only a read-only transaction older than the window can meet a sentinel (and then it fails loudly with
SweptVersionReadError rather than reading a wrong snapshot). With no punch that old, U = 0: sweep nothing.

Layout: WALLCLOCK table ``_punch``, one row ``b"punch"``, column ``fixed_long(LONG_MAX - wall_millis)`` (so
columns ascend as time descends), value ``fixed_long(timestamp)``. The newest punch at or before W is then
the first column at or after ``key(W)``: one read with limit 1.
"""
from __future__ import annotations

import time
from typing import Callable

from ..encoding import LONG_MAX, fixed_long, from_fixed_long
from ..errors import InvalidInputError
from ..kvs.api import Cell, KeyValueService, SweepStrategy, TableMetadata, WriteMode, validate_table_name
from .encoding import check_start_timestamp

PUNCH_TABLE = "_punch"
PUNCH_TABLE_METADATA = TableMetadata(strategy=SweepStrategy.NOTHING, write_mode=WriteMode.WALLCLOCK)
_ROW = b"punch"


def _column(wall_millis: int) -> bytes:
    if not 0 <= wall_millis <= LONG_MAX:
        raise InvalidInputError(f"wall-clock millis {wall_millis} out of range")
    return fixed_long(LONG_MAX - wall_millis)


def _millis_of(column: bytes) -> int:
    return LONG_MAX - from_fixed_long(column)


class PunchTable:
    """Records (wall millis -> timestamp) and answers the newest timestamp punched at or before a time."""

    def __init__(self, kvs: KeyValueService, clock: Callable[[], float] = time.time, *, table: str = PUNCH_TABLE):
        self._kvs = kvs
        self.table = validate_table_name(table)
        self._clock = clock

    def ensure_tables(self) -> None:
        self._kvs.create_table(self.table, PUNCH_TABLE_METADATA)

    def punch(self, timestamp: int) -> int:
        """Record ``timestamp`` at the current wall-clock millis (read now, after the caller drew it).
        Returns the millis used."""
        check_start_timestamp(timestamp)
        wall_millis = int(self._clock() * 1000)
        self._kvs.put_wallclock(self.table, {Cell(_ROW, _column(wall_millis)): fixed_long(timestamp)})
        return wall_millis

    def timestamp_at_or_before(self, wall_millis: int) -> int | None:
        """The timestamp of the newest punch at or before ``wall_millis``, or None if none is that old."""
        found = self._kvs.get_wallclock_row(self.table, _ROW, start_col=_column(max(0, int(wall_millis))), limit=1)
        return from_fixed_long(found[0][1]) if found else None

    def latest_punch(self) -> tuple[int, int] | None:
        """(wall millis, timestamp) of the newest punch, or None."""
        found = self._kvs.get_wallclock_row(self.table, _ROW, limit=1)
        return (_millis_of(found[0][0]), from_fixed_long(found[0][1])) if found else None

    def unreadable_timestamp(self, window_seconds: float) -> int:
        """Timestamp punched at or before ``now - window_seconds``; 0 if no punch is that old."""
        if window_seconds < 0:
            raise InvalidInputError(f"window_seconds must be >= 0, got {window_seconds}")
        cutoff = int((self._clock() - window_seconds) * 1000)
        found = self.timestamp_at_or_before(cutoff)
        return 0 if found is None else found
