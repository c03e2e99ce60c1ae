"""The timestamp server: one process that hands out a Cassandra store's timestamps from memory.

``atlas-sweep timestamps serve --store URL --listen HOST:PORT`` runs one instance. It serves the store the URL
names and, on request, any other adopted keyspace of the same cluster (one deployment serves every store of a
cluster, as TimeLock serves many clients). Per store it leads or stands by (:class:`~.lease.StoreLeadership`):
the leader answers from its persisted block; a standby answers FAILED_PRECONDITION naming the leader, watches
the store's record, and takes over when the leader's lease has run out. Run two or more instances for
availability; they find each other through the store, never through each other.

Requests are gRPC (:mod:`.rpc`); a request is the count of timestamps a client wants, so each answer serves
every caller of one client process that was waiting (:mod:`.client`). Nothing on the request path touches the
store: the block is extended and the lease renewed by the maintenance thread, a quarter lease apart.

TLS (:mod:`.tls`): started with a certificate and key (``--cert-file``, ``--key-file``) the instance serves only
TLS; clients pin the CA that signed the certificate (``timestamp_tls_ca``). Plaintext is for a private network only.

Shutdown (SIGTERM, SIGINT) stops serving first, then records that nobody leads, so a standby takes over at once
instead of after the lease.

The instance reaches the store as the role its store URL names, over TLS when the URL says so (``ssl=true``,
``ssl_ca``), as every process does; the role needs the grants ``atlas-sweep grants --role timestamps`` prints on
every store it serves (:func:`airflow_atlas.grants.timestamp_server_grants`). A store that refuses the role
answers PERMISSION_DENIED naming the permission (the client fails at once, not after its retry bound). Its
session tries a node it lost again every :data:`RECONNECT_SECONDS` (the driver's default backs off up to ten
minutes between attempts, which would leave every store unserved for that long after the cluster came back).
"""
from __future__ import annotations

import logging
import threading
import uuid
from concurrent import futures
from typing import NoReturn

import grpc

from ..errors import (
    AtlasError,
    InvalidInputError,
    StoreAccessError,
    StoreNotInitializedError,
    StoreUnavailableError,
    TableNotFoundError,
)
from ..kvs.api import KeyValueService
from . import timestamps_pb2 as pb
from .lease import (
    DEFAULT_LEASE_SECONDS,
    MAX_REQUEST,
    NotLeaderError,
    StoreLeadership,
    StoreNotServedError,
    clock,
)
from .record import TIMESTAMP_TABLE
from .rpc import LEADER_METADATA, service_handler

log = logging.getLogger(__name__)


def cluster_name(kvs: KeyValueService) -> str:
    """The Cassandra cluster_name a store's session sees ("" when unknown)."""
    session = getattr(kvs, "session", None)
    metadata = getattr(getattr(session, "cluster", None), "metadata", None)
    return str(getattr(metadata, "cluster_name", "") or "")

IDLE_SECONDS = 60.0
"""A store other than the server's own that no request asked for this long is let go (its lease lapses)."""
RECONNECT_SECONDS = 1.0
"""How often the instance's session tries a Cassandra node it lost (the lease renews a quarter lease apart: a
store whose nodes came back is served again within about a second)."""


