"""The embedded store's file, connections and names: path checks, the physical table name, the SQL
shared by the other modules, and the connection class (weakly referenceable, kept across fork)."""
from __future__ import annotations

import os
import sqlite3
import time

from ...errors import InvalidInputError

META = "kvs_meta"
MAX_NAME_BYTES = 255
NOT_EXPIRED = "(exp IS NULL OR exp > ?)"
PURGE_INTERVAL_S = 60.0


INHERITED: list = []
"""Connections inherited through fork: referenced forever so the child never closes the parent's handles."""


SENTINEL_SQL = "INSERT OR REPLACE INTO {t} (r, c, ts, v, exp) VALUES (?, ?, ?, X'', NULL)"
DELETE_RANGE_SQL = "DELETE FROM {t} WHERE r = ? AND c = ? AND ts >= ? AND ts <= ?"


def optional_filters(*conditions: tuple[str, object]) -> tuple[str, list]:
    """``" AND <sql>"`` for each ``(sql, value)`` whose value is not None (the value is its one ``?``), and
    those values in order: the optional bounds of a query (column or row ranges, resume positions)."""
    present = [(sql, value) for sql, value in conditions if value is not None]
    return "".join(f" AND {sql}" for sql, _ in present), [value for _, value in present]


class WeakConnection(sqlite3.Connection):
    """A connection that can be weakly referenced: a thread's connection closes when the thread ends."""


def now_ms() -> int:
    return int(time.time() * 1000)


def check_path(path: str) -> str:
    """The absolute path of a store file, or InvalidInputError naming the path: a NUL byte, a file or
    directory name over 255 bytes (the usual file-system limit) or a directory."""
    if "\x00" in path:
        raise InvalidInputError(f"sqlite path {path!r} contains a NUL byte")
    path = os.path.abspath(path)
    for part in path.split(os.sep):
        size = len(os.fsencode(part))
        if size > MAX_NAME_BYTES:
            raise InvalidInputError(
                f"sqlite path {path!r}: the name {part[:32]!r}... is {size} bytes long (at most {MAX_NAME_BYTES})"
            )
    if os.path.isdir(path):
        raise InvalidInputError(f"sqlite path {path!r} is a directory, not a database file")
    return path


def why_unopenable(path: str) -> str:
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        return f"{parent!r} is not a directory"
    if os.path.exists(path) and not os.access(path, os.R_OK | os.W_OK):
        return "the file is not readable and writable by this user"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"the directory {parent!r} is not writable by this user"
    return "the location cannot hold a database file"


def physical_name(table: str) -> str:
    """Quoted physical name of an Atlas table. ``table`` must already be validated."""
    return f'"kvs_{table}"'
