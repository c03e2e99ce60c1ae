"""The checks of every argument the key-value contract's methods take, shared by both backends (never
imports a backend driver); private to ``kvs/`` (code outside it uses :mod:`airflow_atlas.validation`).

Everything a caller passes is checked here before it reaches SQL or CQL: table names, cells, values,
timestamps, ranges, TTLs and the Cassandra table-option allow-list. The public methods of
:class:`~airflow_atlas.kvs.api.KeyValueService` run these checks once, for both backends, before a backend's
part sees the arguments, so a program that runs on the embedded store runs unchanged on Cassandra.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from ..encoding import LONG_MAX, LONG_MIN
from ..errors import InvalidInputError
from ..validation import check_float, check_int
from .cells import LWT_TIMESTAMP, MAX_CELL_NAME_BYTES, MAX_TIMESTAMP, Cell, validate_cell, validate_value
from .tables import SweepStrategy, TableMetadata, WriteMode, validate_table_name

RESERVED_PREFIX = "atlas_"
"""User table names starting with this prefix are refused: on Cassandra the engine-internal table
``_x`` is stored as ``atlas_x`` (unquoted CQL identifiers cannot start with an underscore), so a user
table ``atlas_x`` would collide with it."""

METADATA_TABLE = "_metadata"
"""The store's own metadata registry (WALLCLOCK); reserved, never created or read by callers."""

MAX_TTL_SECONDS = 630_720_000  # Cassandra's limit: 20 years
MAX_SPLIT_PARTS = 1 << 16


# ----- tables --------------------------------------------------------------------------------------
def check_table(table: str) -> str:
    """validate_table_name plus the names the store reserves for itself."""
    validate_table_name(table)
    if table.startswith(RESERVED_PREFIX):
        raise InvalidInputError(
            f"invalid table name {table!r}: the prefix {RESERVED_PREFIX!r} is reserved for engine-internal tables"
        )
    if table == METADATA_TABLE:
        raise InvalidInputError(f"invalid table name {table!r}: reserved for the store's metadata registry")
    return table


def check_metadata(metadata: object) -> TableMetadata:
    if not isinstance(metadata, TableMetadata):
        raise InvalidInputError(f"metadata must be a TableMetadata, got {type(metadata).__name__}")
    strategy = SweepStrategy.parse(metadata.strategy)
    try:
        mode = WriteMode(metadata.write_mode)
    except ValueError:
        raise InvalidInputError(f"unknown write mode {metadata.write_mode!r}") from None
    return TableMetadata(strategy=strategy, write_mode=mode, cassandra_options=normalize_cassandra_options(
        metadata.cassandra_options))


def check_write_mode(meta: TableMetadata, table: str, op: str, modes: tuple[WriteMode, ...]) -> TableMetadata:
    """``meta`` when its write mode is one of ``modes`` (the modes ``op`` is allowed on), else InvalidInputError."""
    if meta.write_mode not in modes:
        allowed = " or ".join(m.value.upper() for m in modes)
        raise InvalidInputError(
            f"{op} is not allowed on table {table!r}: its write mode is {meta.write_mode.value.upper()}, "
            f"{op} needs {allowed}"
        )
    return meta


def check_fresh_timestamp_supplier(supplier: object) -> None:
    if not callable(supplier):
        raise InvalidInputError("the fresh timestamp supplier must be callable")


# ----- reads ---------------------------------------------------------------------------------------
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


def check_parts(parts: object) -> int:
    return check_int(parts, "parts", 1, MAX_SPLIT_PARTS)


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


def check_cell_timestamps(cells: object) -> dict[Cell, int]:
    cells = check_mapping(cells, "cells")
    return {validate_cell(cell): check_read_timestamp(ts) for cell, ts in cells.items()}


# ----- writes --------------------------------------------------------------------------------------
def check_write_timestamp(ts: object) -> int:
    """Atlas start timestamps of written versions: 0 <= ts < MAX_TIMESTAMP (readers use ``ts < bound``)."""
    return check_int(ts, "write timestamp", 0, MAX_TIMESTAMP - 1)


