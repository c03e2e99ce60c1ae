"""The key-value layer's contract: one interface, implemented by Cassandra and the embedded SQLite store.

An *Atlas table* holds versioned cells (:mod:`.cells`, whose names this module re-exports):
``(row bytes, column bytes, timestamp int, value bytes)``. On Cassandra an Atlas table is the CQL table
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

A backend is composed, not inherited: :class:`KeyValueService` is the public interface and checks every
argument of every public method here, once for both backends (the table, its write mode, the operation, the
cells and values - :mod:`._common`), returns early when there is nothing to do, and hands the checked
arguments to one of the backend's *parts*: :class:`Tables` (tables and the metadata registry),
:class:`Reads`, :class:`LogicalWrites`, :class:`LwtTables` and :class:`WallclockTables`. A part never sees
unchecked input; a backend's service builds its parts around one object that executes statements and
translates its driver's errors (``CqlSession`` on Cassandra, ``SqliteDatabase`` on the embedded store).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from . import _common as C
from .cells import (
    LWT_TIMESTAMP,
    MAX_CELL_NAME_BYTES,
    MAX_TIMESTAMP,
    MAX_VALUE_BYTES,
    SENTINEL_TIMESTAMP,
    Cell,
    ScanRange,
    Value,
    validate_cell,
    validate_value,
)
from .consistency import LWT_OPERATIONS, WRITE_OPERATIONS, Operation, resolve_operation
from .pressure import NodePressure
from .tables import SweepStrategy, TableMetadata, WriteMode

__all__ = [
    "LWT_TIMESTAMP",
    "MAX_CELL_NAME_BYTES",
    "MAX_TIMESTAMP",
    "MAX_VALUE_BYTES",
    "SENTINEL_TIMESTAMP",
    "Cell",
    "KeyValueService",
    "LogicalWrites",
    "LwtTables",
    "Reads",
    "ScanRange",
    "Tables",
    "Value",
    "WallclockTables",
    "validate_cell",
    "validate_value",
]


# ----- the parts a backend is composed of: each method takes checked arguments ----------------------------
class Tables(ABC):
    """A backend's tables and their metadata registry (table names checked, metadata canonical)."""

    @abstractmethod
    def meta(self, table: str, op: str) -> TableMetadata:
        """The table's metadata for the write-mode checks, cached (a table's write mode never changes);
        TableNotFoundError for an unknown table (``op`` names the operation in errors). ``table`` unchecked."""

    @abstractmethod
    def create(self, table: str, metadata: TableMetadata) -> None: ...

    @abstractmethod
    def drop(self, table: str) -> None: ...

    @abstractmethod
    def truncate(self, table: str) -> None:
        """Of an existing table."""

    @abstractmethod
    def exists(self, table: str) -> bool: ...

    @abstractmethod
    def metadata(self, table: str) -> TableMetadata:
        """What :meth:`KeyValueService.get_metadata` returns."""

    @abstractmethod
    def set_strategy(self, table: str, strategy: SweepStrategy) -> None: ...

    @abstractmethod
    def names(self) -> list[str]: ...

    def space_used_bytes(self, table: str) -> int | None:
        """Of an existing table; None when unknown."""
        return None

    def gc_grace_seconds(self, table: str) -> int | None:
        """``table`` unchecked (a backend without the notion answers None for any name)."""
        return None


