"""The Cassandra key-value service (cassandra-driver, protocol v5 against Cassandra 5.0).

An Atlas table is the CQL table ``(key blob, column1 blob, column2 bigint, value blob, PRIMARY KEY (key,
column1, column2)) WITH CLUSTERING ORDER BY (column1 ASC, column2 ASC)``. User tables keep their name;
engine-internal tables (``_x``) are stored as ``atlas_x`` because CQL identifiers cannot start with an
underscore (so user names starting with ``atlas_`` are refused). Identifiers are validated and quoted;
every value is a bound parameter of a prepared statement, cached per (table, statement).

Write modes (see :mod:`airflow_atlas.kvs.api`):

* LOGICAL: ``put`` uses ``USING TIMESTAMP <atlas ts>``; ``delete``, ``delete_all_timestamps``,
  ``add_gc_sentinels`` and ``delete_rows`` take ONE fresh timestamp from the supplier per call (spec 002).
* LWT: ``put_unless_exists`` / ``check_and_set`` are lightweight transactions at serial consistency; never
  ``USING TIMESTAMP``.
* WALLCLOCK: plain writes at client (driver) time, optional TTL.

The metadata registry is the WALLCLOCK table ``atlas_metadata`` (row = table name, column ``metadata``,
value = TableMetadata JSON), cached in-process.

Multi-cell operations run concurrently (``cassandra.concurrent.execute_concurrent``). Multi-cell LOGICAL
writes (``put``, ``multi_put``, ``delete``, ``delete_all_timestamps``, ``add_gc_sentinels``,
``delete_rows``) go as small UNLOGGED batches: statements are grouped by replica set (token-aware) and
partition, at most ``batch_partitions`` partitions (default 10, Cassandra's
``unlogged_batch_across_partitions_warn_threshold``) and about ``batch_bytes`` (default 4 KiB, below the
5 KiB ``batch_size_warn_threshold``) per batch; a larger statement goes alone. Every statement keeps its
own ``USING TIMESTAMP``, so a batch writes exactly what the single statements would; like them it is not
atomic across partitions, and any failure fails the call. Write results are not kept, so memory stays
bounded by the in-flight window whatever the size of the call. ``batch_partitions=1`` sends every
statement on its own. Driver failures (no host, timeouts, unavailable replicas) become
StoreUnavailableError naming the operation and table.

Sessions are not fork-safe: a service built from a *cluster factory* (as :meth:`connect` does) rebuilds its
cluster in a forked child; a service built on a caller's Session refuses to run in another process.
"""
from __future__ import annotations

import json
import os
import re
import socket
import struct
import threading
import time
from itertools import islice
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from cassandra import (
    ConfigurationException,
    ConsistencyLevel,
    CoordinationFailure,
    DriverException,
    InvalidRequest,
    OperationTimedOut,
    Timeout,
    Unauthorized,
    Unavailable,
    UnresolvableContactPoints,
)
from cassandra.cluster import NoHostAvailable, Session
from cassandra.concurrent import execute_concurrent
from cassandra.metadata import Murmur3Token
from cassandra.query import BatchStatement, BatchType

from ..errors import (
    InvalidInputError,
    KeyAlreadyExistsError,
    StoreNotInitializedError,
    StoreUnavailableError,
    TableNotFoundError,
)
from . import _common as C
from .api import (
    LWT_TIMESTAMP,
    MAX_TIMESTAMP,
    SENTINEL_TIMESTAMP,
    Cell,
    KeyValueService,
    ScanRange,
    SweepStrategy,
    TableMetadata,
    Value,
    WriteMode,
    validate_cell,
    validate_table_name,
    validate_value,
)

RING_MIN = -(1 << 63)
"""Murmur3 tokens run over (RING_MIN, RING_MAX]; no key has token RING_MIN."""
RING_MAX = (1 << 63) - 1
_KEYSPACE = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
_DATACENTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
_REGISTRY_COLUMN = b"metadata"
_MAX_MESSAGE = 600

# Statement templates: kind -> (CQL with {t} for the quoted table, consistency: "r" | "w", LWT?, idempotent?)
_CQL: dict[str, tuple[str, str, bool, bool]] = {
    "put": ("INSERT INTO {t} (key, column1, column2, value) VALUES (?, ?, ?, ?) USING TIMESTAMP ?", "w", False, True),
    "get_latest": (
        "SELECT column2, value FROM {t} WHERE key = ? AND column1 = ? AND column2 < ?"
        " ORDER BY column1 DESC, column2 DESC LIMIT 1",
        "r", False, True,
    ),
    "get_ts": ("SELECT column2 FROM {t} WHERE key = ? AND column1 = ? AND column2 < ?", "r", False, True),
    "rc": ("SELECT column1, column2, value FROM {t} WHERE key = ?", "r", False, True),
    "rc_s": ("SELECT column1, column2, value FROM {t} WHERE key = ? AND column1 >= ?", "r", False, True),
    "rc_e": ("SELECT column1, column2, value FROM {t} WHERE key = ? AND column1 < ?", "r", False, True),
    "rc_se": (
        "SELECT column1, column2, value FROM {t} WHERE key = ? AND column1 >= ? AND column1 < ?", "r", False, True
    ),
    "delete": (
        "DELETE FROM {t} USING TIMESTAMP ? WHERE key = ? AND column1 = ? AND column2 = ?", "w", False, True
    ),
    "delete_range": (
        "DELETE FROM {t} USING TIMESTAMP ? WHERE key = ? AND column1 = ? AND column2 >= ? AND column2 <= ?",
        "w", False, True,
    ),
    "sentinel": (
        f"INSERT INTO {{t}} (key, column1, column2, value) VALUES (?, ?, {SENTINEL_TIMESTAMP}, ?) USING TIMESTAMP ?",
        "w", False, True,
    ),
    "delete_row": ("DELETE FROM {t} USING TIMESTAMP ? WHERE key = ?", "w", False, True),
    "scan": (
        "SELECT key, column1, column2, value FROM {t} WHERE token(key) > ? AND token(key) <= ?", "r", False, True
    ),
    "lwt_insert": (
        f"INSERT INTO {{t}} (key, column1, column2, value) VALUES (?, ?, {LWT_TIMESTAMP}, ?) IF NOT EXISTS",
        "w", True, False,
    ),
    "lwt_update": (
        f"UPDATE {{t}} SET value = ? WHERE key = ? AND column1 = ? AND column2 = {LWT_TIMESTAMP} IF value = ?",
        "w", True, False,
    ),
    "lwt_delete": (
        f"DELETE FROM {{t}} WHERE key = ? AND column1 = ? AND column2 = {LWT_TIMESTAMP} IF value = ?",
        "w", True, False,
    ),
    "lwt_get": (f"SELECT value FROM {{t}} WHERE key = ? AND column1 = ? AND column2 = {LWT_TIMESTAMP}", "r", False, True),
    "lwt_get_serial": (
        f"SELECT value FROM {{t}} WHERE key = ? AND column1 = ? AND column2 = {LWT_TIMESTAMP}", "serial", False, True
    ),
    "lwt_row_serial": ("SELECT column1, column2, value FROM {t} WHERE key = ?", "serial", False, True),
    "wc_put": (f"INSERT INTO {{t}} (key, column1, column2, value) VALUES (?, ?, {LWT_TIMESTAMP}, ?)", "w", False, True),
    "wc_put_ttl": (
        f"INSERT INTO {{t}} (key, column1, column2, value) VALUES (?, ?, {LWT_TIMESTAMP}, ?) USING TTL ?",
        "w", False, True,
    ),
    "wc_delete": (f"DELETE FROM {{t}} WHERE key = ? AND column1 = ? AND column2 = {LWT_TIMESTAMP}", "w", False, True),
    "wc_row_s": ("SELECT column1, column2, value FROM {t} WHERE key = ? AND column1 >= ?", "r", False, True),
    "all": ("SELECT key, column1, value FROM {t}", "r", False, True),
}


