"""Schema and metadata of the Cassandra key-value service (its :class:`~airflow_atlas.kvs.api.Tables` part):
the keyspace, the CQL tables, the metadata registry and the gc_grace guard.

The metadata registry is the WALLCLOCK table ``atlas_metadata`` (row = table name, column ``metadata``,
value = TableMetadata JSON), cached in-process. Creating a swept user table (CONSERVATIVE, THOROUGH) with
``gc_grace_seconds`` below the repair interval, or switching such a table to a swept strategy, is refused
by :class:`~airflow_atlas.kvs.consistency.GcGraceGuard` before anything is written; internal tables keep
their own options (the registry's ``gc_grace_seconds = 0`` is deliberate).
"""
from __future__ import annotations

import json
import time
from typing import cast

from ...errors import InvalidInputError, StoreNotInitializedError, TableNotFoundError
from .. import _common as C
from ..api import Tables
from ..consistency import CASSANDRA_DEFAULT_GC_GRACE_SECONDS, ConsistencyPolicy, GcGraceGuard, multi_datacenter_problems
from ..tables import SweepStrategy, TableMetadata, WriteMode
from .errors import says_missing
from .session import CqlSession
from .statements import (
    GC_GRACE_QUERY,
    REGISTRY_COLUMN,
    TABLE_DDL,
    keyspace_ddl,
    physical_table_name,
    row_tuple,
)
from .topology import keyspace_datacenters


