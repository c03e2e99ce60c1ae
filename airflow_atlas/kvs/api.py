"""The key-value layer's contract: one interface, implemented by Cassandra and the embedded SQLite store.

An *Atlas table* holds versioned cells: ``(row bytes, column bytes, timestamp int, value bytes)``. The
timestamp is the Atlas (logical) timestamp: the start timestamp of the transaction that wrote the cell,
or -1 for a garbage-collection sentinel. On Cassandra an Atlas table is the CQL table
``(key blob, column1 blob, column2 bigint, value blob, PRIMARY KEY (key, column1, column2))``.

Every table has exactly one :class:`WriteMode`:

* ``LOGICAL`` - transactional data and the sweep queue. A cell written at Atlas timestamp TS gets
  Cassandra write time TS. Sentinels, deletes and ranged tombstones get a *fresh* timestamp from the
  timestamp service, one per batch call (spec 002). Never touched by lightweight transactions.
* ``LWT`` - coordination tables (timestamps, locks, transactions, sweep progress). Written only through
  :meth:`KeyValueService.put_unless_exists` and :meth:`KeyValueService.check_and_set` (Cassandra
  lightweight transactions at SERIAL consistency); cells live at ``column2 = LWT_TIMESTAMP``.
* ``WALLCLOCK`` - small registries (table metadata, open-transaction registrations, punch table) written
  with plain writes at server time; never mixed with logical timestamps.

Bad input raises :class:`~airflow_atlas.errors.InvalidInputError`; unknown tables raise
:class:`~airflow_atlas.errors.TableNotFoundError`; an unreachable store raises
:class:`~airflow_atlas.errors.StoreUnavailableError`.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from ..encoding import LONG_MAX, LONG_MIN
from ..errors import InvalidInputError
from ..validation import check_int
from .consistency import LWT_OPERATIONS, Operation, resolve_operation
from .pressure import NodePressure
from .tables import SweepStrategy, TableMetadata, WriteMode

SENTINEL_TIMESTAMP = -1
"""Atlas timestamp of a garbage-collection sentinel (an empty value)."""

LWT_TIMESTAMP = -1
"""``column2`` of every cell of an LWT table (as the spec's ``_transactions`` table does)."""

MAX_TIMESTAMP = (1 << 63) - 1
MAX_CELL_NAME_BYTES = 1500
"""Row and column names are each limited; a Cell persists in at most ~3,000 bytes (spec 000)."""
MAX_VALUE_BYTES = 8 * 1024 * 1024
"""Largest single value; Cassandra rejects mutations over half a 32 MiB commitlog segment."""

class Cell(NamedTuple):
    row: bytes
    col: bytes


class Value(NamedTuple):
    timestamp: int
    contents: bytes


class ScanRange(NamedTuple):
    """An opaque slice of a table's rows for scans and parallel legacy sweep.

    Cassandra: ``kind == "token"``, ``start`` exclusive and ``end`` inclusive Murmur3 tokens (ints).
    Embedded: ``kind == "key"``, ``start`` inclusive and ``end`` exclusive row keys (bytes, ``None`` = open).
    """

    kind: str
    start: object
    end: object


def validate_cell(cell: Cell) -> Cell:
    # Fast path for the hot loops (sweep, commits): an exact Cell of valid bytes is returned as it is.
    if type(cell) is Cell:
        row, col = cell
        if (
            type(row) is bytes
            and type(col) is bytes
            and 0 < len(row) <= MAX_CELL_NAME_BYTES
            and 0 < len(col) <= MAX_CELL_NAME_BYTES
        ):
            return cell
    if not isinstance(cell, tuple) or len(cell) != 2:
        raise InvalidInputError(f"a cell is a (row, column) pair of bytes, got {cell!r}")
    row, col = cell
    if not isinstance(row, (bytes, bytearray)) or not isinstance(col, (bytes, bytearray)):
        raise InvalidInputError(f"cell row and column must be bytes, got {type(row).__name__}/{type(col).__name__}")
    if not row or not col:
        raise InvalidInputError("cell row and column must not be empty")
    if len(row) > MAX_CELL_NAME_BYTES or len(col) > MAX_CELL_NAME_BYTES:
        raise InvalidInputError(f"cell names are limited to {MAX_CELL_NAME_BYTES} bytes each")
    return Cell(bytes(row), bytes(col))


def validate_value(value: bytes, *, what: str = "value") -> bytes:
    if not isinstance(value, (bytes, bytearray)):
        raise InvalidInputError(f"{what} must be bytes, got {type(value).__name__}")
    if len(value) > MAX_VALUE_BYTES:
        raise InvalidInputError(f"{what} of {len(value)} bytes exceeds the limit of {MAX_VALUE_BYTES} bytes")
    return bytes(value)


# ----- the checks of the read arguments the interface's own methods take (also used by the backends) -----
def check_read_timestamp(ts: object) -> int:
    return check_int(ts, "read timestamp")


def check_optional_bytes(value: object, what: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, (bytes, bytearray)):
        raise InvalidInputError(f"{what} must be bytes or None, got {type(value).__name__}")
    return bytes(value)


def check_page_size(page_size: object) -> int:
    return check_int(page_size, "page_size", 1, 1_000_000)


def check_limit(limit: object) -> int | None:
    if limit is None:
        return None
    return check_int(limit, "limit", 0, LONG_MAX)


def check_row(row: object) -> bytes:
    if not isinstance(row, (bytes, bytearray)):
        raise InvalidInputError(f"a row name must be bytes, got {type(row).__name__}")
    if not row:
        raise InvalidInputError("a row name must not be empty")
    if len(row) > MAX_CELL_NAME_BYTES:
        raise InvalidInputError(f"row names are limited to {MAX_CELL_NAME_BYTES} bytes")
    return bytes(row)


def check_rows(rows: object) -> list[bytes]:
    if isinstance(rows, (bytes, bytearray, str)) or not isinstance(rows, Iterable):
        raise InvalidInputError(f"rows must be an iterable of bytes, got {type(rows).__name__}")
    out: dict[bytes, None] = {}
    for row in rows:
        out[check_row(row)] = None
    return list(out)


# ----- the checks of the write arguments the interface's own methods take (also used by the backends) -----
def check_mapping(values: object, what: str) -> Mapping:
    if not isinstance(values, Mapping):
        raise InvalidInputError(f"{what} must be a mapping, got {type(values).__name__}")
    return values


def check_cells(cells: object) -> list[Cell]:
    if isinstance(cells, (bytes, str)) or not isinstance(cells, Iterable):
        raise InvalidInputError(f"cells must be an iterable of (row, column) pairs, got {type(cells).__name__}")
    out: dict[Cell, None] = {}
    for cell in cells:
        out[validate_cell(cell)] = None
    return list(out)


def check_ranges(ranges: object) -> dict[Cell, tuple[int, int]]:
    ranges = check_mapping(ranges, "ranges")
    out: dict[Cell, tuple[int, int]] = {}
    for cell, bounds in ranges.items():
        cell = validate_cell(cell)
        if type(bounds) is tuple and len(bounds) == 2:  # fast path (sweep): two plain ints in order
            lo, hi = bounds
            if type(lo) is int and type(hi) is int and LONG_MIN <= lo <= hi <= LONG_MAX:
                out[cell] = bounds
                continue
        if not isinstance(bounds, tuple) or len(bounds) != 2:
            raise InvalidInputError(f"a timestamp range is a (lo, hi) pair, got {bounds!r}")
        lo = check_int(bounds[0], "range start")
        hi = check_int(bounds[1], "range end")
        if lo > hi:
            raise InvalidInputError(f"empty timestamp range [{lo}, {hi}] for cell {cell!r}")
        out[cell] = (lo, hi)
    return out


def check_ranges_within(ranges: Mapping[Cell, tuple[int, int]], cells: list[Cell]) -> None:
    """Every cell given a ranged tombstone must also be given a sentinel (CONSERVATIVE sweep)."""
    unknown = ranges.keys() - set(cells)
    if unknown:
        raise InvalidInputError(
            f"every cell with a ranged tombstone must also get a sentinel; {len(unknown)} do not, e.g. "
            f"{next(iter(unknown))!r}"
        )


class KeyValueService(ABC):
    """Backend-agnostic versioned key-value store. Implementations are thread-safe."""

    #: ``"cassandra"`` or ``"sqlite"``
    backend: str = "abstract"

    # ----- lifecycle -------------------------------------------------------------------------------
    @abstractmethod
    def set_fresh_timestamp_supplier(self, supplier: Callable[[], int]) -> None:
        """The supplier of fresh timestamps for sentinels and deletes (spec 002). Called once per batch call."""

    @abstractmethod
    def close(self) -> None: ...

    def describe(self) -> str:
        """Human-readable location of the store, without secrets."""
        return self.backend

    # ----- tables ----------------------------------------------------------------------------------
    @abstractmethod
    def create_table(self, table: str, metadata: TableMetadata = TableMetadata()) -> None:
        """Create the table if absent and record its metadata. Idempotent; re-creating with different
        metadata updates the strategy (the write mode of an existing table cannot change)."""

    @abstractmethod
    def drop_table(self, table: str) -> None:
        """Drop the table and its metadata. Dropping a missing table is a no-op."""

    @abstractmethod
    def truncate_table(self, table: str) -> None: ...

    @abstractmethod
    def table_exists(self, table: str) -> bool: ...

    @abstractmethod
    def get_metadata(self, table: str) -> TableMetadata:
        """Raises TableNotFoundError for an unknown table."""

    @abstractmethod
    def set_sweep_strategy(self, table: str, strategy: SweepStrategy) -> None: ...

    @abstractmethod
    def list_tables(self) -> list[str]: ...

    # ----- LOGICAL writes --------------------------------------------------------------------------
    @abstractmethod
    def put(
        self, table: str, values: Mapping[Cell, bytes], timestamp: int, *, operation: Operation | None = None
    ) -> None:
        """Write each cell at Atlas timestamp ``timestamp`` (Cassandra write time = timestamp).
        ``operation``: DATA_WRITE (default) or QUEUE_WRITE (the sweep queue) - see :mod:`.consistency`."""

    @abstractmethod
    def multi_put(self, puts: Mapping[str, Mapping[Cell, bytes]], timestamp: int) -> None:
        """``put`` into several tables at once, executed concurrently."""

    @abstractmethod
    def delete(
        self, table: str, versions: Iterable[tuple[Cell, int]], *, operation: Operation | None = None
    ) -> None:
        """Delete exact versions (cell, Atlas timestamp). One fresh timestamp for the whole call.
        ``operation``: ABORT_DELETE (default: aborted writes), SWEEP_DELETE, QUEUE_CLEANUP..."""

    @abstractmethod
    def delete_all_timestamps(
        self, table: str, ranges: Mapping[Cell, tuple[int, int]], *, operation: Operation | None = None
    ) -> None:
        """Ranged tombstones: for each cell delete every version with ``lo <= ts <= hi``
        (``operation`` default SWEEP_DELETE).

        One CQL range delete per cell, never read-before-delete; one fresh timestamp for the call;
        executed concurrently. Any failure raises (the caller must not advance past it)."""

    @abstractmethod
    def add_gc_sentinels(self, table: str, cells: Iterable[Cell], *, operation: Operation | None = None) -> None:
        """Write an empty value at Atlas timestamp -1 for each cell, at one fresh write time
        (``operation`` default SENTINEL)."""

    def add_gc_sentinels_and_delete_all_timestamps(
        self, table: str, cells: Iterable[Cell], ranges: Mapping[Cell, tuple[int, int]]
    ) -> None:
        """CONSERVATIVE sweep of ``cells`` in one call: the garbage-collection sentinel of every cell, and the
        ranged tombstones ``ranges`` (keys: a subset of ``cells``), each cell's sentinel never after its
        tombstone (spec 000 step 5: "write a garbage deletion sentinel, then put a ranged tombstone").

        Fresh timestamps as the two separate calls take them: one for the sentinels, then one for the
        tombstones. This default makes exactly those two calls, in that order; a backend may do better
        as long as no reader can ever see a cell's tombstone without its sentinel (Cassandra sends each
        cell's sentinel and tombstone as one single-partition mutation, which applies atomically, at the
        SWEEP_DELETE consistency level; a sentinel with no tombstone goes at the SENTINEL level)."""
        cells = check_cells(cells)
        check_ranges_within(check_ranges(ranges), cells)
        self.add_gc_sentinels(table, cells, operation=Operation.SENTINEL)
        if ranges:
            self.delete_all_timestamps(table, ranges, operation=Operation.SWEEP_DELETE)

    @abstractmethod
    def delete_rows(self, table: str, rows: Iterable[bytes], *, operation: Operation | None = None) -> None:
        """Delete whole rows (one partition tombstone each on Cassandra) at one fresh timestamp.
        ``operation``: SWEEP_DELETE (default, the strict level) or QUEUE_CLEANUP (the sweep queue's rows)."""

    # ----- reads -----------------------------------------------------------------------------------
    @abstractmethod
    def get(self, table: str, cells: Mapping[Cell, int]) -> dict[Cell, Value]:
        """For each cell the latest version with timestamp strictly below the given one.

        Sentinels (timestamp -1, empty value) are returned like any other version; absent cells are
        omitted. Batched and concurrent on Cassandra."""

    def get_latest(self, table: str, cells: Iterable[Cell], timestamp: int = MAX_TIMESTAMP) -> dict[Cell, Value]:
        return self.get(table, {c: timestamp for c in cells})

    @abstractmethod
    def get_all_timestamps(
        self, table: str, cells: Iterable[Cell], timestamp: int = MAX_TIMESTAMP
    ) -> dict[Cell, list[int]]:
        """Every version's timestamp strictly below ``timestamp``, ascending, per cell (absent cells omitted)."""

    def get_row_columns(
        self,
        table: str,
        row: bytes,
        start_col: bytes | None = None,
        end_col: bytes | None = None,
        limit: int | None = None,
        timestamp: int = MAX_TIMESTAMP,
    ) -> list[tuple[bytes, Value]]:
        """Latest version (below ``timestamp``) of each column of one row with
        ``start_col <= col < end_col`` (None = open), ordered by column bytes, at most ``limit`` columns.
        Pages through wide rows on Cassandra."""
        self._meta(table, "get_row_columns")
        row = check_row(row)
        start_col = check_optional_bytes(start_col, "start_col")
        end_col = check_optional_bytes(end_col, "end_col")
        limit = check_limit(limit)
        timestamp = check_read_timestamp(timestamp)
        if limit == 0 or (start_col is not None and end_col is not None and start_col >= end_col):
            return []
        return self._row_columns(table, row, start_col, end_col, limit, timestamp)

    def get_rows_columns(
        self,
        table: str,
        rows: Sequence[bytes],
        start_col: bytes | None = None,
        end_col: bytes | None = None,
        timestamp: int = MAX_TIMESTAMP,
    ) -> dict[bytes, list[tuple[bytes, Value]]]:
        """``get_row_columns`` for many rows, executed concurrently (empty rows omitted)."""
        self._meta(table, "get_rows_columns")
        rows = check_rows(rows)
        start_col = check_optional_bytes(start_col, "start_col")
        end_col = check_optional_bytes(end_col, "end_col")
        timestamp = check_read_timestamp(timestamp)
        if not rows or (start_col is not None and end_col is not None and start_col >= end_col):
            return {}
        return self._rows_columns(table, rows, start_col, end_col, timestamp)

    @abstractmethod
    def _meta(self, table: str, op: str) -> TableMetadata:
        """The table's metadata (``op`` names the operation in errors); TableNotFoundError for an unknown table."""

    @abstractmethod
    def _row_columns(self, table: str, row: bytes, start_col: bytes | None, end_col: bytes | None, limit: int | None,
                     timestamp: int) -> list[tuple[bytes, Value]]:
        """:meth:`get_row_columns` on checked arguments: a column range that is not empty, ``limit`` None or > 0."""

    @abstractmethod
    def _rows_columns(self, table: str, rows: list[bytes], start_col: bytes | None, end_col: bytes | None,
                      timestamp: int) -> dict[bytes, list[tuple[bytes, Value]]]:
        """:meth:`get_rows_columns` on checked arguments: some rows, a column range that is not empty."""

    @abstractmethod
    def full_range(self, table: str) -> ScanRange: ...

    @abstractmethod
    def split_ranges(self, table: str, parts: int) -> list[ScanRange]:
        """Split the table into about ``parts`` disjoint ranges covering every row."""

    def scan(
        self,
        table: str,
        scan_range: ScanRange | None = None,
        start_after_row: bytes | None = None,
        page_size: int = 1000,
        timestamp: int = MAX_TIMESTAMP,
    ) -> Iterator[tuple[Cell, int, bytes]]:
        """Every version ``(cell, ts, value)`` with ts below ``timestamp`` in the range, in the backend's
        row order, then column, then timestamp ascending. ``start_after_row`` resumes after a row
        previously returned from the same range. Pages with ``page_size``."""
        self._meta(table, "scan")
        bounds = self._scan_bounds(scan_range, start_after_row)
        return self._scan(table, bounds, check_page_size(page_size), check_read_timestamp(timestamp))

    @abstractmethod
    def _scan_bounds(self, scan_range: ScanRange | None, start_after_row: bytes | None) -> tuple:
        """The checked bounds (the backend's own) of a scan of ``scan_range`` (None: the whole table)
        resuming after ``start_after_row``; InvalidInputError for a range of the other backend's kind."""

    @abstractmethod
    def _scan(self, table: str, bounds: tuple, page_size: int, timestamp: int) -> Iterator[tuple[Cell, int, bytes]]:
        """:meth:`scan` within ``bounds`` (from :meth:`_scan_bounds`) on checked arguments."""

    # ----- LWT tables ------------------------------------------------------------------------------
    @abstractmethod
    def put_unless_exists(
        self, table: str, values: Mapping[Cell, bytes], *, operation: Operation | None = None
    ) -> None:
        """Insert each cell only if absent (per row: one LWT batch on Cassandra). Raises
        KeyAlreadyExistsError listing the cells that existed (cells of other rows may have been written)."""

    def check_and_set(
        self, table: str, cell: Cell, expected: bytes | None, new: bytes | None, *, operation: Operation | None = None
    ) -> bool:
        """Atomically replace the cell's value if it equals ``expected`` (None = absent). ``new`` None
        deletes the cell. Returns whether it was applied. ``operation``: LWT_COMMIT (the only one).
        The arguments are checked here, once for both backends; :meth:`_check_and_set` does the rest."""
        resolve_operation(operation, Operation.LWT_COMMIT, LWT_OPERATIONS, "check_and_set")
        self._require(table, "check_and_set", WriteMode.LWT)
        cell = validate_cell(cell)
        expected = None if expected is None else validate_value(expected, what="expected value")
        new = None if new is None else validate_value(new, what="new value")
        return self._check_and_set(table, cell, expected, new)

    @abstractmethod
    def _check_and_set(self, table: str, cell: Cell, expected: bytes | None, new: bytes | None) -> bool:
        """:meth:`check_and_set` on checked arguments (an existing LWT table, a valid cell and values)."""

    @abstractmethod
    def get_lwt(self, table: str, cells: Iterable[Cell], serial: bool = False) -> dict[Cell, bytes]:
        """Read LWT cells (absent omitted). ``serial=True`` reads at SERIAL consistency (linearizable)."""

    @abstractmethod
    def get_lwt_row(self, table: str, row: bytes, serial: bool = False) -> dict[bytes, bytes]:
        """All columns of one row of an LWT (or WALLCLOCK) table."""

    # ----- WALLCLOCK tables ------------------------------------------------------------------------
    @abstractmethod
    def put_wallclock(self, table: str, values: Mapping[Cell, bytes], ttl_seconds: int | None = None) -> None: ...

    @abstractmethod
    def delete_wallclock(self, table: str, cells: Iterable[Cell]) -> None: ...

    def get_wallclock_row(
        self, table: str, row: bytes, start_col: bytes | None = None, limit: int | None = None
    ) -> list[tuple[bytes, bytes]]:
        """Columns of one row of a WALLCLOCK table ordered by column bytes."""
        self._require(table, "get_wallclock_row", WriteMode.WALLCLOCK, WriteMode.LWT)
        row = check_row(row)
        start_col = check_optional_bytes(start_col, "start_col")
        limit = check_limit(limit)
        if limit == 0:
            return []
        return self._wallclock_row(table, row, start_col, limit)

    @abstractmethod
    def _require(self, table: str, op: str, *modes: WriteMode) -> TableMetadata:
        """The table's metadata when its write mode is one of ``modes``, else InvalidInputError."""

    @abstractmethod
    def _wallclock_row(self, table: str, row: bytes, start_col: bytes | None, limit: int | None) -> list[tuple[bytes, bytes]]:
        """:meth:`get_wallclock_row` on checked arguments (``limit`` None or > 0)."""

    # ----- operations ------------------------------------------------------------------------------
    def space_used_bytes(self, table: str) -> int | None:
        """Best-effort on-disk size of a table (None when unknown)."""
        return None

    def gc_grace_seconds(self, table: str) -> int | None:
        """The table's live ``gc_grace_seconds`` (Cassandra: from ``system_schema.tables``); None where the
        notion does not exist (the embedded store keeps one copy and purges nothing by grace period)."""
        return None

    def node_pressure(self) -> list[NodePressure]:
        """Each reachable node's thread pools (Cassandra: ``system_views.thread_pools``, one request per node;
        :mod:`~airflow_atlas.kvs.pressure`); [] where there are no nodes (the embedded store)."""
        return []

    def down_datacenters(self) -> dict[str, list[str]]:
        """Datacenter -> addresses of its replicas known to be down (Cassandra: the driver's view); {} where
        every replica is up or the notion does not exist. Sweep deletes at ALL wait for every one of them."""
        return {}