_FORK_LOCK = threading.Lock()


def _reset_fork_lock() -> None:
    global _FORK_LOCK
    _FORK_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_reset_fork_lock)


def validate_keyspace(keyspace: str) -> str:
    if not isinstance(keyspace, str) or not _KEYSPACE.match(keyspace):
        raise InvalidInputError(
            f"invalid keyspace {keyspace!r}: use 1-48 lower-case letters, digits or underscores, starting with a letter"
        )
    return keyspace


def physical_table_name(table: str) -> str:
    """CQL name of an Atlas table: ``_x`` -> ``atlas_x``; user tables keep their name."""
    validate_table_name(table)
    return "atlas" + table if table.startswith("_") else table


_NODELAY = (socket.IPPROTO_TCP, socket.TCP_NODELAY)


def _ensure_tcp_nodelay(cluster) -> None:
    """Add TCP_NODELAY to a not yet connected Cluster's socket options unless they set it already: without
    it a request larger than one TCP segment waits ~40 ms for the delayed ACK (Nagle's algorithm)."""
    options = list(getattr(cluster, "sockopts", None) or [])
    if not any(tuple(o[:2]) == _NODELAY for o in options):
        cluster.sockopts = options + [(*_NODELAY, 1)]


_INT64 = struct.Struct(">q")


def _blob(value) -> bytes:
    if type(value) is bytes:
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"a blob value must be bytes, got {type(value).__name__}")


def _bigint(value) -> bytes:
    if type(value) is not int:
        raise TypeError(f"a bigint value must be an int, got {type(value).__name__}")
    return _INT64.pack(value)


_SERIALIZERS = {"blob": _blob, "bigint": _bigint}


def _serializers_of(ps):
    """One serializer per bind marker of ``ps`` when all of them are blobs or bigints, else None."""
    try:
        names = [col.type.typename for col in ps.column_metadata]
    except AttributeError:
        return None
    if any(name not in _SERIALIZERS for name in names):
        return None
    return tuple(_SERIALIZERS[name] for name in names)


def _tuple(row) -> tuple:
    """Rows as tuples whatever the session's row factory (tuple, named tuple or dict)."""
    return tuple(row.values()) if isinstance(row, dict) else row


def _says_missing(text: str) -> bool:
    return "does not exist" in text or "doesn't exist" in text or "unconfigured table" in text


def _token(key: bytes) -> int:
    return Murmur3Token.hash_fn(key)  # normalises Long.MIN_VALUE to Long.MAX_VALUE like the partitioner