def check_version_timestamp(ts: object) -> int:
    """A stored version's timestamp: a sentinel (-1) or a start timestamp."""
    return check_int(ts, "version timestamp", LWT_TIMESTAMP, MAX_TIMESTAMP)


def check_ttl(ttl: object) -> int | None:
    if ttl is None:
        return None
    return check_int(ttl, "ttl_seconds", 1, MAX_TTL_SECONDS)


def check_mapping(values: object, what: str) -> Mapping:
    if not isinstance(values, Mapping):
        raise InvalidInputError(f"{what} must be a mapping, got {type(values).__name__}")
    return values


def check_values(values: object) -> dict[Cell, bytes]:
    """Mapping[Cell, bytes] -> a validated dict."""
    values = check_mapping(values, "values")
    return {validate_cell(cell): validate_value(value) for cell, value in values.items()}


def check_cells(cells: object) -> list[Cell]:
    if isinstance(cells, (bytes, str)) or not isinstance(cells, Iterable):
        raise InvalidInputError(f"cells must be an iterable of (row, column) pairs, got {type(cells).__name__}")
    out: dict[Cell, None] = {}
    for cell in cells:
        out[validate_cell(cell)] = None
    return list(out)


def check_versions(versions: object) -> list[tuple[Cell, int]]:
    if isinstance(versions, (bytes, str)) or not isinstance(versions, Iterable):
        raise InvalidInputError("versions must be an iterable of (cell, timestamp) pairs")
    items: Iterable[object]
    if isinstance(versions, Mapping):
        items = versions.items()
    else:
        items = versions
    out: dict[tuple[Cell, int], None] = {}
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise InvalidInputError(f"a version is a (cell, timestamp) pair, got {item!r}")
        out[(validate_cell(item[0]), check_version_timestamp(item[1]))] = None
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


# ----- what the backends' parts share ----------------------------------------------------------------
def group_by_row(cells: Iterable[Cell]) -> dict[bytes, list[Cell]]:
    groups: dict[bytes, list[Cell]] = defaultdict(list)
    for cell in cells:
        groups[cell.row].append(cell)
    return groups


def describe_cells(cells: Iterable[Cell], limit: int = 5) -> str:
    cells = list(cells)
    shown = ", ".join(f"({c.row!r}, {c.col!r})" for c in cells[:limit])
    more = f" and {len(cells) - limit} more" if len(cells) > limit else ""
    return f"[{shown}{more}]"


# ----- Cassandra table options ---------------------------------------------------------------------

COMPACTION_CLASSES = (
    "SizeTieredCompactionStrategy",
    "LeveledCompactionStrategy",
    "TimeWindowCompactionStrategy",
    "UnifiedCompactionStrategy",
)
COMPRESSION_CLASSES = ("LZ4Compressor",)
ALLOWED_OPTIONS = (
    "bloom_filter_fp_chance",
    "min_index_interval",
    "max_index_interval",
    "gc_grace_seconds",
    "compression",
    "chunk_length_in_kb",
    "compaction",
)


def _float_option(name: str, value: object, lo: float, hi: float) -> float:
    return check_float(value, f"cassandra option {name}", lo, hi)


def _int_option(name: str, value: object, lo: int, hi: int) -> int:
    return check_int(value, f"cassandra option {name}", lo, hi)


def _chunk_kb(value: object) -> int:
    kb = _int_option("chunk_length_in_kb", value, 1, 1 << 20)
    if kb & (kb - 1):
        raise InvalidInputError(f"cassandra option chunk_length_in_kb = {kb} must be a power of two")
    return kb


