"""The embedded key-value store: one SQLite file, safe for several threads and processes on one machine.

Layout: one physical table per Atlas table, ``"kvs_<name>" (r BLOB, c BLOB, ts INTEGER, v BLOB, exp INTEGER,
PRIMARY KEY (r, c, ts)) WITHOUT ROWID``, plus the registry ``kvs_meta (name, metadata JSON)``. Blobs compare
with memcmp, so row and column order is unsigned byte order, as on Cassandra. LWT and WALLCLOCK cells live at
``ts = -1``; ``exp`` (epoch milliseconds) is set only by WALLCLOCK puts with a TTL.

Concurrency: WAL journal, a busy timeout, one connection per thread (``threading.local``), recreated after a
fork (``os.getpid()`` check). Every write is one ``BEGIN IMMEDIATE`` transaction, so put_unless_exists and
check_and_set are atomic across processes. Multi-statement reads run in one read transaction (a snapshot).

SQLite has no write times: deletes are immediate ``DELETE`` statements, so the service keeps no fresh
timestamp supplier (``set_fresh_timestamp_supplier`` only checks it; spec 002 concerns Cassandra only).

Modules, one concern each: :mod:`.files` (path checks, names, shared SQL, the connection class),
:mod:`.database` (:class:`~.database.SqliteDatabase`, the one door to SQLite the parts share: per-thread
connections, transactions, error translation), the parts the contract's methods call once
:mod:`airflow_atlas.kvs.api` has checked the arguments - :mod:`.schema` (tables, the registry, the check
that a file is a store), :mod:`.reads`, :mod:`.writes` (LOGICAL writes) and :mod:`.lwt` (LWT and WALLCLOCK
tables) -, and :mod:`.service` (:class:`SqliteKeyValueService`: construction, lifecycle, file operations).
"""
from __future__ import annotations

from .files import check_path
from .service import SqliteKeyValueService

__all__ = ["SqliteKeyValueService", "check_path"]