class TimestampServer:
    """The service of one instance. ``kvs``: the store the instance was started for (Cassandra); other
    keyspaces of its cluster are opened on the same session when a request names them."""

    def __init__(self, kvs: KeyValueService, advertise: str, *, lease_seconds: float = DEFAULT_LEASE_SECONDS):
        from ..kvs.cassandra import CassandraKeyValueService

        if not isinstance(kvs, CassandraKeyValueService):
            raise InvalidInputError(
                f"a timestamp server serves Cassandra stores; {kvs.describe()} keeps its timestamps in its own "
                "file (the embedded store needs no server)"
            )
        if not 0.5 <= lease_seconds <= 60:
            raise InvalidInputError(f"the lease must be 0.5..60 seconds, got {lease_seconds}")
        self.advertise = advertise
        self.holder = f"{advertise}#{uuid.uuid4().hex[:12]}"
        from cassandra.policies import ConstantReconnectionPolicy

        # Read by the driver at each node-down event (its documented Cluster attribute): every later loss of a
        # node is retried every RECONNECT_SECONDS, never after the default's back-off of up to ten minutes.
        kvs.session.cluster.reconnection_policy = ConstantReconnectionPolicy(RECONNECT_SECONDS, max_attempts=None)
        self._kvs: CassandraKeyValueService = kvs
        self._own = str(kvs.keyspace)
        self.cluster = cluster_name(kvs)
        self._lease = float(lease_seconds)
        self._lock = threading.Lock()
        self._stores: dict[str, StoreLeadership] = {self._own: StoreLeadership(kvs, self.holder, self._lease)}
        self._opened: list[KeyValueService] = []
        self._stopping = threading.Event()
        self._loop: threading.Thread | None = None
        self._grpc: grpc.Server | None = None

    # ----- stores ----------------------------------------------------------------------------------------
    def leadership(self, store: str, cluster: str = "") -> StoreLeadership:
        if cluster and self.cluster and cluster != self.cluster:
            # Never served here (a keyspace of that name on this cluster is another store), but no error of the
            # client's: it was given this address for another cluster (one $ATLAS_TIMESTAMP_SERVERS on a machine
            # whose processes use stores of several clusters, a Spark worker started for another tier) and
            # goes on to the other addresses and to the leader its store records (FAILED_PRECONDITION).
            raise NotLeaderError(
                f"this timestamp server serves the Cassandra cluster {self.cluster!r}; store {store!r} is on "
                f"{cluster!r}: start instances for that cluster (docs/RUNBOOK.md)", ""
            )
        name = store or self._own
        with self._lock:
            found = self._stores.get(name)
        if found is not None:
            return found
        from ..kvs.cassandra import CassandraKeyValueService, physical_table_name
        from ..kvs.cassandra.statements import validate_keyspace

        try:
            validate_keyspace(name)
        except InvalidInputError as exc:
            raise InvalidInputError(f"bad store name {name!r}: {exc}") from None
        try:
            kvs = CassandraKeyValueService(self._kvs.session, name, consistency=self._kvs.consistency,
                                           create_registry=False)
        except StoreNotInitializedError:
            # A store created a moment ago: this session's schema metadata may not show it yet (the driver
            # applies schema events in the background); refresh what the store is opened by, then try again.
            driver = self._kvs.session.cluster
            driver.refresh_keyspace_metadata(name)
            for table in ("_metadata", TIMESTAMP_TABLE):
                driver.refresh_table_metadata(name, physical_table_name(table))
            kvs = CassandraKeyValueService(self._kvs.session, name, consistency=self._kvs.consistency,
                                           create_registry=False)
        with self._lock:
            found = self._stores.get(name)
            if found is None:
                found = self._stores[name] = StoreLeadership(kvs, self.holder, self._lease)
                self._opened.append(kvs)
            return found

    # ----- the RPCs ----------------------------------------------------------------------------------------
    def fresh_timestamps(self, request: pb.FreshTimestampsRequest, context: grpc.ServicerContext
                         ) -> pb.FreshTimestampsResponse:
        count = request.count
        if not 1 <= count <= MAX_REQUEST:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"count must be 1..{MAX_REQUEST}, got {count}")
        try:
            start, epoch = self.leadership(request.store, request.cluster).issue(count)
        except Exception as exc:
            self._abort(context, exc)
        return pb.FreshTimestampsResponse(start=start, count=count, epoch=epoch)

    def current_bound(self, request: pb.CurrentBoundRequest, context: grpc.ServicerContext) -> pb.CurrentBoundResponse:
        try:
            leadership = self.leadership(request.store, request.cluster)
            issued = leadership.issued()
        except Exception as exc:
            self._abort(context, exc)
        return pb.CurrentBoundResponse(issued=issued, epoch=leadership.state().epoch)

    def describe(self, request: pb.DescribeRequest, context: grpc.ServicerContext) -> pb.DescribeResponse:
        with self._lock:
            stores = dict(self._stores)
        states = []
        for name, leadership in sorted(stores.items()):
            s = leadership.state()
            states.append(pb.StoreState(store=name, role=s.role, epoch=s.epoch, issued=s.issued, bound=s.bound,
                                        leader=s.leader, lease_remaining_seconds=s.lease_remaining))
        return pb.DescribeResponse(server=self.advertise, stores=states)

    @staticmethod
    def _abort(context: grpc.ServicerContext, exc: Exception) -> NoReturn:
        """End the request with the status ``exc`` stands for (``context.abort`` raises)."""
        if isinstance(exc, NotLeaderError):
            context.set_trailing_metadata(((LEADER_METADATA, exc.leader),))
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        if isinstance(exc, StoreNotServedError | TableNotFoundError):
            context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        if isinstance(exc, InvalidInputError):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        if isinstance(exc, StoreUnavailableError):
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        if isinstance(exc, StoreAccessError):  # the store refused the server's role: its grants (not retriable)
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        log.exception("timestamp request failed")
        context.abort(grpc.StatusCode.INTERNAL, f"{exc.__class__.__name__}: {exc}")
        raise AssertionError("grpc's ServicerContext.abort returned")  # it always raises (grpc's documentation)

    # ----- running -------------------------------------------------------------------------------------
    def start(self, listen: str, *, workers: int = 8, credentials: grpc.ServerCredentials | None = None) -> int:
        """Listen on ``listen`` (``host:port``; port 0 picks one) and start the maintenance thread; returns
        the port. ``credentials``: serve TLS (:func:`.tls.server_credentials`), else plaintext. The instance takes
        its own store's leadership when nobody holds it."""
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="timestamps"),
            options=[("grpc.so_reuseport", 0)],  # two instances must never share one address
        )
        server.add_generic_rpc_handlers((service_handler({
            "FreshTimestamps": self.fresh_timestamps,
            "CurrentBound": self.current_bound,
            "Describe": self.describe,
        }),))
        try:
            port = (server.add_insecure_port(listen) if credentials is None
                    else server.add_secure_port(listen, credentials))
        except RuntimeError as exc:
            raise InvalidInputError(f"the timestamp server cannot listen on {listen}: {exc}") from None
        server.start()
        self._grpc = server
        self._loop = threading.Thread(target=self._maintain, name="timestamps-lease", daemon=True)
        self._loop.start()
        return port

    def _maintain(self) -> None:
        interval = self._lease / 8
        while not self._stopping.wait(interval):
            with self._lock:
                stores = list(self._stores.items())
            for name, leadership in stores:
                if name != self._own and clock() - leadership.last_request > IDLE_SECONDS:
                    leadership.release()
                    with self._lock:
                        self._stores.pop(name, None)
                    continue
                was = leadership.state().role
                try:
                    leadership.tick()
                except AtlasError as exc:
                    log.warning("store %s: %s", name, exc)
                now = leadership.state()
                if now.role != was:
                    log.warning("store %s: %s -> %s (epoch %d, bound %d)", name, was, now.role, now.epoch, now.bound)

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving every store, record that nobody leads them, and close the listener."""
        self._stopping.set()
        with self._lock:
            stores = list(self._stores.values())
        for leadership in stores:
            leadership.release()
        if self._grpc is not None:
            self._grpc.stop(grace).wait()
        if self._loop is not None:
            self._loop.join(timeout=5)
        for kvs in self._opened:
            kvs.close()

    def wait(self) -> None:
        self._stopping.wait()