def normalize_cassandra_options(options: object) -> dict:
    """Validate ``TableMetadata.cassandra_options`` against the allow-list; return the canonical form.

    Accepted (anything else raises InvalidInputError):

    * ``bloom_filter_fp_chance``: number in (0, 1]
    * ``min_index_interval`` / ``max_index_interval``: int >= 1 (min <= max)
    * ``gc_grace_seconds``: int >= 0
    * ``compression``: ``{"class": "LZ4Compressor", "chunk_length_in_kb": <power of two>}``, or the
      shorthand ``chunk_length_in_kb: <int>`` (canonicalised into ``compression``)
    * ``compaction``: a class name (``"LeveledCompactionStrategy"``) or ``{"class": name}``; one of
      SizeTiered, Leveled, TimeWindow, Unified.
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise InvalidInputError(f"cassandra_options must be a mapping, got {type(options).__name__}")
    out: dict = {}
    for name, value in options.items():
        if name not in ALLOWED_OPTIONS:
            raise InvalidInputError(
                f"cassandra option {name!r} is not allowed; allowed: {', '.join(ALLOWED_OPTIONS)}"
            )
        if name == "bloom_filter_fp_chance":
            out[name] = _float_option(name, value, 0.0, 1.0)
        elif name in ("min_index_interval", "max_index_interval"):
            out[name] = _int_option(name, value, 1, 1 << 30)
        elif name == "gc_grace_seconds":
            out[name] = _int_option(name, value, 0, MAX_TTL_SECONDS)
        elif name == "chunk_length_in_kb":
            out.setdefault("compression", {"class": "LZ4Compressor"})["chunk_length_in_kb"] = _chunk_kb(value)
        elif name == "compression":
            if not isinstance(value, Mapping):
                raise InvalidInputError("cassandra option compression must be a mapping")
            extra = set(value) - {"class", "chunk_length_in_kb"}
            if extra:
                raise InvalidInputError(f"compression sub-options {sorted(extra)} are not allowed")
            cls = value.get("class", "LZ4Compressor")
            if cls not in COMPRESSION_CLASSES:
                raise InvalidInputError(f"compression class {cls!r} is not allowed; allowed: LZ4Compressor")
            comp = out.setdefault("compression", {})
            comp["class"] = cls
            if "chunk_length_in_kb" in value:
                comp["chunk_length_in_kb"] = _chunk_kb(value["chunk_length_in_kb"])
        elif name == "compaction":
            if isinstance(value, str):
                cls = value
            elif isinstance(value, Mapping) and set(value) == {"class"}:
                cls = value["class"]
            else:
                raise InvalidInputError("cassandra option compaction must be a class name or {'class': name}")
            if cls not in COMPACTION_CLASSES:
                raise InvalidInputError(
                    f"compaction class {cls!r} is not allowed; allowed: {', '.join(COMPACTION_CLASSES)}"
                )
            out["compaction"] = {"class": cls}
    lo, hi = out.get("min_index_interval"), out.get("max_index_interval")
    if lo is not None and hi is not None and lo > hi:
        raise InvalidInputError(f"min_index_interval {lo} exceeds max_index_interval {hi}")
    return out


def render_cassandra_options(options: Mapping) -> list[str]:
    """CQL ``WITH`` clauses for canonical (already validated) options. Only typed values are rendered."""
    clauses = []
    for name in ("bloom_filter_fp_chance", "min_index_interval", "max_index_interval", "gc_grace_seconds"):
        if name in options:
            value = options[name]
            clauses.append(f"{name} = {float(value)!r}" if isinstance(value, float) else f"{name} = {int(value)}")
    if "compression" in options:
        comp = options["compression"]
        parts = [f"'class': '{COMPRESSION_CLASSES[COMPRESSION_CLASSES.index(comp['class'])]}'"]
        if "chunk_length_in_kb" in comp:
            parts.append(f"'chunk_length_in_kb': {int(comp['chunk_length_in_kb'])}")
        clauses.append("compression = {" + ", ".join(parts) + "}")
    if "compaction" in options:
        cls = COMPACTION_CLASSES[COMPACTION_CLASSES.index(options["compaction"]["class"])]
        clauses.append(f"compaction = {{'class': '{cls}'}}")
    return clauses
