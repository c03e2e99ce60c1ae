"""CassandraKeyValueService: the Cassandra backend of the contract, composed of parts on one session.

The service builds a :class:`~.session.CqlSession` (the driver session, prepared statements, execution,
error translation) and the parts that hold it: :class:`~.schema.CassandraTables`, :class:`~.reads.CassandraReads`,
:class:`~.writes.CassandraWrites`, :class:`~.lwt.CassandraLwt` and :class:`~.lwt.CassandraWallclock`; the
contract's public methods (:class:`~airflow_atlas.kvs.api.KeyValueService`) check the arguments and call them.
Here: construction (``connect``), opening the keyspace, the lifecycle, and the cluster's views (node
pressure, down datacenters). See the package docstring for the whole picture.
"""
from __future__ import annotations

import ssl
from collections.abc import Callable, Sequence
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.cluster import Cluster, Session

from .. import _common as C
from ..api import KeyValueService
from ..consistency import ConsistencyPolicy, GcGraceGuard, Operation, check_policies
from ..pressure import NodePressure
from .connection import cluster_factory
from .lwt import CassandraLwt, CassandraWallclock
from .pressure import read_node_pressure
from .reads import CassandraReads
from .schema import CassandraTables
from .session import CqlSession
from .statements import validate_datacenter, validate_keyspace
from .topology import down_hosts
from .writes import CassandraWrites


class CassandraKeyValueService(KeyValueService):
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
        concurrency = C.check_int(concurrency, "concurrency", 1, 4096)
        page_size = C.check_page_size(page_size)
        batch_partitions = C.check_int(batch_partitions, "batch_partitions", 1, 1000)
        batch_bytes = C.check_int(batch_bytes, "batch_bytes", 64, 1 << 20)
        self.consistency, self.gc_grace_guard = check_policies(consistency, gc_grace_guard)
        if fresh_timestamp_supplier is not None:
            C.check_fresh_timestamp_supplier(fresh_timestamp_supplier)  # before anything is opened
        self.cql = CqlSession(
            session_or_cluster_factory,
            self.keyspace,
            levels={op: ConsistencyLevel.name_to_value[self.consistency.level(op)] for op in Operation},
            concurrency=concurrency,
            page_size=page_size,
            request_timeout=float(request_timeout),
            secrets=_secrets,
        )
        self._tables = schema = CassandraTables(
            self.cql, self.consistency, self.gc_grace_guard,
            ddl_timeout=float(ddl_timeout), metadata_cache_seconds=float(metadata_cache_seconds),
        )
        self._reads = CassandraReads(self.cql)
        self._writes = CassandraWrites(
            self.cql, self.consistency, batch_partitions=batch_partitions, batch_bytes=batch_bytes
        )
        self._lwt = CassandraLwt(self.cql)
        self._wallclock = CassandraWallclock(self.cql)
        if fresh_timestamp_supplier is not None:
            self._writes.use_fresh_timestamps(fresh_timestamp_supplier)
        try:
            if create_keyspace:
                schema.create_keyspace(replication_factor, datacenter)
            schema.ensure_registry(create=create_registry)
            schema.check_datacenters(datacenter)
        except BaseException:
            self.cql.shut_down_owned()  # never leak a cluster this service opened
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
        ssl_context: ssl.SSLContext | None = None,
        ssl_options: dict | None = None,
        protocol_version: int = 5,
        replication_factor: int = 1,
        create_keyspace: bool = True,
        datacenter: str | None = None,
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        **options: Any,  # the constructor's other keyword arguments
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

    # ----- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        self.cql.close()

    @property
    def session(self) -> Session:
        """The driver session (this process's)."""
        return self.cql.driver()

    @property
    def page_size(self) -> int:
        """Fetch size of row, column and registry reads."""
        return self.cql.page_size

    @property
    def cluster(self) -> Cluster | None:
        """The Cluster this service owns (None when it runs on a caller's Session)."""
        return self.cql.cluster

    def describe(self) -> str:
        return self.cql.describe()

    # ----- the cluster's views ---------------------------------------------------------------------
    def down_datacenters(self) -> dict[str, list[str]]:
        return down_hosts(self.cql.driver().cluster)

    def node_pressure(self) -> list[NodePressure]:
        return read_node_pressure(self.cql.driver(), self.cql.request_timeout,
                                  lambda exc: self.cql.translate(exc, "node_pressure", None))

    # ----- what bench/delete_rate reaches into (to move to ``cql``) --------------------------------------
    @property
    def _concurrency(self) -> int:
        return self.cql.concurrency