class Reads(ABC):
    """A backend's reads of LOGICAL data (the table exists; cells, rows, bounds and limits checked; something
    to read)."""

    @abstractmethod
    def get(self, table: str, cells: dict[Cell, int]) -> dict[Cell, Value]: ...

    @abstractmethod
    def all_timestamps(self, table: str, cells: list[Cell], timestamp: int) -> dict[Cell, list[int]]: ...

    @abstractmethod
    def row_columns(self, table: str, row: bytes, start_col: bytes | None, end_col: bytes | None,
                    limit: int | None, timestamp: int) -> list[tuple[bytes, Value]]:
        """A column range that is not empty, ``limit`` None or > 0."""

    @abstractmethod
    def rows_columns(self, table: str, rows: list[bytes], start_col: bytes | None, end_col: bytes | None,
                     timestamp: int) -> dict[bytes, list[tuple[bytes, Value]]]:
        """Some rows, a column range that is not empty."""

    @abstractmethod
    def full_range(self) -> ScanRange: ...

    @abstractmethod
    def split(self, table: str, parts: int) -> list[ScanRange]: ...

    @abstractmethod
    def scan_bounds(self, scan_range: ScanRange | None, start_after_row: bytes | None) -> tuple:
        """The checked bounds (the backend's own) of a scan of ``scan_range`` (None: the whole table)
        resuming after ``start_after_row``; InvalidInputError for a range of the other backend's kind."""

    @abstractmethod
    def scan(self, table: str, bounds: tuple, page_size: int, timestamp: int) -> Iterator[tuple[Cell, int, bytes]]:
        """Within ``bounds`` (from :meth:`scan_bounds`)."""


class LogicalWrites(ABC):
    """A backend's writes of LOGICAL tables (the table's write mode checked, the operation resolved, something
    to write)."""

    @abstractmethod
    def use_fresh_timestamps(self, supplier: Callable[[], int]) -> None:
        """Keep the (callable) supplier of fresh write times, or not: a store without write times needs none."""

    @abstractmethod
    def put(self, puts: dict[str, dict[Cell, bytes]], timestamp: int, op: str, operation: Operation) -> None:
        """Some values in some of the tables (a table may have none)."""

    @abstractmethod
    def delete(self, table: str, versions: list[tuple[Cell, int]], operation: Operation) -> None: ...

    @abstractmethod
    def delete_ranges(self, table: str, ranges: dict[Cell, tuple[int, int]], operation: Operation) -> None: ...

    @abstractmethod
    def sentinels(self, table: str, cells: list[Cell], operation: Operation) -> None: ...

    def sentinels_and_tombstones(self, table: str, cells: list[Cell], ranges: dict[Cell, tuple[int, int]]) -> None:
        """The CONSERVATIVE sweep write (``ranges``' keys among ``cells``). This default makes the two separate
        writes, sentinels first (at SENTINEL, one fresh timestamp), then the tombstones (at SWEEP_DELETE,
        another): a backend may do better as long as no reader ever sees a cell's tombstone without its
        sentinel."""
        self.sentinels(table, cells, Operation.SENTINEL)
        if ranges:
            self.delete_ranges(table, ranges, Operation.SWEEP_DELETE)

    @abstractmethod
    def delete_rows(self, table: str, rows: list[bytes], operation: Operation) -> None: ...


class LwtTables(ABC):
    """A backend's LWT tables (the table's write mode checked; cells and values checked; something to do)."""

    @abstractmethod
    def put_unless_exists(self, table: str, values: dict[Cell, bytes]) -> None: ...

    @abstractmethod
    def check_and_set(self, table: str, cell: Cell, expected: bytes | None, new: bytes | None) -> bool: ...

    @abstractmethod
    def get(self, table: str, cells: list[Cell], serial: bool) -> dict[Cell, bytes]:
        """Of an LWT or WALLCLOCK table."""

    @abstractmethod
    def row(self, table: str, row: bytes, serial: bool) -> dict[bytes, bytes]:
        """Of an LWT or WALLCLOCK table."""


class WallclockTables(ABC):
    """A backend's WALLCLOCK tables (the table's write mode checked; arguments checked; something to do)."""

    @abstractmethod
    def put(self, table: str, values: dict[Cell, bytes], ttl_seconds: int | None) -> None: ...

    @abstractmethod
    def delete(self, table: str, cells: list[Cell]) -> None: ...

    @abstractmethod
    def row(self, table: str, row: bytes, start_col: bytes | None, limit: int | None) -> list[tuple[bytes, bytes]]:
        """Of a WALLCLOCK or LWT table; ``limit`` None or > 0."""


