"""The punch table: wall-clock time -> timestamp, for the unreadable timestamp of CONSERVATIVE sweep.

Every so often something that has just drawn a fresh timestamp punches it here together with the
wall-clock time read *after* the draw. So a punch (w, P) means: every transaction whose start timestamp is
below P started before w. Read-only transactions do not register; they are protected instead by the
*unreadable timestamp* U = the timestamp punched at or before ``now - window``: CONSERVATIVE sweep stays below
U, so only a read-only transaction older than the window can meet a sentinel (and then it fails loudly with
SweptVersionReadError rather than reading a wrong snapshot). With no punch that old, U = 0: sweep nothing.

Layout: WALLCLOCK table ``_punch``, one row per UTC day, ``b"punch" + fixed_long(wall_millis // DAY_MILLIS)``
(so no partition grows without bound: the sweep timestamp provider punches up to once a second), column
``fixed_long(LONG_MAX - wall_millis)`` (columns ascend as time descends), value ``fixed_long(timestamp)``.
The newest punch at or before W is the first column at or after ``key(W)`` in W's day: one read with limit
1, or a few more when W's day has no punch that early (looking back at most ``LOOKBACK_DAYS`` days).
"""
from __future__ import annotations

import time
from collections.abc import Callable

from ..encoding import LONG_MAX, fixed_long, from_fixed_long
from ..errors import InvalidInputError
from ..kvs.api import Cell, KeyValueService
from ..kvs.tables import SweepStrategy, TableMetadata, WriteMode, validate_table_name
from ..validation import check_int
from .encoding import check_start_timestamp

PUNCH_TABLE = "_punch"
PUNCH_TABLE_METADATA = TableMetadata(strategy=SweepStrategy.NOTHING, write_mode=WriteMode.WALLCLOCK)
DAY_MILLIS = 86_400_000
LOOKBACK_DAYS = 31
"""How many day rows a lookup walks back before concluding there is no punch that old."""
_ROW_PREFIX = b"punch"


def _row(day: int) -> bytes:
    return _ROW_PREFIX + fixed_long(day)


def _column(wall_millis: int) -> bytes:
    return fixed_long(LONG_MAX - wall_millis)


def _millis_of(column: bytes) -> int:
    return LONG_MAX - from_fixed_long(column)


def _check_millis(wall_millis: int) -> int:
    return check_int(wall_millis, "wall-clock millis", 0, LONG_MAX)


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
        wall_millis = _check_millis(int(self._clock() * 1000))
        cell = Cell(_row(wall_millis // DAY_MILLIS), _column(wall_millis))
        self._kvs.put_wallclock(self.table, {cell: fixed_long(timestamp)})
        return wall_millis

    def punch_at_or_before(self, wall_millis: int) -> tuple[int, int] | None:
        """(wall millis, timestamp) of the newest punch at or before ``wall_millis``, or None."""
        wall_millis = _check_millis(int(wall_millis))
        day = wall_millis // DAY_MILLIS
        start_col: bytes | None = _column(wall_millis)
        for back in range(LOOKBACK_DAYS + 1):
            if day - back < 0:
                break
            found = self._kvs.get_wallclock_row(self.table, _row(day - back), start_col=start_col, limit=1)
            if found:
                return _millis_of(found[0][0]), from_fixed_long(found[0][1])
            start_col = None  # earlier days: their newest punch
        return None

    def timestamp_at_or_before(self, wall_millis: int) -> int | None:
        """The timestamp of the newest punch at or before ``wall_millis``, or None if none is that old."""
        found = self.punch_at_or_before(wall_millis)
        return None if found is None else found[1]

    def latest_punch(self) -> tuple[int, int] | None:
        """(wall millis, timestamp) of the newest punch up to now, or None."""
        return self.punch_at_or_before(int(self._clock() * 1000))

    def unreadable_timestamp(self, window_seconds: float) -> int:
        """Timestamp punched at or before ``now - window_seconds``; 0 if no punch is that old."""
        if window_seconds < 0:
            raise InvalidInputError(f"window_seconds must be >= 0, got {window_seconds}")
        cutoff = int((self._clock() - window_seconds) * 1000)
        if cutoff < 0:
            return 0
        found = self.timestamp_at_or_before(cutoff)
        return 0 if found is None else found