class CassandraTables(Tables):
    """The keyspace's Atlas tables and their metadata registry, on the service's :class:`~.session.CqlSession`.
    ``metadata_cache_seconds``: how stale :meth:`metadata` may be with respect to other processes."""

    def __init__(
        self,
        cql: CqlSession,
        consistency: ConsistencyPolicy,
        gc_grace_guard: GcGraceGuard,
        *,
        ddl_timeout: float,
        metadata_cache_seconds: float,
    ):
        self._cql = cql
        self.keyspace = cql.keyspace
        self.consistency = consistency
        self.gc_grace_guard = gc_grace_guard
        self._ddl_timeout = ddl_timeout
        self._meta_ttl = metadata_cache_seconds
        self._meta_cache: dict[str, tuple[TableMetadata, float]] = {}
        cql.when_table_gone(lambda table: self._meta_cache.pop(table, None))

    # ----- the keyspace and the registry (when the service opens) -----------------------------------
    def create_keyspace(self, rf: int, datacenter: str | None) -> None:
        """SimpleStrategy with ``rf`` replicas, or NetworkTopologyStrategy in ``datacenter``."""
        self._cql.execute(
            "create_keyspace", None, keyspace_ddl(self.keyspace, rf, datacenter), timeout=self._ddl_timeout
        )

    def check_datacenters(self, datacenter: str | None) -> None:
        """Refuse a policy that is unsafe for the keyspace's datacenters
        (:func:`~airflow_atlas.kvs.consistency.multi_datacenter_problems`), and a ``datacenter`` (the local
        one) that holds no replica of a NetworkTopologyStrategy keyspace."""
        datacenters = keyspace_datacenters(self._cql.driver().cluster, self.keyspace)
        problems = multi_datacenter_problems(self.consistency, datacenters)
        if datacenter is not None and datacenters and datacenters.get(datacenter, 0) < 1:
            problems.append(
                f"datacenter={datacenter} (the datacenter this process runs in) holds no replica of keyspace "
                f"{self.keyspace!r} (replicas: {', '.join(f'{dc}: {rf}' for dc, rf in sorted(datacenters.items()))})"
            )
        if problems:
            raise InvalidInputError(f"keyspace {self.keyspace!r}: " + "; ".join(problems))

    def ensure_registry(self, create: bool = True) -> None:
        """Create the registry table if absent; ``create=False`` (open an existing store only): raise
        StoreNotInitializedError instead, having written nothing."""
        phys = physical_table_name(C.METADATA_TABLE)
        if self._physical_exists(phys):
            return
        if not create:
            if self._cql.driver().cluster.metadata.keyspaces.get(self.keyspace) is None:
                raise StoreNotInitializedError(f"keyspace {self.keyspace!r} does not exist")
            raise StoreNotInitializedError(f"keyspace {self.keyspace!r} holds no Atlas store (no {C.METADATA_TABLE} table)")
        try:
            self._create_physical(phys, [], "open", None)
        except InvalidInputError as exc:
            if says_missing(str(exc)):
                raise InvalidInputError(
                    f"keyspace {self.keyspace!r} does not exist (create it, or pass create_keyspace=True)"
                ) from None
            raise

    def _physical_exists(self, phys: str) -> bool:
        ks = self._cql.driver().cluster.metadata.keyspaces.get(self.keyspace)
        return ks is not None and phys in ks.tables

    def _create_physical(self, phys: str, option_clauses: list[str], op: str, table: str | None) -> None:
        cql = TABLE_DDL.format(t=self._cql.quoted(phys))
        cql += "".join(f" AND {clause}" for clause in option_clauses)
        self._cql.execute(op, table, cql, timeout=self._ddl_timeout)

    # ----- metadata --------------------------------------------------------------------------------
    def _load_meta(self, table: str, op: str) -> TableMetadata | None:
        rs = self._cql.execute(
            op, table, self._cql.prepare(C.METADATA_TABLE, "lwt_get"), (table.encode(), REGISTRY_COLUMN)
        )
        row = rs.one()
        if row is None:
            self._meta_cache.pop(table, None)
            return None
        meta = TableMetadata.from_json(json.loads(row_tuple(row)[0]))
        self._meta_cache[table] = (meta, time.monotonic())
        return meta

    def _store_meta(self, table: str, meta: TableMetadata, op: str) -> None:
        value = json.dumps(meta.to_json(), sort_keys=True).encode()
        self._cql.execute(
            op, table, self._cql.prepare(C.METADATA_TABLE, "wc_put"), (table.encode(), REGISTRY_COLUMN, value)
        )
        self._meta_cache[table] = (meta, time.monotonic())

    def meta(self, table: str, op: str) -> TableMetadata:
        """Cached metadata for write-mode checks (a table's write mode never changes)."""
        C.check_table(table)
        hit = self._meta_cache.get(table)
        if hit is not None:
            return hit[0]
        meta = self._load_meta(table, op)
        if meta is None:
            raise TableNotFoundError(f"table {table!r} does not exist in keyspace {self.keyspace!r}")
        return meta

    def create(self, table: str, metadata: TableMetadata) -> None:
        """Create the CQL table (with the allow-listed ``cassandra_options``) and record its metadata.
        Re-creating updates strategy and options (options are applied with ALTER TABLE); a different
        write mode raises InvalidInputError."""
        phys = physical_table_name(table)
        existing = self._load_meta(table, "create_table")
        if existing is not None and existing.write_mode != metadata.write_mode:
            raise InvalidInputError(
                f"table {table!r} exists with write mode {existing.write_mode.value.upper()}; "
                f"the write mode of an existing table cannot change to {metadata.write_mode.value.upper()}"
            )
        exists = self._physical_exists(phys)
        if not table.startswith("_") and metadata.write_mode is WriteMode.LOGICAL:
            # Internal tables keep their own options (the registry's gc_grace_seconds 0 is deliberate).
            # An int when present: C.check_metadata validated the options above.
            grace = cast("int | None", metadata.cassandra_options.get("gc_grace_seconds"))
            if grace is None:
                grace = self._live_gc_grace(phys, "create_table", table) if exists else None
            if grace is None:
                grace = CASSANDRA_DEFAULT_GC_GRACE_SECONDS
            self.gc_grace_guard.check(table, metadata.strategy.value, grace)
        if exists and existing == metadata:
            # Nothing to change: no write at all, so a role with only SELECT on the registry (the sweeper of
            # a least-privilege deployment, airflow_atlas/grants.py) can open a store whose tables exist.
            return
        clauses = C.render_cassandra_options(metadata.cassandra_options)
        if exists:
            if clauses and (existing is None or dict(existing.cassandra_options) != dict(metadata.cassandra_options)):
                self._cql.execute(
                    "create_table", table, f"ALTER TABLE {self._cql.quoted(phys)} WITH {' AND '.join(clauses)}",
                    timeout=self._ddl_timeout,
                )
        else:
            self._create_physical(phys, clauses, "create_table", table)
        self._store_meta(table, metadata, "create_table")

    def drop(self, table: str) -> None:
        phys = physical_table_name(table)
        self._cql.execute(
            "drop_table", table, self._cql.prepare(C.METADATA_TABLE, "wc_delete"), (table.encode(), REGISTRY_COLUMN)
        )
        self._cql.table_gone(table)
        self._cql.execute(
            "drop_table", table, f"DROP TABLE IF EXISTS {self._cql.quoted(phys)}", timeout=self._ddl_timeout
        )
        self._cql.table_gone(table)

    def truncate(self, table: str) -> None:
        phys = physical_table_name(table)
        self._cql.execute(
            "truncate_table", table, f"TRUNCATE TABLE {self._cql.quoted(phys)}", timeout=self._ddl_timeout
        )

    def exists(self, table: str) -> bool:
        return self._load_meta(table, "table_exists") is not None

    def metadata(self, table: str) -> TableMetadata:
        """At most ``metadata_cache_seconds`` stale with respect to other processes."""
        hit = self._meta_cache.get(table)
        if hit is not None and time.monotonic() - hit[1] < self._meta_ttl:
            return hit[0]
        meta = self._load_meta(table, "get_metadata")
        if meta is None:
            raise TableNotFoundError(f"table {table!r} does not exist in keyspace {self.keyspace!r}")
        return meta

    def set_strategy(self, table: str, strategy: SweepStrategy) -> None:
        meta = self._load_meta(table, "set_sweep_strategy")
        if meta is None:
            raise TableNotFoundError(f"table {table!r} does not exist in keyspace {self.keyspace!r}")
        if not table.startswith("_") and meta.write_mode is WriteMode.LOGICAL:
            grace = self._live_gc_grace(physical_table_name(table), "set_sweep_strategy", table)
            self.gc_grace_guard.check(table, strategy.value, grace)
        self._store_meta(table, TableMetadata(strategy, meta.write_mode, meta.cassandra_options), "set_sweep_strategy")

    def names(self) -> list[str]:
        rs = self._cql.execute("list_tables", None, self._cql.prepare(C.METADATA_TABLE, "all"))
        rows = self._cql.rows("list_tables", None, rs)
        return sorted({key.decode() for key, col, _ in rows if col == REGISTRY_COLUMN})

    def gc_grace_seconds(self, table: str) -> int | None:
        """The live ``gc_grace_seconds`` of the table, read from ``system_schema.tables`` (None if the CQL
        table is missing though registered)."""
        self.meta(table, "gc_grace_seconds")
        return self._live_gc_grace(physical_table_name(table), "gc_grace_seconds", table)

    def _live_gc_grace(self, phys: str, op: str, table: str) -> int | None:
        rs = self._cql.execute(op, table, GC_GRACE_QUERY, (self.keyspace, phys))
        row = rs.one()
        return None if row is None else int(row_tuple(row)[0])

    def space_used_bytes(self, table: str) -> int | None:
        """None: the driver cannot see disk usage (the Airflow layer asks nodetool tablestats)."""
        return None