# ----- the interface -------------------------------------------------------------------------------------
class KeyValueService(ABC):
    """Backend-agnostic versioned key-value store. Implementations are thread-safe.

    A backend sets its parts in its constructor (see the module docstring); every public method below checks
    its arguments and calls one of them."""

    #: ``"cassandra"`` or ``"sqlite"``
    backend: str = "abstract"

    _tables: Tables
    _reads: Reads
    _writes: LogicalWrites
    _lwt: LwtTables
    _wallclock: WallclockTables

    # ----- lifecycle -------------------------------------------------------------------------------
    def set_fresh_timestamp_supplier(self, supplier: Callable[[], int]) -> None:
        """The supplier of fresh timestamps for sentinels and deletes (spec 002). Called once per batch call."""
        C.check_fresh_timestamp_supplier(supplier)
        self._writes.use_fresh_timestamps(supplier)

    @abstractmethod
    def close(self) -> None: ...

    def describe(self) -> str:
        """Human-readable location of the store, without secrets."""
        return self.backend

    # ----- what every method checks first ----------------------------------------------------------
    def _meta(self, table: str, op: str) -> TableMetadata:
        """The table's metadata (``op`` names the operation in errors); TableNotFoundError for an unknown table."""
        return self._tables.meta(table, op)

    def _require(self, table: str, op: str, *modes: WriteMode) -> TableMetadata:
        """The table's metadata when its write mode is one of ``modes``, else InvalidInputError."""
        return C.check_write_mode(self._meta(table, op), table, op, modes)

    # ----- tables ----------------------------------------------------------------------------------
    def create_table(self, table: str, metadata: TableMetadata = TableMetadata()) -> None:
        """Create the table if absent and record its metadata. Idempotent; re-creating with different
        metadata updates the strategy (the write mode of an existing table cannot change)."""
        C.check_table(table)
        self._tables.create(table, C.check_metadata(metadata))

    def drop_table(self, table: str) -> None:
        """Drop the table and its metadata. Dropping a missing table is a no-op."""
        self._tables.drop(C.check_table(table))

    def truncate_table(self, table: str) -> None:
        self._meta(table, "truncate_table")
        self._tables.truncate(table)

    def table_exists(self, table: str) -> bool:
        return self._tables.exists(C.check_table(table))

    def get_metadata(self, table: str) -> TableMetadata:
        """Raises TableNotFoundError for an unknown table."""
        return self._tables.metadata(C.check_table(table))

    def set_sweep_strategy(self, table: str, strategy: SweepStrategy) -> None:
        C.check_table(table)
        self._tables.set_strategy(table, SweepStrategy.parse(strategy))

    def list_tables(self) -> list[str]:
        return self._tables.names()

    # ----- LOGICAL writes --------------------------------------------------------------------------
    def put(
        self, table: str, values: Mapping[Cell, bytes], timestamp: int, *, operation: Operation | None = None
    ) -> None:
        """Write each cell at Atlas timestamp ``timestamp`` (Cassandra write time = timestamp).
        ``operation``: DATA_WRITE (default) or QUEUE_WRITE (the sweep queue) - see :mod:`.consistency`."""
        operation = resolve_operation(operation, Operation.DATA_WRITE, WRITE_OPERATIONS, "put")
        self._put({table: values}, timestamp, "put", operation)

    def multi_put(self, puts: Mapping[str, Mapping[Cell, bytes]], timestamp: int) -> None:
        """``put`` into several tables at once, executed concurrently."""
        self._put(puts, timestamp, "multi_put", Operation.DATA_WRITE)

    def _put(self, puts: Mapping[str, Mapping[Cell, bytes]], timestamp: int, op: str, operation: Operation) -> None:
        C.check_mapping(puts, "puts")
        timestamp = C.check_write_timestamp(timestamp)
        checked: dict[str, dict[Cell, bytes]] = {}
        for table, values in puts.items():  # every table checked before anything is written
            self._require(table, op, WriteMode.LOGICAL)
            checked[table] = C.check_values(values)
        if any(checked.values()):
            self._writes.put(checked, timestamp, op, operation)

    def delete(
        self, table: str, versions: Iterable[tuple[Cell, int]], *, operation: Operation | None = None
    ) -> None:
        """Delete exact versions (cell, Atlas timestamp). One fresh timestamp for the whole call.
        ``operation``: ABORT_DELETE (default: aborted writes), SWEEP_DELETE, QUEUE_CLEANUP..."""
        operation = resolve_operation(operation, Operation.ABORT_DELETE, WRITE_OPERATIONS, "delete")
        self._require(table, "delete", WriteMode.LOGICAL)
        checked = C.check_versions(versions)
        if checked:
            self._writes.delete(table, checked, operation)

    def delete_all_timestamps(
        self, table: str, ranges: Mapping[Cell, tuple[int, int]], *, operation: Operation | None = None
    ) -> None:
        """Ranged tombstones: for each cell delete every version with ``lo <= ts <= hi``
        (``operation`` default SWEEP_DELETE).

        One CQL range delete per cell, never read-before-delete; one fresh timestamp for the call;
        executed concurrently. Any failure raises (the caller must not advance past it)."""
        operation = resolve_operation(operation, Operation.SWEEP_DELETE, WRITE_OPERATIONS, "delete_all_timestamps")
        self._require(table, "delete_all_timestamps", WriteMode.LOGICAL)
        checked = C.check_ranges(ranges)
        if checked:
            self._writes.delete_ranges(table, checked, operation)

    def add_gc_sentinels(self, table: str, cells: Iterable[Cell], *, operation: Operation | None = None) -> None:
        """Write an empty value at Atlas timestamp -1 for each cell, at one fresh write time
        (``operation`` default SENTINEL)."""
        operation = resolve_operation(operation, Operation.SENTINEL, WRITE_OPERATIONS, "add_gc_sentinels")
        self._require(table, "add_gc_sentinels", WriteMode.LOGICAL)
        checked = C.check_cells(cells)
        if checked:
            self._writes.sentinels(table, checked, operation)

    def add_gc_sentinels_and_delete_all_timestamps(
        self, table: str, cells: Iterable[Cell], ranges: Mapping[Cell, tuple[int, int]]
    ) -> None:
        """CONSERVATIVE sweep of ``cells`` in one call: the garbage-collection sentinel of every cell, and the
        ranged tombstones ``ranges`` (keys: a subset of ``cells``), each cell's sentinel never after its
        tombstone (spec 000 step 5: "write a garbage deletion sentinel, then put a ranged tombstone").

        Fresh timestamps as the two separate calls take them: one for the sentinels, then one for the
        tombstones. No reader may ever see a cell's tombstone without its sentinel (Cassandra sends each
        cell's sentinel and tombstone as one single-partition mutation, which applies atomically, at the
        SWEEP_DELETE consistency level; a sentinel with no tombstone goes at the SENTINEL level; the embedded
        store writes both in one transaction; :meth:`LogicalWrites.sentinels_and_tombstones` has the two
        separate writes as its default)."""
        self._require(table, "add_gc_sentinels_and_delete_all_timestamps", WriteMode.LOGICAL)
        checked_cells = C.check_cells(cells)
        checked_ranges = C.check_ranges(ranges)
        C.check_ranges_within(checked_ranges, checked_cells)
        if checked_cells:
            self._writes.sentinels_and_tombstones(table, checked_cells, checked_ranges)

    def delete_rows(self, table: str, rows: Iterable[bytes], *, operation: Operation | None = None) -> None:
        """Delete whole rows (one partition tombstone each on Cassandra) at one fresh timestamp.
        ``operation``: SWEEP_DELETE (default, the strict level) or QUEUE_CLEANUP (the sweep queue's rows)."""
        operation = resolve_operation(operation, Operation.SWEEP_DELETE, WRITE_OPERATIONS, "delete_rows")
        self._require(table, "delete_rows", WriteMode.LOGICAL)
        checked = C.check_rows(rows)
        if checked:
            self._writes.delete_rows(table, checked, operation)

    # ----- reads -----------------------------------------------------------------------------------
    def get(self, table: str, cells: Mapping[Cell, int]) -> dict[Cell, Value]:
        """For each cell the latest version with timestamp strictly below the given one.

        Sentinels (timestamp -1, empty value) are returned like any other version; absent cells are
        omitted. Batched and concurrent on Cassandra."""
        self._meta(table, "get")
        checked = C.check_cell_timestamps(cells)
        return self._reads.get(table, checked) if checked else {}

    def get_latest(self, table: str, cells: Iterable[Cell], timestamp: int = MAX_TIMESTAMP) -> dict[Cell, Value]:
        return self.get(table, {c: timestamp for c in cells})

    def get_all_timestamps(
        self, table: str, cells: Iterable[Cell], timestamp: int = MAX_TIMESTAMP
    ) -> dict[Cell, list[int]]:
        """Every version's timestamp strictly below ``timestamp``, ascending, per cell (absent cells omitted)."""
        self._meta(table, "get_all_timestamps")
        checked = C.check_cells(cells)
        timestamp = C.check_read_timestamp(timestamp)
        return self._reads.all_timestamps(table, checked, timestamp) if checked else {}

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
        row = C.check_row(row)
        start_col = C.check_optional_bytes(start_col, "start_col")
        end_col = C.check_optional_bytes(end_col, "end_col")
        limit = C.check_limit(limit)
        timestamp = C.check_read_timestamp(timestamp)
        if limit == 0 or (start_col is not None and end_col is not None and start_col >= end_col):
            return []
        return self._reads.row_columns(table, row, start_col, end_col, limit, timestamp)

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
        checked = C.check_rows(rows)
        start_col = C.check_optional_bytes(start_col, "start_col")
        end_col = C.check_optional_bytes(end_col, "end_col")
        timestamp = C.check_read_timestamp(timestamp)
        if not checked or (start_col is not None and end_col is not None and start_col >= end_col):
            return {}
        return self._reads.rows_columns(table, checked, start_col, end_col, timestamp)

    def full_range(self, table: str) -> ScanRange:
        self._meta(table, "full_range")
        return self._reads.full_range()

    def split_ranges(self, table: str, parts: int) -> list[ScanRange]:
        """Split the table into about ``parts`` disjoint ranges covering every row."""
        self._meta(table, "split_ranges")
        return self._reads.split(table, C.check_parts(parts))

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
        bounds = self._reads.scan_bounds(scan_range, start_after_row)
        return self._reads.scan(table, bounds, C.check_page_size(page_size), C.check_read_timestamp(timestamp))

    # ----- LWT tables ------------------------------------------------------------------------------
    def put_unless_exists(
        self, table: str, values: Mapping[Cell, bytes], *, operation: Operation | None = None
    ) -> None:
        """Insert each cell only if absent (per row: one LWT batch on Cassandra). Raises
        KeyAlreadyExistsError listing the cells that existed (cells of other rows may have been written).
        ``operation``: LWT_COMMIT (the only one)."""
        resolve_operation(operation, Operation.LWT_COMMIT, LWT_OPERATIONS, "put_unless_exists")
        self._require(table, "put_unless_exists", WriteMode.LWT)
        checked = C.check_values(values)
        if checked:
            self._lwt.put_unless_exists(table, checked)

    def check_and_set(
        self, table: str, cell: Cell, expected: bytes | None, new: bytes | None, *, operation: Operation | None = None
    ) -> bool:
        """Atomically replace the cell's value if it equals ``expected`` (None = absent). ``new`` None
        deletes the cell. Returns whether it was applied. ``operation``: LWT_COMMIT (the only one)."""
        resolve_operation(operation, Operation.LWT_COMMIT, LWT_OPERATIONS, "check_and_set")
        self._require(table, "check_and_set", WriteMode.LWT)
        cell = validate_cell(cell)
        expected = None if expected is None else validate_value(expected, what="expected value")
        new = None if new is None else validate_value(new, what="new value")
        return self._lwt.check_and_set(table, cell, expected, new)

    def get_lwt(self, table: str, cells: Iterable[Cell], serial: bool = False) -> dict[Cell, bytes]:
        """Read LWT cells (absent omitted). ``serial=True`` reads at SERIAL consistency (linearizable)."""
        self._require(table, "get_lwt", WriteMode.LWT, WriteMode.WALLCLOCK)
        checked = C.check_cells(cells)
        return self._lwt.get(table, checked, serial) if checked else {}

    def get_lwt_row(self, table: str, row: bytes, serial: bool = False) -> dict[bytes, bytes]:
        """All columns of one row of an LWT (or WALLCLOCK) table."""
        self._require(table, "get_lwt_row", WriteMode.LWT, WriteMode.WALLCLOCK)
        return self._lwt.row(table, C.check_row(row), serial)

    # ----- WALLCLOCK tables ------------------------------------------------------------------------
    def put_wallclock(self, table: str, values: Mapping[Cell, bytes], ttl_seconds: int | None = None) -> None:
        self._require(table, "put_wallclock", WriteMode.WALLCLOCK)
        checked = C.check_values(values)
        ttl_seconds = C.check_ttl(ttl_seconds)
        if checked:
            self._wallclock.put(table, checked, ttl_seconds)

    def delete_wallclock(self, table: str, cells: Iterable[Cell]) -> None:
        self._require(table, "delete_wallclock", WriteMode.WALLCLOCK)
        checked = C.check_cells(cells)
        if checked:
            self._wallclock.delete(table, checked)

    def get_wallclock_row(
        self, table: str, row: bytes, start_col: bytes | None = None, limit: int | None = None
    ) -> list[tuple[bytes, bytes]]:
        """Columns of one row of a WALLCLOCK table ordered by column bytes."""
        self._require(table, "get_wallclock_row", WriteMode.WALLCLOCK, WriteMode.LWT)
        row = C.check_row(row)
        start_col = C.check_optional_bytes(start_col, "start_col")
        limit = C.check_limit(limit)
        if limit == 0:
            return []
        return self._wallclock.row(table, row, start_col, limit)

    # ----- operations ------------------------------------------------------------------------------
    def space_used_bytes(self, table: str) -> int | None:
        """Best-effort on-disk size of a table (None when unknown)."""
        self._meta(table, "space_used_bytes")
        return self._tables.space_used_bytes(table)

    def gc_grace_seconds(self, table: str) -> int | None:
        """The table's live ``gc_grace_seconds`` (Cassandra: from ``system_schema.tables``); None where the
        notion does not exist (the embedded store keeps one copy and purges nothing by grace period)."""
        return self._tables.gc_grace_seconds(table)

    def node_pressure(self) -> list[NodePressure]:
        """Each reachable node's thread pools (Cassandra: ``system_views.thread_pools``, one request per node;
        :mod:`~airflow_atlas.kvs.pressure`); [] where there are no nodes (the embedded store)."""
        return []

    def down_datacenters(self) -> dict[str, list[str]]:
        """Datacenter -> addresses of its replicas known to be down (Cassandra: the driver's view); {} where
        every replica is up or the notion does not exist. Sweep deletes at ALL wait for every one of them."""
        return {}
