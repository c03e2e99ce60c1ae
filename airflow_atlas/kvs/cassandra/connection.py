"""Clusters and sessions of the Cassandra key-value service: the cluster factory behind ``connect``,
TCP_NODELAY, opening a session (again, after a timeout), and the lock that makes re-connecting after
``fork`` safe.

Opening a session retries only a *timeout*: a node that is up but slow to answer (a long GC pause or a
compaction burst on a loaded machine keeps the driver's control connection from reading the system tables
within its timeout, 2 s unless set). Each attempt builds a new Cluster from the factory, because the
driver shuts a Cluster down when its control connection fails. A refused connection, bad credentials or a
TLS error fail at once: waiting would not change them.

Sessions are not fork-safe: a service built from a *cluster factory* rebuilds its cluster in a forked
child (under :func:`fork_lock`, re-created in every child so it is never inherited locked); a service
built on a caller's Session refuses to run in another process.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import InvalidInputError
from .. import _common as C
from .statements import validate_datacenter, validate_keyspace

if TYPE_CHECKING:
    import ssl

    from cassandra.cluster import Cluster

_NODELAY = (socket.IPPROTO_TCP, socket.TCP_NODELAY)
_FORK_LOCK = threading.Lock()
SCHEMA_AGREEMENT_WAIT_SECONDS = 60
"""How long the driver waits for schema agreement after DDL (the driver's default is 10 s)."""
CONNECT_ATTEMPTS = 3
"""Attempts to open a session when the node times out (see the module docstring)."""
CONNECT_RETRY_PAUSE_SECONDS = 1.0
"""Pause before the second attempt; it grows linearly (1 s, 2 s, ...)."""


def _reset_fork_lock() -> None:
    global _FORK_LOCK
    _FORK_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_reset_fork_lock)


def fork_lock() -> threading.Lock:
    return _FORK_LOCK


def ensure_tcp_nodelay(cluster: Cluster) -> None:
    """Add TCP_NODELAY to a not yet connected Cluster's socket options unless they set it already: without
    it a request larger than one TCP segment waits ~40 ms for the delayed ACK (Nagle's algorithm)."""
    options = list(getattr(cluster, "sockopts", None) or [])
    if not any(tuple(o[:2]) == _NODELAY for o in options):
        cluster.sockopts = options + [(*_NODELAY, 1)]


def cluster_factory(
    hosts: str | Sequence[str],
    *,
    keyspace: str,
    port: int,
    username: str | None,
    password: str | None,
    ssl_context: ssl.SSLContext | None,
    ssl_options: dict | None,
    protocol_version: int,
    replication_factor: int,
    datacenter: str | None,
    connect_timeout: float,
    request_timeout: float,
) -> Callable[[], object]:
    """Validate the connection arguments and return a zero-argument callable building the Cluster
    (token-aware, DC-aware load balancing; tuple rows; TCP_NODELAY)."""
    if isinstance(hosts, str):
        hosts = hosts.split(",")
    host_list = [h.strip() for h in hosts] if isinstance(hosts, (list, tuple)) else None
    if not host_list or any(not h or any(ch.isspace() or ch in "/@?#" for ch in h) for h in host_list):
        raise InvalidInputError("hosts must be a non-empty list of host names or addresses")
    validate_keyspace(keyspace)
    port = C.check_int(port, "port", 1, 65535)
    protocol_version = C.check_int(protocol_version, "protocol_version", 3, 6)
    C.check_int(replication_factor, "replication_factor", 1, 99)
    if username is not None and not isinstance(username, str):
        raise InvalidInputError("username must be a string")
    if password is not None and not isinstance(password, str):
        raise InvalidInputError("password must be a string")
    validate_datacenter(datacenter)

    def factory() -> Any:  # a driver Cluster
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
            contact_points=list(host_list),
            port=port,
            protocol_version=protocol_version,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
            connect_timeout=connect_timeout,
            # The control connection's queries of the system tables get the same allowance as opening the
            # socket (the driver's default is 2 s, short for a node busy compacting on a small machine).
            control_connection_timeout=connect_timeout,
            # Without TCP_NODELAY a request larger than one segment (a batch of ~40 cells) waits for
            # the delayed ACK of the previous segment: ~40 ms per call (Nagle's algorithm).
            sockopts=[(*_NODELAY, 1)],
            # After a CREATE/ALTER the driver waits until every node reports the same schema version before
            # the next request; the default 10 s is too short for a loaded replicated cluster, and a table
            # used before its schema reached the coordinator fails ("table ... does not exist").
            max_schema_agreement_wait=SCHEMA_AGREEMENT_WAIT_SECONDS,
        )
        if ssl_context is not None:
            kwargs["ssl_context"] = ssl_context
            if ssl_options:
                kwargs["ssl_options"] = ssl_options
        if username is not None:
            kwargs["auth_provider"] = PlainTextAuthProvider(username=username, password=password or "")
        return Cluster(**kwargs)

    return factory


def timed_out(exc: BaseException) -> bool:
    """Whether a failed ``Cluster.connect()`` was a timeout on every host it tried (worth another attempt),
    rather than a refusal, an authentication or a TLS error (not worth one)."""
    from cassandra import OperationTimedOut
    from cassandra.cluster import NoHostAvailable

    if isinstance(exc, (OperationTimedOut, TimeoutError)):
        return True
    if isinstance(exc, NoHostAvailable) and isinstance(exc.errors, dict):
        errors = list(exc.errors.values())
        return bool(errors) and all(isinstance(e, (OperationTimedOut, TimeoutError)) for e in errors)
    return False


def unjudged(exc: BaseException) -> bool:
    """Whether a failed ``Cluster.connect()`` carries no reason: the control connection was made, then the
    session's pool to every host failed, and the driver's Session raises ``NoHostAvailable`` with the list
    of those hosts instead of their errors. Seen when a role's password changed a moment before: the node
    still accepted the old one for the control connection (its credentials cache), then refused it. One
    more attempt gives the reason (there: the refusal, a final StoreAuthenticationError instead of a
    retriable "unavailable")."""
    from cassandra.cluster import NoHostAvailable

    return isinstance(exc, NoHostAvailable) and not isinstance(exc.errors, dict)


def open_session(
    factory: Callable[[], Any],  # returns a driver Cluster or Session
    *,
    attempts: int = CONNECT_ATTEMPTS,
    pause: float = CONNECT_RETRY_PAUSE_SECONDS,
) -> tuple[object, object]:
    """``(cluster, session)`` from a factory returning a Cluster (connected here, TCP_NODELAY added) or a
    Session (used as it is). A connect that timed out is tried again with a new Cluster, up to ``attempts``
    times, and so is a connect that failed without a reason (:func:`unjudged`); any other failure, and the
    last attempt's, is raised as the driver raised it. A Cluster whose
    connect failed is shut down."""
    from cassandra.cluster import Session

    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    for attempt in range(1, attempts + 1):
        made = factory()
        if isinstance(made, Session):
            return made.cluster, made
        ensure_tcp_nodelay(made)  # a factory's Cluster (one not built by cluster_factory) may not set it
        try:
            return made, made.connect()
        except Exception as exc:
            try:
                made.shutdown()
            except Exception:
                pass
            if attempt == attempts or not (timed_out(exc) or unjudged(exc)):
                raise
        time.sleep(pause * attempt)
    raise AssertionError("unreachable")  # the loop returns or raises
