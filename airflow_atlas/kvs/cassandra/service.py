"""CassandraKeyValueService: construction and plumbing (sessions, prepared statements, concurrent execution,
batched writes); the LOGICAL writes, reads, LWT/WALLCLOCK tables and schema live in the mixins
(:mod:`.writes`, :mod:`.reads`, :mod:`.lwt`, :mod:`.schema`). See the package docstring for the whole picture.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.cluster import Session
from cassandra.concurrent import execute_concurrent

from ...errors import InvalidInputError, StoreUnavailableError, TableNotFoundError
from .. import _common as C
from ..api import (
    MAX_TIMESTAMP,
    KeyValueService,
    check_page_size,
)
from ..consistency import (
    ConsistencyPolicy,
    GcGraceGuard,
    Operation,
    check_policies,
)
from ..tables import TableMetadata
from .batching import WriteItem, plan_batches
from .connection import cluster_factory, fork_lock, open_session
from .errors import UNAVAILABLE_HINT, translate
from .lwt import LwtMixin
from .reads import ReadsMixin
from .requests import RequestBuilder
from .schema import SchemaMixin
from .statements import KINDS, physical_table_name, quoted, row_tuple, validate_datacenter, validate_keyspace
from .topology import down_note
from .writes import WritesMixin


class CassandraKeyValueService(SchemaMixin, ReadsMixin, LwtMixin, WritesMixin, KeyValueService):
    """KeyValueService on one Cassandra keyspace.

    ``session_or_cluster_factory`` is either an existing ``cassandra.cluster.Session`` (for instance from
    a test or an embedding program; the caller keeps ownership and shuts it down), or a zero-argument callable
    returning a ``Cluster`` (or a ``Session``) that this service owns: it is shut down in :meth:`close` and
    rebuilt after a fork. :meth:`connect` builds such a factory from host names and credentials.

    Beyond the contract: ``concurrency`` (in-flight requests per call), ``page_size`` (fetch size for row and
    column reads), ``batch_partitions`` / ``batch_bytes`` (UNLOGGED batches of multi-cell LOGICAL writes, see
    the package docstring; ``batch_partitions=1`` disables them), ``consistency`` (a
    :class:`ConsistencyPolicy`: the level of each operation), ``gc_grace_guard`` (refuses swept tables with
    ``gc_grace_seconds`` below the repair interval), ``request_timeout`` /
    ``ddl_timeout`` seconds, ``metadata_cache_seconds`` (how stale get_metadata may be across processes),
    ``create_keyspace`` with ``replication_factor`` / ``datacenter``.
    """

    backend = "cassandra"

    def __init__(
        self,
        session_or_cluster_factory: Session | Callable[[], object],
        keyspace: str,
        *,
        fresh_timestamp_supplier: Callable[[], int] | None = None,
        concurrency: int = 100,
        page_size: int = 1000,
        batch_partitions: int = 10,
        batch_bytes: int = 4096,
        consistency: ConsistencyPolicy | None = None,
        gc_grace_guard: GcGraceGuard | None = None,
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
        validate_datacenter(datacenter)
        self._concurrency = C.check_int(concurrency, "concurrency", 1, 4096)
        self._page_size = check_page_size(page_size)
        self._batch_partitions = C.check_int(batch_partitions, "batch_partitions", 1, 1000)
        self._batch_bytes = C.check_int(batch_bytes, "batch_bytes", 64, 1 << 20)
        self.consistency, self.gc_grace_guard = check_policies(consistency, gc_grace_guard)
        self._levels = {op: ConsistencyLevel.name_to_value[self.consistency.level(op)] for op in Operation}
        self._request_timeout = float(request_timeout)
        self._ddl_timeout = float(ddl_timeout)
        self._meta_ttl = float(metadata_cache_seconds)
        self._secrets = tuple(s for s in _secrets if s)
        self._supplier: Callable[[], int] | None = None
        if fresh_timestamp_supplier is not None:
            self.set_fresh_timestamp_supplier(fresh_timestamp_supplier)
        self._lock = threading.Lock()
        self._prepared: dict[tuple, object] = {}  # (physical table, kind, operation) -> PreparedStatement
        self._serializers: dict[bytes, tuple | None] = {}  # query id -> value serializers (requests.py)
        self._meta_cache: dict[str, tuple[TableMetadata, float]] = {}
        self._closed = False
        self._factory: Callable[[], object] | None = None
        self._cluster: Any = None  # the driver's Cluster this service opened (None: the caller owns the session)
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
            self._check_datacenters(datacenter)
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
        hosts: str | Sequence[str],
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
    ) -> CassandraKeyValueService:
        """Build (and own) a Cluster for ``hosts`` and open the service on ``keyspace``.

        ``create_keyspace`` creates it if absent (SimpleStrategy with ``replication_factor``, or
        NetworkTopologyStrategy in ``datacenter`` when given). ``options`` go to the constructor.
        """
        factory = cluster_factory(
            hosts,
            keyspace=keyspace,
            port=port,
            username=username,
            password=password,
            ssl_context=ssl_context,
            ssl_options=ssl_options,
            protocol_version=protocol_version,
            replication_factor=replication_factor,
            datacenter=datacenter,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
        )
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
        assert self._factory is not None, "only a service built from a cluster factory opens its own session"
        try:
            self._cluster, session = open_session(self._factory)
        except Exception as exc:
            raise self._translate(exc, "connect", None) from exc
        return session

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
            with fork_lock():  # re-created in every child, so never inherited in a locked state
                if pid != self._pid:
                    # Drop (never shut down) the parent's cluster: its sockets belong to the parent.
                    self._lock = threading.Lock()
                    self._prepared = {}
                    self._serializers = {}
                    self._session = self._open_owned()
                    self._pid = pid
        return self._session

    def _q(self, phys: str) -> str:
        return quoted(self.keyspace, phys)

    def _translate(self, exc: BaseException, op: str, table: str | None, lwt: bool = False) -> Exception:
        error = translate(exc, op, table, getattr(self, "keyspace", None), self._secrets, lwt)
        if table and isinstance(error, TableNotFoundError):
            self._forget(table)
        if UNAVAILABLE_HINT in str(error) and getattr(self, "_session", None) is not None:
            error = StoreUnavailableError(f"{error}{down_note(self._session.cluster)}")  # which datacenter
        return error

    def _execute(self, op: str, table: str | None, statement, params=None, timeout=None, lwt: bool = False):
        try:
            return self._s().execute(statement, params, timeout=timeout or self._request_timeout)
        except (StoreUnavailableError, InvalidInputError):
            raise
        except Exception as exc:
            raise self._translate(exc, op, table, lwt) from exc

    def _rows(self, op: str, table: str | None, rs) -> Iterator[tuple]:
        """The rows of a ResultSet as tuples; iterating fetches further pages, whose driver errors are
        translated like those of the first request."""
        try:
            for row in rs:
                yield row_tuple(row)
        except (StoreUnavailableError, InvalidInputError):
            raise
        except Exception as exc:
            raise self._translate(exc, op, table) from exc

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

    def _write(self, op: str, table: str | None, items: list[WriteItem], operation: Operation) -> None:
        """Run the LOGICAL writes ``items`` as UNLOGGED batches (planned by :func:`.batching.plan_batches`)
        at the consistency level of ``operation`` (the items' prepared statements carry the same level),
        concurrently; raise on the first failure (nothing more is sent then). Runs in windows of
        ``16 * concurrency`` requests whose results are dropped: memory does not grow with the call."""
        if not items:
            return
        # lazy: batches are planned and built while earlier ones are in flight
        build = RequestBuilder(
            self._levels[operation],
            self._serializers,
            pre_serialize=self._s().cluster.column_encryption_policy is None,
        )
        plan = plan_batches(
            items,
            max_partitions=self._batch_partitions,
            max_bytes=self._batch_bytes,
            replicas_of=self._replica_group() if self._batch_partitions > 1 and len(items) > 1 else None,
        )
        statements = map(build, plan)
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
        """Key function: partition key -> its replica set (None - one group - when the cluster has one host
        or no token map)."""
        metadata = self._s().cluster.metadata
        token_map = metadata.token_map
        if token_map is None or len(metadata.all_hosts()) <= 1:
            return None
        keyspace, token_of = self.keyspace, token_map.token_class.from_key
        return lambda key: tuple(token_map.get_replicas(keyspace, token_of(key)))

    def _prep(self, table: str, kind: str, operation: Operation | None = None):
        """The prepared statement ``kind`` for an (already validated) Atlas table, at the consistency level
        of ``operation`` (default: the kind's own - data_read, data_write, serial or lwt_commit). One
        prepared statement object per (table, kind, operation): the level travels with the statement."""
        phys = physical_table_name(table)
        key = (phys, kind, operation)
        ps = self._prepared.get(key)
        if ps is not None:
            return ps
        cql, default_operation, lwt, idempotent = KINDS[kind]
        try:
            ps = self._s().prepare(cql.format(t=self._q(phys)))
        except Exception as exc:
            raise self._translate(exc, "prepare", table) from exc
        ps.consistency_level = self._levels[operation or default_operation]
        if lwt:
            ps.serial_consistency_level = self._levels[Operation.SERIAL]
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
        return C.check_int(ts, "the fresh timestamp supplier's value", 1, MAX_TIMESTAMP - 1)

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
