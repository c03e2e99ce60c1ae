"""The key-value layer: one contract (:mod:`.api`, on the cells of :mod:`.cells`), two backends (Cassandra,
embedded SQLite), each composed of parts on one session.

Backends are imported lazily so that using the SQLite store does not need cassandra-driver loaded.
Nothing here imports Airflow.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .address import StoreAddress
from .api import KeyValueService
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
from .opening import open_kvs
from .scrub import redact_url
from .tables import SweepStrategy, TableMetadata, WriteMode, validate_table_name

if TYPE_CHECKING:  # for readers and type checkers; at run time __getattr__ below imports them on first use
    from .cassandra import CassandraKeyValueService
    from .sqlite import SqliteKeyValueService

__all__ = [
    "LWT_TIMESTAMP",
    "MAX_CELL_NAME_BYTES",
    "MAX_TIMESTAMP",
    "MAX_VALUE_BYTES",
    "SENTINEL_TIMESTAMP",
    "Cell",
    "CassandraKeyValueService",
    "KeyValueService",
    "ScanRange",
    "SqliteKeyValueService",
    "StoreAddress",
    "SweepStrategy",
    "TableMetadata",
    "Value",
    "WriteMode",
    "open_kvs",
    "redact_url",
    "validate_cell",
    "validate_table_name",
    "validate_value",
]


def __getattr__(name: str) -> type[KeyValueService]:
    if name == "CassandraKeyValueService":
        from .cassandra import CassandraKeyValueService

        return CassandraKeyValueService
    if name == "SqliteKeyValueService":
        from .sqlite import SqliteKeyValueService

        return SqliteKeyValueService
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
