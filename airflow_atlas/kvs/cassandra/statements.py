"""The CQL of an Atlas table on Cassandra: identifiers, the table's DDL and every statement kind.

An Atlas table is the CQL table ``(key blob, column1 blob, column2 bigint, value blob, PRIMARY KEY (key,
column1, column2)) WITH CLUSTERING ORDER BY (column1 ASC, column2 ASC)``. User tables keep their name;
engine-internal tables (``_x``) are stored as ``atlas_x`` because CQL identifiers cannot start with an
underscore (so user names starting with ``atlas_`` are refused). Identifiers are validated and quoted;
every value is a bound parameter of a prepared statement.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from cassandra.metadata import Murmur3Token

from ...errors import InvalidInputError
from ..api import LWT_TIMESTAMP, SENTINEL_TIMESTAMP
from ..consistency import Operation
from ..tables import validate_table_name

RING_MIN = -(1 << 63)
"""Murmur3 tokens run over (RING_MIN, RING_MAX]; no key has token RING_MIN."""
RING_MAX = (1 << 63) - 1
REGISTRY_COLUMN = b"metadata"
"""Column of the metadata registry (row = table name, value = TableMetadata JSON)."""

_KEYSPACE = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
_DATACENTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")


class StatementKind(NamedTuple):
    """One statement template: CQL with ``{t}`` for the quoted table, the operation whose consistency level
    it runs at unless its caller names another, whether it is a lightweight transaction, idempotence."""

    cql: str
    operation: Operation
    lwt: bool
    idempotent: bool


READ, WRITE, SERIAL_READ, LWT_COMMIT = Operation.DATA_READ, Operation.DATA_WRITE, Operation.SERIAL, Operation.LWT_COMMIT

KINDS: dict[str, StatementKind] = {
    "put": StatementKind("INSERT INTO {t} (key, column1, column2, value) VALUES (?, ?, ?, ?) USING TIMESTAMP ?", WRITE, False, True),
    "get_latest": StatementKind(
        "SELECT column2, value FROM {t} WHERE key = ? AND column1 = ? AND column2 < ?"
        " ORDER BY column1 DESC, column2 DESC LIMIT 1",
        READ, False, True),
    "get_ts": StatementKind("SELECT column2 FROM {t} WHERE key = ? AND column1 = ? AND column2 < ?", READ, False, True),
    "get_ts_in": StatementKind(
        "SELECT key, column2 FROM {t} WHERE key IN ? AND column1 = ? AND column2 < ?", READ, False, True),
    "rc": StatementKind("SELECT column1, column2, value FROM {t} WHERE key = ?", READ, False, True),
    "rc_s": StatementKind("SELECT column1, column2, value FROM {t} WHERE key = ? AND column1 >= ?", READ, False, True),
    "rc_e": StatementKind("SELECT column1, column2, value FROM {t} WHERE key = ? AND column1 < ?", READ, False, True),
    "rc_se": StatementKind(
        "SELECT column1, column2, value FROM {t} WHERE key = ? AND column1 >= ? AND column1 < ?", READ, False, True),
    "delete": StatementKind(
        "DELETE FROM {t} USING TIMESTAMP ? WHERE key = ? AND column1 = ? AND column2 = ?", WRITE, False, True),
    "delete_range": StatementKind(
        "DELETE FROM {t} USING TIMESTAMP ? WHERE key = ? AND column1 = ? AND column2 >= ? AND column2 <= ?",
        WRITE, False, True),
    "sentinel": StatementKind(
        f"INSERT INTO {{t}} (key, column1, column2, value) VALUES (?, ?, {SENTINEL_TIMESTAMP}, ?) USING TIMESTAMP ?",
        WRITE, False, True),
    "delete_row": StatementKind("DELETE FROM {t} USING TIMESTAMP ? WHERE key = ?", WRITE, False, True),
    "scan": StatementKind(
        "SELECT key, column1, column2, value FROM {t} WHERE token(key) > ? AND token(key) <= ?", READ, False, True),
    "lwt_insert": StatementKind(
        f"INSERT INTO {{t}} (key, column1, column2, value) VALUES (?, ?, {LWT_TIMESTAMP}, ?) IF NOT EXISTS",
        LWT_COMMIT, True, False),
    "lwt_update": StatementKind(
        f"UPDATE {{t}} SET value = ? WHERE key = ? AND column1 = ? AND column2 = {LWT_TIMESTAMP} IF value = ?",
        LWT_COMMIT, True, False),
    "lwt_delete": StatementKind(
        f"DELETE FROM {{t}} WHERE key = ? AND column1 = ? AND column2 = {LWT_TIMESTAMP} IF value = ?",
        LWT_COMMIT, True, False),
    "lwt_get": StatementKind(f"SELECT value FROM {{t}} WHERE key = ? AND column1 = ? AND column2 = {LWT_TIMESTAMP}", READ, False, True),
    "lwt_get_serial": StatementKind(
        f"SELECT value FROM {{t}} WHERE key = ? AND column1 = ? AND column2 = {LWT_TIMESTAMP}", SERIAL_READ, False, True),
    "lwt_row_serial": StatementKind("SELECT column1, column2, value FROM {t} WHERE key = ?", SERIAL_READ, False, True),
    "wc_put": StatementKind(f"INSERT INTO {{t}} (key, column1, column2, value) VALUES (?, ?, {LWT_TIMESTAMP}, ?)", WRITE, False, True),
    "wc_put_ttl": StatementKind(
        f"INSERT INTO {{t}} (key, column1, column2, value) VALUES (?, ?, {LWT_TIMESTAMP}, ?) USING TTL ?",
        WRITE, False, True),
    "wc_delete": StatementKind(f"DELETE FROM {{t}} WHERE key = ? AND column1 = ? AND column2 = {LWT_TIMESTAMP}", WRITE, False, True),
    "wc_row_s": StatementKind("SELECT column1, column2, value FROM {t} WHERE key = ? AND column1 >= ?", READ, False, True),
    "all": StatementKind("SELECT key, column1, value FROM {t}", READ, False, True),
}

TABLE_DDL = (
    "CREATE TABLE IF NOT EXISTS {t} (key blob, column1 blob, column2 bigint, value blob,"
    " PRIMARY KEY (key, column1, column2)) WITH CLUSTERING ORDER BY (column1 ASC, column2 ASC)"
)
GC_GRACE_QUERY = "SELECT gc_grace_seconds FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s"


def validate_keyspace(keyspace: str) -> str:
    if not isinstance(keyspace, str) or not _KEYSPACE.match(keyspace):
        raise InvalidInputError(
            f"invalid keyspace {keyspace!r}: use 1-48 lower-case letters, digits or underscores, starting with a letter"
        )
    return keyspace


def validate_datacenter(datacenter: str | None) -> str | None:
    if datacenter is not None and not (isinstance(datacenter, str) and _DATACENTER.match(datacenter)):
        raise InvalidInputError(f"invalid datacenter name {datacenter!r}")
    return datacenter


def keyspace_ddl(keyspace: str, replication_factor: int, datacenter: str | None) -> str:
    if datacenter is not None:
        replication = f"{{'class': 'NetworkTopologyStrategy', '{validate_datacenter(datacenter)}': {replication_factor}}}"
    else:
        replication = f"{{'class': 'SimpleStrategy', 'replication_factor': {replication_factor}}}"
    return f'CREATE KEYSPACE IF NOT EXISTS "{validate_keyspace(keyspace)}" WITH replication = {replication}'


def physical_table_name(table: str) -> str:
    """CQL name of an Atlas table: ``_x`` -> ``atlas_x``; user tables keep their name."""
    validate_table_name(table)
    return "atlas" + table if table.startswith("_") else table


def quoted(keyspace: str, phys: str) -> str:
    return f'"{keyspace}"."{phys}"'


def row_tuple(row: tuple | dict[str, object]) -> tuple:
    """Rows as tuples whatever the session's row factory (tuple, named tuple or dict)."""
    return tuple(row.values()) if isinstance(row, dict) else row


def token(key: bytes) -> int:
    return Murmur3Token.hash_fn(key)  # normalises Long.MIN_VALUE to Long.MAX_VALUE like the partitioner