class CassandraKeyValueService(KeyValueService):
    """KeyValueService on one Cassandra keyspace.

    ``session_or_cluster_factory`` is either an existing ``cassandra.cluster.Session`` (for instance from
    Airflow's CassandraHook; the caller keeps ownership and shuts it down), or a zero-argument callable
    returning a ``Cluster`` (or a ``Session``) that this service owns: it is shut down in :meth:`close` and
    rebuilt after a fork. :meth:`connect` builds such a factory from host names and credentials.

    Beyond the contract: ``concurrency`` (in-flight requests per call), ``page_size`` (fetch size for row and
    column reads), ``batch_partitions`` / ``batch_bytes`` (UNLOGGED batches of multi-cell LOGICAL writes, see
    the module docstring; ``batch_partitions=1`` disables them), consistency levels, ``request_timeout`` /
    ``ddl_timeout`` seconds, ``metadata_cache_seconds`` (how stale get_metadata may be across processes),
    ``create_keyspace`` with ``replication_factor`` / ``datacenter``.
    """

    backend = "cassandra"

    def __init__(
        self,
        session_or_cluster_factory: "Session | Callable[[], object]",
        keyspace: str,
        *,
        fresh_timestamp_supplier: Callable[[], int] | None = None,
        concurrency: int = 100,
        page_size: int = 1000,
        batch_partitions: int = 10,
        batch_bytes: int = 4096,
        read_consistency: int = ConsistencyLevel.LOCAL_QUORUM,
        write_consistency: int = ConsistencyLevel.LOCAL_QUORUM,
        serial_consistency: int = ConsistencyLevel.SERIAL,
        request_timeout: float = 30.0,
        ddl_timeout: float = 120.0,
        metadata_cache_seconds: float = 30.0,
        create_keyspace: bool = False,
        replication_factor: int = 1,
        datacenter: str | None = None,
        create_registry: bool = True,
        _secrets: Sequence[str] = (),
    ):
        self.keyspace = validate_keyspace(keyspace)
        replication_factor = C.check_int(replication_factor, "replication_factor", 1, 99)
        if datacenter is not None and not (isinstance(datacenter, str) and _DATACENTER.match(datacenter)):
            raise InvalidInputError(f"invalid datacenter name {datacenter!r}")
        self._concurrency = C.check_int(concurrency, "concurrency", 1, 4096)
        self._page_size = C.check_page_size(page_size)
        self._batch_partitions = C.check_int(batch_partitions, "batch_partitions", 1, 1000)
        self._batch_bytes = C.check_int(batch_bytes, "batch_bytes", 64, 1 << 20)
        self._read_cl = read_consistency
        self._write_cl = write_consistency
        if serial_consistency not in (ConsistencyLevel.SERIAL, ConsistencyLevel.LOCAL_SERIAL):
            raise InvalidInputError("serial_consistency must be SERIAL or LOCAL_SERIAL")
        self._serial_cl = serial_consistency
        self._request_timeout = float(request_timeout)
        self._ddl_timeout = float(ddl_timeout)
        self._meta_ttl = float(metadata_cache_seconds)
        self._secrets = tuple(s for s in _secrets if s)
        self._supplier = None
        if fresh_timestamp_supplier is not None:
            self.set_fresh_timestamp_supplier(fresh_timestamp_supplier)
        self._lock = threading.Lock()
        self._prepared: dict[tuple[str, str], object] = {}
        self._meta_cache: dict[str, tuple[TableMetadata, float]] = {}
        self._closed = False
        self._factory: Callable[[], object] | None = None
        self._cluster = None
        if isinstance(session_or_cluster_factory, Session):
            self._session = session_or_cluster_factory
        elif callable(session_or_cluster_factory):
            self._factory = session_or_cluster_factory
            self._session = self._open_owned()
        else:
            raise InvalidInputError("expected a cassandra-driver Session or a callable returning a Cluster")
        self._pid = os.getpid()
        try:
            if create_keyspace:
                self._create_keyspace(replication_factor, datacenter)
            self._ensure_registry(create=create_registry)
        except BaseException:
            if self._cluster is not None:  # never leak a cluster this service opened
                try:
                    self._cluster.shutdown()
                except Exception:
                    pass
            raise

    # ----- construction ----------------------------------------------------------------------------
    @classmethod
    def connect(
        cls,
        hosts: "str | Sequence[str]",
        *,
        keyspace: str,
        port: int = 9042,
        username: str | None = None,
        password: str | None = None,
        ssl_context=None,
        ssl_options: dict | None = None,
        protocol_version: int = 5,
        replication_factor: int = 1,
        create_keyspace: bool = True,
        datacenter: str | None = None,
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        **options,
    ) -> "CassandraKeyValueService":
        """Build (and own) a Cluster for ``hosts`` and open the service on ``keyspace``.

        ``create_keyspace`` creates it if absent (SimpleStrategy with ``replication_factor``, or
        NetworkTopologyStrategy in ``datacenter`` when given). ``options`` go to the constructor.
        """
        if isinstance(hosts, str):
            hosts = hosts.split(",")
        hosts = [h.strip() for h in hosts] if isinstance(hosts, (list, tuple)) else None
        if not hosts or any(not h or any(ch.isspace() or ch in "/@?#" for ch in h) for h in hosts):
            raise InvalidInputError("hosts must be a non-empty list of host names or addresses")
        validate_keyspace(keyspace)
        port = C.check_int(port, "port", 1, 65535)
        protocol_version = C.check_int(protocol_version, "protocol_version", 3, 6)
        C.check_int(replication_factor, "replication_factor", 1, 99)
        if username is not None and not isinstance(username, str):
            raise InvalidInputError("username must be a string")
        if password is not None and not isinstance(password, str):
            raise InvalidInputError("password must be a string")
        if datacenter is not None and not (isinstance(datacenter, str) and _DATACENTER.match(datacenter)):
            raise InvalidInputError(f"invalid datacenter name {datacenter!r}")

        def factory():
            from cassandra.auth import PlainTextAuthProvider
            from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
            from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
            from cassandra.query import tuple_factory

            profile = ExecutionProfile(
                load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=datacenter)),
                request_timeout=request_timeout,
                row_factory=tuple_factory,
            )
            kwargs: dict = dict(
                contact_points=list(hosts),
                port=port,
                protocol_version=protocol_version,
                execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                connect_timeout=connect_timeout,
                # Without TCP_NODELAY a request larger than one segment (a batch of ~40 cells) waits for
                # the delayed ACK of the previous segment: ~40 ms per call (Nagle's algorithm).
                sockopts=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
            )
            if ssl_context is not None:
                kwargs["ssl_context"] = ssl_context
                if ssl_options:
                    kwargs["ssl_options"] = ssl_options
            if username is not None:
                kwargs["auth_provider"] = PlainTextAuthProvider(username=username, password=password or "")
            return Cluster(**kwargs)

        return cls(
            factory,
            keyspace,
            create_keyspace=create_keyspace,
            replication_factor=replication_factor,
            datacenter=datacenter,
            request_timeout=request_timeout,
            _secrets=(password,) if password else (),
            **options,
        )

    def _open_owned(self):
        try:
            made = self._factory()
        except Exception as exc:
            raise self._translate(exc, "connect", None) from exc
        if isinstance(made, Session):
            self._cluster = made.cluster
            return made
        self._cluster = made
        _ensure_tcp_nodelay(made)  # a factory's Cluster (e.g. the Airflow provider's) may not set it
        try:
            return made.connect()
        except Exception as exc:
            try:
                made.shutdown()
            except Exception:
                pass
            raise self._translate(exc, "connect", None) from exc

    def _create_keyspace(self, rf: int, datacenter: str | None) -> None:
        if datacenter is not None:
            if not _DATACENTER.match(datacenter):
                raise InvalidInputError(f"invalid datacenter name {datacenter!r}")
            replication = f"{{'class': 'NetworkTopologyStrategy', '{datacenter}': {rf}}}"
        else:
            replication = f"{{'class': 'SimpleStrategy', 'replication_factor': {rf}}}"
        self._execute(
            "create_keyspace", None, f'CREATE KEYSPACE IF NOT EXISTS "{self.keyspace}" WITH replication = {replication}',
            timeout=self._ddl_timeout,
        )

    def _ensure_registry(self, create: bool = True) -> None:
        """Create the registry table if absent; ``create=False`` (open an existing store only): raise
        StoreNotInitializedError instead, having written nothing."""
        phys = physical_table_name(C.METADATA_TABLE)
        if self._physical_exists(phys):
            return
        if not create:
            if self._s().cluster.metadata.keyspaces.get(self.keyspace) is None:
                raise StoreNotInitializedError(f"keyspace {self.keyspace!r} does not exist")
            raise StoreNotInitializedError(f"keyspace {self.keyspace!r} holds no Atlas store (no {C.METADATA_TABLE} table)")
        try:
            self._create_physical(phys, [], "open", None)
        except InvalidInputError as exc:
            if _says_missing(str(exc)):
                raise InvalidInputError(
                    f"keyspace {self.keyspace!r} does not exist (create it, or pass create_keyspace=True)"
                ) from None
            raise

    def _physical_exists(self, phys: str) -> bool:
        ks = self._s().cluster.metadata.keyspaces.get(self.keyspace)
        return ks is not None and phys in ks.tables

    def _create_physical(self, phys: str, option_clauses: list[str], op: str, table: str | None) -> None:
        cql = (
            f"CREATE TABLE IF NOT EXISTS {self._q(phys)} (key blob, column1 blob, column2 bigint, value blob,"
            f" PRIMARY KEY (key, column1, column2)) WITH CLUSTERING ORDER BY (column1 ASC, column2 ASC)"
        )
        cql += "".join(f" AND {clause}" for clause in option_clauses)
        self._execute(op, table, cql, timeout=self._ddl_timeout)

    # ----- plumbing --------------------------------------------------------------------------------
    def _s(self) -> Session:
        if self._closed:
            raise StoreUnavailableError(f"the Cassandra key-value service on keyspace {self.keyspace!r} is closed")
        pid = os.getpid()
        if pid != self._pid:
            if self._factory is None:
                raise StoreUnavailableError(
                    f"this Cassandra session was created in process {self._pid}; driver sessions do not survive "
                    f"fork - build the key-value service in process {pid}"
                )
            with _FORK_LOCK:  # re-created in every child, so never inherited in a locked state
                if pid != self._pid:
                    # Drop (never shut down) the parent's cluster: its sockets belong to the parent.
                    self._lock = threading.Lock()
                    self._prepared = {}
                    self._session = self._open_owned()
                    self._pid = pid
        return self._session

    def _q(self, phys: str) -> str:
        return f'"{self.keyspace}"."{phys}"'

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        if len(text) > _MAX_MESSAGE:
            text = text[:_MAX_MESSAGE] + "..."
        return text

    def _translate(self, exc: BaseException, op: str, table: str | None, lwt: bool = False) -> Exception:
        where = f" on table {table!r}" if table else ""
        where += f" (keyspace {self.keyspace!r})" if getattr(self, "keyspace", None) else ""
        detail = self._scrub(f"{type(exc).__name__}: {exc}")
        if isinstance(exc, (ConfigurationException, InvalidRequest)):
            text = str(exc)
            if table and _says_missing(text):
                self._forget(table)
                return TableNotFoundError(f"table {table!r} does not exist in keyspace {self.keyspace!r}")
            return InvalidInputError(f"cassandra {op}{where} was rejected: {detail}")
        if lwt and not isinstance(exc, (Unavailable, UnresolvableContactPoints)):
            # Timeouts, lost connections, CAS contention or unknown server errors: Paxos may have committed.
            return StoreUnavailableError(
                f"cassandra {op}{where} timed out: the lightweight transaction may or may not have been applied; "
                f"read the cell at SERIAL consistency before retrying ({detail})"
            )
        if isinstance(exc, (NoHostAvailable, OperationTimedOut, Unavailable, Timeout, CoordinationFailure)):
            return StoreUnavailableError(f"cassandra {op}{where} failed: {detail}")
        if isinstance(exc, UnresolvableContactPoints):
            return StoreUnavailableError(f"cassandra {op}{where} failed: no contact point could be resolved")
        if isinstance(exc, (Unauthorized, DriverException)):
            return StoreUnavailableError(f"cassandra {op}{where} was refused: {detail}")
        return StoreUnavailableError(f"cassandra {op}{where} failed unexpectedly: {detail}")

    def _forget(self, table: str) -> None:
        self._meta_cache.pop(table, None)
        phys = physical_table_name(table)
        with self._lock:
            for key in [k for k in self._prepared if k[0] == phys]:
                self._prepared.pop(key, None)

    def _execute(self, op: str, table: str | None, statement, params=None, timeout=None, lwt: bool = False):
        try:
            return self._s().execute(statement, params, timeout=timeout or self._request_timeout)
        except (StoreUnavailableError, InvalidInputError):
            raise
        except Exception as exc:
            raise self._translate(exc, op, table, lwt) from exc

    def _concurrent(self, op: str, table: str | None, statements_and_params: list, lwt: bool = False) -> list:
        """Run concurrently; returns the ResultSets in order; raises on the first failure."""
        if not statements_and_params:
            return []
        try:
            results = execute_concurrent(
                self._s(), statements_and_params, concurrency=self._concurrency, raise_on_first_error=True
            )
        except (StoreUnavailableError, InvalidInputError):
            raise
        except Exception as exc:
            raise self._translate(exc, op, table, lwt) from exc
        return [r.result_or_exc for r in results]

    def _write(self, op: str, table: str | None, items: list) -> None:
        """Run the LOGICAL writes ``items`` - ``(prepared statement, params, partition key, size estimate)`` -
        as UNLOGGED batches (see the module docstring), concurrently; raise on the first failure (nothing
        more is sent then). Runs in windows of ``16 * concurrency`` requests whose results are dropped, so
        memory does not grow with the size of the call."""
        if not items:
            return
        statements = self._batches(items)  # lazy: batches are built while earlier ones are in flight
        window = 16 * self._concurrency
        session = self._s()
        sent = [0]

        def counted(it):
            for statement in it:
                sent[0] += 1
                yield statement

        try:
            while True:
                before = sent[0]
                execute_concurrent(
                    session, counted(islice(statements, window)), concurrency=self._concurrency, raise_on_first_error=True
                )
                if sent[0] - before < window:
                    break
        except (StoreUnavailableError, InvalidInputError):
            raise
        except Exception as exc:
            raise self._translate(exc, op, table) from exc

    def _replica_group(self):
        """Key function: partition key -> its replica set (one group when the cluster has one host or no
        token map)."""
        metadata = self._s().cluster.metadata
        token_map = metadata.token_map
        if token_map is None or len(metadata.all_hosts()) <= 1:
            return lambda key: None
        keyspace, token_of = self.keyspace, token_map.token_class.from_key
        return lambda key: tuple(token_map.get_replicas(keyspace, token_of(key)))

    def _batches(self, items: list) -> Iterator:
        """Group ``items`` by replica set and partition into UNLOGGED batches of at most ``batch_partitions``
        partitions and about ``batch_bytes``; a batch of one statement is sent as that statement. Yields
        ``(statement, params)`` lazily."""
        if self._batch_partitions <= 1 or len(items) < 2:
            yield from (self._batch_of([item]) for item in items)
            return
        group_of = self._replica_group()
        groups: dict = {}
        for item in items:  # a partition is (statement's table, partition key); a unit's table is its first's
            table_of = id(item[0] if item[0] is not None else item[1][0][0])
            groups.setdefault(group_of(item[2]), {}).setdefault((table_of, item[2]), []).append(item)
        limit_parts, limit_bytes = self._batch_partitions, self._batch_bytes
        for by_key in groups.values():
            batch: list = []
            parts = size = 0
            for key_items in by_key.values():
                new_partition = True
                for item in key_items:
                    if item[3] > limit_bytes:
                        yield self._batch_of([item])
                        continue
                    if batch and (size + item[3] > limit_bytes or (new_partition and parts >= limit_parts)):
                        yield self._batch_of(batch)
                        batch, parts, size = [], 0, 0
                        new_partition = True
                    if new_partition:
                        parts += 1
                        new_partition = False
                    batch.append(item)
                    size += item[3]
            if batch:
                yield self._batch_of(batch)

    def _batch_of(self, items: list):
        """One request for ``items``: the statement itself when there is one, else an UNLOGGED batch. An item
        whose statement is None is a *unit*: its params are ``(statement, params)`` pairs on one partition
        that must be applied together (a batch applies one partition's statements as one mutation)."""
        if len(items) == 1 and items[0][0] is not None:
            return items[0][0], items[0][1]
        batch = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=self._write_cl)
        add = self._adder(batch)
        for ps, params, _key, _size in items:
            if ps is None:
                for unit_ps, unit_params in params:
                    add(unit_ps, unit_params)
            else:
                add(ps, params)
        if batch.routing_key is None:  # pre-serialized statements carry no routing key: the first partition's
            batch.routing_key = items[0][2]  # (a blob partition key serializes to itself)
            batch.keyspace = self.keyspace
        batch.is_idempotent = True  # explicit write times: re-applying writes the same cells and tombstones
        return batch, None

    def _adder(self, batch):
        """``add(prepared, params)`` for ``batch``. Our write statements bind only blobs and bigints, which
        serialize to the bytes themselves and 8 big-endian bytes; adding them pre-serialized skips the
        driver's per-value bind work (a column-encryption lookup per value: the largest Python cost of a
        sweep). Falls back to ``batch.add`` for any other statement, and always when the cluster has a
        column encryption policy (values must then go through it)."""
        encrypting = self._s().cluster.column_encryption_policy is not None
        append = getattr(batch, "_add_statement_and_params", None)
        if encrypting or append is None:
            return batch.add

        def add(ps, params):
            serializers = ps.__dict__.get("_atlas_serializers", False)
            if serializers is False:
                serializers = _serializers_of(ps)
                ps._atlas_serializers = serializers
            if serializers is None or len(params) != len(serializers):
                batch.add(ps, params)
            else:
                append(True, ps.query_id, [f(v) for f, v in zip(serializers, params)])

        return add

    def _prep(self, table: str, kind: str):
        """The prepared statement ``kind`` for an (already validated) Atlas table."""
        phys = physical_table_name(table)
        key = (phys, kind)
        ps = self._prepared.get(key)
        if ps is not None:
            return ps
        cql, cl, lwt, idempotent = _CQL[kind]
        try:
            ps = self._s().prepare(cql.format(t=self._q(phys)))
        except Exception as exc:
            raise self._translate(exc, "prepare", table) from exc
        if cl == "serial":
            ps.consistency_level = self._serial_cl
        else:
            ps.consistency_level = self._read_cl if cl == "r" else self._write_cl
        if lwt:
            ps.serial_consistency_level = self._serial_cl
        ps.is_idempotent = idempotent
        ps.fetch_size = self._page_size
        with self._lock:
            self._prepared[key] = ps
        return ps

    def _fresh(self, op: str, table: str) -> int:
        if self._supplier is None:
            raise InvalidInputError(
                f"{op} on table {table!r} needs a fresh timestamp (spec 002) but no supplier was set: "
                "call set_fresh_timestamp_supplier() with the timestamp service first"
            )
        ts = self._supplier()
        if not isinstance(ts, int) or isinstance(ts, bool) or not 0 < ts < MAX_TIMESTAMP:
            raise InvalidInputError(f"the fresh timestamp supplier returned {ts!r}, not a positive 64-bit integer")
        return ts

    # ----- lifecycle -------------------------------------------------------------------------------
    def set_fresh_timestamp_supplier(self, supplier: Callable[[], int]) -> None:
        if not callable(supplier):
            raise InvalidInputError("the fresh timestamp supplier must be callable")
        self._supplier = supplier

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._cluster is not None and os.getpid() == self._pid:
            try:
                self._cluster.shutdown()
            except Exception:
                pass

    @property
    def session(self) -> Session:
        return self._s()

    @property
    def page_size(self) -> int:
        """Fetch size of row, column and registry reads."""
        return self._page_size

    @property
    def cluster(self):
        """The Cluster this service owns (None when it runs on a caller's Session)."""
        return self._cluster

    def describe(self) -> str:
        try:
            hosts = ",".join(str(h) for h in self._session.cluster.contact_points)
        except Exception:
            hosts = "?"
        return f"cassandra keyspace {self.keyspace} at {hosts}"

    # ----- metadata --------------------------------------------------------------------------------
    def _load_meta(self, table: str, op: str) -> TableMetadata | None:
        rs = self._execute(op, table, self._prep(C.METADATA_TABLE, "lwt_get"), (table.encode(), _REGISTRY_COLUMN))
        row = rs.one()
        if row is None:
            self._meta_cache.pop(table, None)
            return None
        meta = TableMetadata.from_json(json.loads(_tuple(row)[0]))
        self._meta_cache[table] = (meta, time.monotonic())
        return meta

    def _store_meta(self, table: str, meta: TableMetadata, op: str) -> None:
        value = json.dumps(meta.to_json(), sort_keys=True).encode()
        self._execute(op, table, self._prep(C.METADATA_TABLE, "wc_put"), (table.encode(), _REGISTRY_COLUMN, value))
        self._meta_cache[table] = (meta, time.monotonic())

    def _meta(self, table: str, op: str) -> TableMetadata:
        """Cached metadata for write-mode checks (a table's write mode never changes)."""
        C.check_table(table)
        hit = self._meta_cache.get(table)
        if hit is not None:
            return hit[0]
        meta = self._load_meta(table, op)
        if meta is None:
            raise TableNotFoundError(f"table {table!r} does not exist in keyspace {self.keyspace!r}")
        return meta

    def _require(self, table: str, op: str, *modes: WriteMode) -> TableMetadata:
        meta = self._meta(table, op)
        if meta.write_mode not in modes:
            allowed = " or ".join(m.value.upper() for m in modes)
            raise InvalidInputError(
                f"{op} is not allowed on table {table!r}: its write mode is {meta.write_mode.value.upper()}, "
                f"{op} needs {allowed}"
            )
        return meta

    def create_table(self, table: str, metadata: TableMetadata = TableMetadata()) -> None:
        """Create the CQL table (with the allow-listed ``cassandra_options``) and record its metadata.
        Re-creating updates strategy and options (options are applied with ALTER TABLE); a different
        write mode raises InvalidInputError."""
        C.check_table(table)
        metadata = C.check_metadata(metadata)
        phys = physical_table_name(table)
        existing = self._load_meta(table, "create_table")
        if existing is not None and existing.write_mode != metadata.write_mode:
            raise InvalidInputError(
                f"table {table!r} exists with write mode {existing.write_mode.value.upper()}; "
                f"the write mode of an existing table cannot change to {metadata.write_mode.value.upper()}"
            )
        clauses = C.render_cassandra_options(metadata.cassandra_options)
        if self._physical_exists(phys):
            if clauses and (existing is None or dict(existing.cassandra_options) != dict(metadata.cassandra_options)):
                self._execute(
                    "create_table", table, f"ALTER TABLE {self._q(phys)} WITH {' AND '.join(clauses)}",
                    timeout=self._ddl_timeout,
                )
        else:
            self._create_physical(phys, clauses, "create_table", table)
        self._store_meta(table, metadata, "create_table")

    def drop_table(self, table: str) -> None:
        C.check_table(table)
        phys = physical_table_name(table)
        self._execute(
            "drop_table", table, self._prep(C.METADATA_TABLE, "wc_delete"), (table.encode(), _REGISTRY_COLUMN)
        )
        self._forget(table)
        self._execute("drop_table", table, f"DROP TABLE IF EXISTS {self._q(phys)}", timeout=self._ddl_timeout)
        self._forget(table)

    def truncate_table(self, table: str) -> None:
        self._meta(table, "truncate_table")
        phys = physical_table_name(table)
        self._execute("truncate_table", table, f"TRUNCATE TABLE {self._q(phys)}", timeout=self._ddl_timeout)

    def table_exists(self, table: str) -> bool:
        C.check_table(table)
        return self._load_meta(table, "table_exists") is not None

    def get_metadata(self, table: str) -> TableMetadata:
        """At most ``metadata_cache_seconds`` stale with respect to other processes."""
        C.check_table(table)
        hit = self._meta_cache.get(table)
        if hit is not None and time.monotonic() - hit[1] < self._meta_ttl:
            return hit[0]
        meta = self._load_meta(table, "get_metadata")
        if meta is None:
            raise TableNotFoundError(f"table {table!r} does not exist in keyspace {self.keyspace!r}")
        return meta

    def set_sweep_strategy(self, table: str, strategy: SweepStrategy) -> None:
        C.check_table(table)
        strategy = SweepStrategy.parse(strategy)
        meta = self._load_meta(table, "set_sweep_strategy")
        if meta is None:
            raise TableNotFoundError(f"table {table!r} does not exist in keyspace {self.keyspace!r}")
        self._store_meta(table, TableMetadata(strategy, meta.write_mode, meta.cassandra_options), "set_sweep_strategy")

    def list_tables(self) -> list[str]:
        rs = self._execute("list_tables", None, self._prep(C.METADATA_TABLE, "all"))
        names = set()
        try:
            for row in rs:
                key, col, _ = _tuple(row)
                if col == _REGISTRY_COLUMN:
                    names.add(key.decode())
        except Exception as exc:
            raise self._translate(exc, "list_tables", None) from exc
        return sorted(names)

    # ----- LOGICAL writes --------------------------------------------------------------------------
    def put(self, table: str, values: Mapping[Cell, bytes], timestamp: int) -> None:
        self._multi_put({table: values}, timestamp, "put")

    def multi_put(self, puts: Mapping[str, Mapping[Cell, bytes]], timestamp: int) -> None:
        self._multi_put(puts, timestamp, "multi_put")

    def _multi_put(self, puts: Mapping[str, Mapping[Cell, bytes]], timestamp: int, op: str) -> None:
        C.check_mapping(puts, "puts")
        timestamp = C.check_write_timestamp(timestamp)
        items = []
        for table, values in puts.items():
            self._require(table, op, WriteMode.LOGICAL)
            values = C.check_values(values)
            if values:
                ps = self._prep(table, "put")
                items.extend(
                    (ps, (c.row, c.col, timestamp, v, timestamp), c.row, len(c.row) + len(c.col) + len(v) + 32)
                    for c, v in values.items()
                )
        self._write(op, next(iter(puts)) if len(puts) == 1 else None, items)

    def delete(self, table: str, versions: Iterable[tuple[Cell, int]]) -> None:
        self._require(table, "delete", WriteMode.LOGICAL)
        versions = C.check_versions(versions)
        if not versions:
            return
        ps = self._prep(table, "delete")
        fresh = self._fresh("delete", table)
        self._write(
            "delete", table, [(ps, (fresh, c.row, c.col, ts), c.row, len(c.row) + len(c.col) + 32) for c, ts in versions]
        )

    def delete_all_timestamps(self, table: str, ranges: Mapping[Cell, tuple[int, int]]) -> None:
        self._require(table, "delete_all_timestamps", WriteMode.LOGICAL)
        ranges = C.check_ranges(ranges)
        if not ranges:
            return
        ps = self._prep(table, "delete_range")
        fresh = self._fresh("delete_all_timestamps", table)
        self._write(
            "delete_all_timestamps",
            table,
            [(ps, (fresh, c.row, c.col, lo, hi), c.row, len(c.row) + len(c.col) + 40) for c, (lo, hi) in ranges.items()],
        )

    def add_gc_sentinels(self, table: str, cells: Iterable[Cell]) -> None:
        self._require(table, "add_gc_sentinels", WriteMode.LOGICAL)
        cells = C.check_cells(cells)
        if not cells:
            return
        ps = self._prep(table, "sentinel")
        fresh = self._fresh("add_gc_sentinels", table)
        self._write(
            "add_gc_sentinels", table, [(ps, (c.row, c.col, b"", fresh), c.row, len(c.row) + len(c.col) + 32) for c in cells]
        )

    def add_gc_sentinels_and_delete_all_timestamps(
        self, table: str, cells: Iterable[Cell], ranges: Mapping[Cell, tuple[int, int]]
    ) -> None:
        """Each cell's sentinel and ranged tombstone go together as one unit of a batch: statements on one
        partition in a batch are applied as ONE mutation, atomically and in isolation, so no reader ever sees
        the tombstone without the sentinel (the guarantee "sentinel first" gives), at half the requests and
        half the mutations of two calls. Units are never split across batches; the two fresh timestamps are
        taken as the two separate calls take them (sentinels first)."""
        self._require(table, "add_gc_sentinels_and_delete_all_timestamps", WriteMode.LOGICAL)
        cells = C.check_cells(cells)
        ranges = C.check_ranges(ranges)
        C.check_ranges_within(ranges, cells)
        if not cells:
            return
        op = "add_gc_sentinels_and_delete_all_timestamps"
        sentinel_ps = self._prep(table, "sentinel")
        range_ps = self._prep(table, "delete_range") if ranges else None
        sentinel_at = self._fresh(op, table)
        delete_at = self._fresh(op, table) if ranges else None
        items = []
        for c in cells:
            sentinel = (sentinel_ps, (c.row, c.col, b"", sentinel_at))
            bounds = ranges.get(c)
            if bounds is None:
                items.append((sentinel[0], sentinel[1], c.row, len(c.row) + len(c.col) + 32))
            else:
                unit = (sentinel, (range_ps, (delete_at, c.row, c.col, bounds[0], bounds[1])))
                items.append((None, unit, c.row, 2 * (len(c.row) + len(c.col)) + 72))
        self._write(op, table, items)

    def delete_rows(self, table: str, rows: Iterable[bytes]) -> None:
        """Partition tombstones at one fresh timestamp T: later writes to these rows at Atlas timestamps
        below T stay hidden (Cassandra semantics; the embedded store has no such shadow)."""
        self._require(table, "delete_rows", WriteMode.LOGICAL)
        rows = C.check_rows(rows)
        if not rows:
            return
        ps = self._prep(table, "delete_row")
        fresh = self._fresh("delete_rows", table)
        self._write("delete_rows", table, [(ps, (fresh, r), r, len(r) + 24) for r in rows])

    # ----- reads -----------------------------------------------------------------------------------
    def get(self, table: str, cells: Mapping[Cell, int]) -> dict[Cell, Value]:
        """One ``column2 < ts ORDER BY DESC LIMIT 1`` query per cell, executed concurrently."""
        self._meta(table, "get")
        cells = C.check_cell_timestamps(cells)
        if not cells:
            return {}
        ps = self._prep(table, "get_latest")
        keys = list(cells.items())
        results = self._concurrent("get", table, [(ps, (c.row, c.col, ts)) for c, ts in keys])
        out: dict[Cell, Value] = {}
        for (cell, _), rs in zip(keys, results):
            rows = rs.current_rows
            if rows:
                ts, value = _tuple(rows[0])
                out[cell] = Value(ts, value)
        return out

    def get_all_timestamps(
        self, table: str, cells: Iterable[Cell], timestamp: int = MAX_TIMESTAMP
    ) -> dict[Cell, list[int]]:
        self._meta(table, "get_all_timestamps")
        cells = C.check_cells(cells)
        timestamp = C.check_read_timestamp(timestamp)
        if not cells:
            return {}
        ps = self._prep(table, "get_ts")
        results = self._concurrent("get_all_timestamps", table, [(ps, (c.row, c.col, timestamp)) for c in cells])
        out: dict[Cell, list[int]] = {}
        try:
            for cell, rs in zip(cells, results):
                found = [_tuple(r)[0] for r in rs]  # iterating fetches further pages
                if found:
                    out[cell] = found
        except (StoreUnavailableError, InvalidInputError):
            raise
        except Exception as exc:
            raise self._translate(exc, "get_all_timestamps", table) from exc
        return out

    def _row_columns_statement(self, table: str, row: bytes, start_col, end_col):
        if start_col is None and end_col is None:
            return self._prep(table, "rc"), (row,)
        if end_col is None:
            return self._prep(table, "rc_s"), (row, start_col)
        if start_col is None:
            return self._prep(table, "rc_e"), (row, end_col)
        return self._prep(table, "rc_se"), (row, start_col, end_col)

    @staticmethod
    def _latest_per_column(rows, timestamp: int, limit: int | None) -> list[tuple[bytes, Value]]:
        """Rows arrive ordered by (column1, column2) ascending: the last version below ``timestamp`` of each
        column is its latest. Stops reading (and paging) once ``limit`` columns are complete."""
        out: list[tuple[bytes, Value]] = []
        current_col = None
        current: Value | None = None
        for row in rows:
            col, ts, value = _tuple(row)
            if col != current_col:
                if current is not None:
                    out.append((current_col, current))
                    if limit is not None and len(out) >= limit:
                        return out
                current_col, current = col, None
            if ts < timestamp:
                current = Value(ts, value)
        if current is not None:
            out.append((current_col, current))
        return out

    def get_row_columns(
        self,
        table: str,
        row: bytes,
        start_col: bytes | None = None,
        end_col: bytes | None = None,
        limit: int | None = None,
        timestamp: int = MAX_TIMESTAMP,
    ) -> list[tuple[bytes, Value]]:
        """Reads the row's versions in pages of ``page_size`` and keeps the latest below ``timestamp``."""
        self._meta(table, "get_row_columns")
        row = C.check_row(row)
        start_col = C.check_optional_bytes(start_col, "start_col")
        end_col = C.check_optional_bytes(end_col, "end_col")
        limit = C.check_limit(limit)
        timestamp = C.check_read_timestamp(timestamp)
        if limit == 0 or (start_col is not None and end_col is not None and start_col >= end_col):
            return []
        ps, params = self._row_columns_statement(table, row, start_col, end_col)
        rs = self._execute("get_row_columns", table, ps, params)
        try:
            return self._latest_per_column(rs, timestamp, limit)
        except (StoreUnavailableError, InvalidInputError):
            raise
        except Exception as exc:
            raise self._translate(exc, "get_row_columns", table) from exc

    def get_rows_columns(
        self,
        table: str,
        rows: Sequence[bytes],
        start_col: bytes | None = None,
        end_col: bytes | None = None,
        timestamp: int = MAX_TIMESTAMP,
    ) -> dict[bytes, list[tuple[bytes, Value]]]:
        """First pages of all rows concurrently; wide rows then page on."""
        self._meta(table, "get_rows_columns")
        rows = C.check_rows(rows)
        start_col = C.check_optional_bytes(start_col, "start_col")
        end_col = C.check_optional_bytes(end_col, "end_col")
        timestamp = C.check_read_timestamp(timestamp)
        if not rows or (start_col is not None and end_col is not None and start_col >= end_col):
            return {}
        statements = [self._row_columns_statement(table, r, start_col, end_col) for r in rows]
        results = self._concurrent("get_rows_columns", table, statements)
        out: dict[bytes, list[tuple[bytes, Value]]] = {}
        try:
            for row, rs in zip(rows, results):
                cols = self._latest_per_column(rs, timestamp, None)
                if cols:
                    out[row] = cols
        except (StoreUnavailableError, InvalidInputError):
            raise
        except Exception as exc:
            raise self._translate(exc, "get_rows_columns", table) from exc
        return out

    def full_range(self, table: str) -> ScanRange:
        self._meta(table, "full_range")
        return ScanRange("token", RING_MIN, RING_MAX)

    def split_ranges(self, table: str, parts: int) -> list[ScanRange]:
        """``parts`` equal slices of the Murmur3 ring (start exclusive, end inclusive)."""
        self._meta(table, "split_ranges")
        parts = C.check_parts(parts)
        span = 1 << 64
        bounds = [RING_MIN + (i * span) // parts for i in range(parts)] + [RING_MAX]
        return [ScanRange("token", bounds[i], bounds[i + 1]) for i in range(parts)]

    def scan(
        self,
        table: str,
        scan_range: ScanRange | None = None,
        start_after_row: bytes | None = None,
        page_size: int = 1000,
        timestamp: int = MAX_TIMESTAMP,
    ) -> Iterator[tuple[Cell, int, bytes]]:
        """Token order, then column, then timestamp. ``start_after_row`` resumes at ``token(key) >
        token(start_after_row)``: rows sharing that row's token (a Murmur3 collision, astronomically rare)
        would be skipped."""
        self._meta(table, "scan")
        if scan_range is None:
            scan_range = ScanRange("token", RING_MIN, RING_MAX)
        if not isinstance(scan_range, ScanRange) or scan_range.kind != "token":
            raise InvalidInputError(f"Cassandra scans token ranges (ScanRange kind 'token'), got {scan_range!r}")
        start = C.check_int(scan_range.start, "scan range start")
        end = C.check_int(scan_range.end, "scan range end")
        if start_after_row is not None:
            start = max(start, _token(C.check_row(start_after_row)))
        page_size = C.check_page_size(page_size)
        timestamp = C.check_read_timestamp(timestamp)
        return self._scan(table, start, end, page_size, timestamp)

    def _scan(self, table, start, end, page_size, timestamp) -> Iterator[tuple[Cell, int, bytes]]:
        if start >= end:
            return
        bound = self._prep(table, "scan").bind((start, end))
        bound.fetch_size = page_size
        rs = self._execute("scan", table, bound)
        try:
            for row in rs:
                key, col, ts, value = _tuple(row)
                if ts < timestamp:
                    yield Cell(key, col), ts, value
        except (StoreUnavailableError, InvalidInputError):
            raise
        except Exception as exc:
            raise self._translate(exc, "scan", table) from exc

    # ----- LWT tables ------------------------------------------------------------------------------
    def put_unless_exists(self, table: str, values: Mapping[Cell, bytes]) -> None:
        """``INSERT ... IF NOT EXISTS`` per cell; cells of one row go in one conditional batch (all or none
        of that row); rows run concurrently."""
        self._require(table, "put_unless_exists", WriteMode.LWT)
        values = C.check_values(values)
        if not values:
            return
        ps = self._prep(table, "lwt_insert")
        statements = []
        for row, cells in C.group_by_row(values).items():
            if len(cells) == 1:
                c = cells[0]
                statements.append((ps, (c.row, c.col, values[c])))
            else:
                batch = BatchStatement(
                    batch_type=BatchType.UNLOGGED,
                    consistency_level=self._write_cl,
                    serial_consistency_level=self._serial_cl,
                )
                for c in cells:
                    batch.add(ps, (c.row, c.col, values[c]))
                statements.append((batch, None))
        results = self._concurrent("put_unless_exists", table, statements, lwt=True)
        existing: dict[Cell, bytes] = {}
        for rs in results:
            existing.update(self._lwt_existing(rs))
        if existing:
            raise KeyAlreadyExistsError(
                f"put_unless_exists into table {table!r}: {len(existing)} cell(s) already exist: "
                f"{C.describe_cells(existing)}",
                existing,
            )

    @staticmethod
    def _lwt_applied(rs) -> bool:
        rows = rs.current_rows
        return bool(_tuple(rows[0])[0]) if rows else False

    def _lwt_existing(self, rs) -> dict[Cell, bytes]:
        """Cells an unapplied IF NOT EXISTS found, from the rows the coordinator returns."""
        if self._lwt_applied(rs):
            return {}
        names = list(rs.column_names or [])
        found: dict[Cell, bytes] = {}
        if not {"key", "column1", "value"} <= set(names):
            return found
        ki, ci, vi = names.index("key"), names.index("column1"), names.index("value")
        for row in rs.current_rows:
            row = _tuple(row)
            if row[ki] is not None:
                found[Cell(row[ki], row[ci])] = row[vi]
        return found

    def check_and_set(self, table: str, cell: Cell, expected: bytes | None, new: bytes | None) -> bool:
        self._require(table, "check_and_set", WriteMode.LWT)
        cell = validate_cell(cell)
        expected = None if expected is None else validate_value(expected, what="expected value")
        new = None if new is None else validate_value(new, what="new value")
        if expected is None and new is None:
            return cell not in self.get_lwt(table, [cell], serial=True)
        if expected is None:
            ps, params = self._prep(table, "lwt_insert"), (cell.row, cell.col, new)
        elif new is None:
            ps, params = self._prep(table, "lwt_delete"), (cell.row, cell.col, expected)
        else:
            ps, params = self._prep(table, "lwt_update"), (new, cell.row, cell.col, expected)
        rs = self._execute("check_and_set", table, ps, params, lwt=True)
        return self._lwt_applied(rs)

    def get_lwt(self, table: str, cells: Iterable[Cell], serial: bool = False) -> dict[Cell, bytes]:
        self._require(table, "get_lwt", WriteMode.LWT, WriteMode.WALLCLOCK)
        cells = C.check_cells(cells)
        if not cells:
            return {}
        ps = self._prep(table, "lwt_get_serial" if serial else "lwt_get")
        results = self._concurrent("get_lwt", table, [(ps, (c.row, c.col)) for c in cells])
        out: dict[Cell, bytes] = {}
        for cell, rs in zip(cells, results):
            rows = rs.current_rows
            if rows:
                out[cell] = _tuple(rows[0])[0]
        return out

    def get_lwt_row(self, table: str, row: bytes, serial: bool = False) -> dict[bytes, bytes]:
        self._require(table, "get_lwt_row", WriteMode.LWT, WriteMode.WALLCLOCK)
        row = C.check_row(row)
        ps = self._prep(table, "lwt_row_serial" if serial else "rc")
        rs = self._execute("get_lwt_row", table, ps, (row,))
        try:
            return {col: value for col, ts, value in map(_tuple, rs) if ts == LWT_TIMESTAMP}
        except (StoreUnavailableError, InvalidInputError):
            raise
        except Exception as exc:
            raise self._translate(exc, "get_lwt_row", table) from exc

    # ----- WALLCLOCK tables ------------------------------------------------------------------------
    def put_wallclock(self, table: str, values: Mapping[Cell, bytes], ttl_seconds: int | None = None) -> None:
        self._require(table, "put_wallclock", WriteMode.WALLCLOCK)
        values = C.check_values(values)
        ttl_seconds = C.check_ttl(ttl_seconds)
        if not values:
            return
        if ttl_seconds is None:
            ps = self._prep(table, "wc_put")
            statements = [(ps, (c.row, c.col, v)) for c, v in values.items()]
        else:
            ps = self._prep(table, "wc_put_ttl")
            statements = [(ps, (c.row, c.col, v, ttl_seconds)) for c, v in values.items()]
        self._concurrent("put_wallclock", table, statements)

    def delete_wallclock(self, table: str, cells: Iterable[Cell]) -> None:
        self._require(table, "delete_wallclock", WriteMode.WALLCLOCK)
        cells = C.check_cells(cells)
        if not cells:
            return
        ps = self._prep(table, "wc_delete")
        self._concurrent("delete_wallclock", table, [(ps, (c.row, c.col)) for c in cells])

    def get_wallclock_row(
        self, table: str, row: bytes, start_col: bytes | None = None, limit: int | None = None
    ) -> list[tuple[bytes, bytes]]:
        self._require(table, "get_wallclock_row", WriteMode.WALLCLOCK, WriteMode.LWT)
        row = C.check_row(row)
        start_col = C.check_optional_bytes(start_col, "start_col")
        limit = C.check_limit(limit)
        if limit == 0:
            return []
        if start_col is None:
            ps, params = self._prep(table, "rc"), (row,)
        else:
            ps, params = self._prep(table, "wc_row_s"), (row, start_col)
        rs = self._execute("get_wallclock_row", table, ps, params)
        out: list[tuple[bytes, bytes]] = []
        try:
            for col, ts, value in map(_tuple, rs):
                if ts == LWT_TIMESTAMP:
                    out.append((col, value))
                    if limit is not None and len(out) >= limit:
                        break
        except (StoreUnavailableError, InvalidInputError):
            raise
        except Exception as exc:
            raise self._translate(exc, "get_wallclock_row", table) from exc
        return out

    # ----- operations ------------------------------------------------------------------------------
    def space_used_bytes(self, table: str) -> int | None:
        """None: the driver cannot see disk usage (the Airflow layer asks nodetool tablestats)."""
        self._meta(table, "space_used_bytes")
        return None
