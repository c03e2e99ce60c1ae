"""The CQL session of a Cassandra key-value service: THE one door to the driver, shared by the service's
parts (:mod:`.schema`, :mod:`.reads`, :mod:`.writes`, :mod:`.lwt`).

* The driver session: a caller's (used, never shut down; it refuses to run in another process) or one
  opened from a cluster factory (:func:`.connection.open_session`) and owned: shut down at :meth:`close`,
  opened again in a forked child (the parent's is dropped, never shut down: its sockets are the parent's).
* Prepared statements per (table, kind, operation): the statement kinds of :mod:`.statements`, each carrying
  the consistency level of its operation (a batch carries its own, :mod:`.requests`).
* Execution: one statement, many concurrently (``execute_concurrent``, ``concurrency`` in flight), or an
  unbounded stream of requests in windows whose results are dropped (memory bounded by the window).
* Every driver error translated (:mod:`.errors`) and named by operation and table; an Unavailable error
  names the datacenters known down (:mod:`.topology`), and a table found missing is forgotten (its prepared
  statements, and the metadata cache's entry through :meth:`CqlSession.when_table_gone`).
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import TYPE_CHECKING

from cassandra.cluster import Cluster, ResultSet, Session
from cassandra.concurrent import execute_concurrent

from ...errors import InvalidInputError, StoreUnavailableError, TableNotFoundError
from ..consistency import Operation
from .connection import fork_lock, open_session
from .errors import UNAVAILABLE_HINT, translate
from .statements import KINDS, physical_table_name, quoted, row_tuple
from .topology import down_note

if TYPE_CHECKING:
    from cassandra.query import PreparedStatement, Statement

    from .requests import Serializer

    Request = tuple[Statement | PreparedStatement, Sequence[object] | None]
    """A statement and its parameters, as ``execute_concurrent`` takes them."""

WINDOW_PER_CONCURRENCY = 16
"""Requests per window of :meth:`CqlSession.execute_stream`, per request in flight."""


class CqlSession:
    """Executes, prepares and translates errors for one keyspace. ``levels``: the driver's consistency level
    of each operation; ``concurrency``: requests in flight per call; ``page_size``: fetch size of prepared
    statements; ``secrets``: scrubbed from every error."""

    def __init__(
        self,
        session_or_cluster_factory: Session | Callable[[], object],
        keyspace: str,
        *,
        levels: dict[Operation, int],
        concurrency: int,
        page_size: int,
        request_timeout: float,
        secrets: Sequence[str] = (),
    ):
        self.keyspace = keyspace
        self.levels = levels
        self.concurrency = concurrency
        self.page_size = page_size
        self.request_timeout = request_timeout
        self._secrets = tuple(s for s in secrets if s)
        self._lock = threading.Lock()
        self._prepared: dict[tuple[str, str, Operation | None], PreparedStatement] = {}  # (physical table, kind, op)
        self.serializers: dict[bytes, tuple[Serializer, ...] | None] = {}  # query id -> value serializers (requests.py)
        self._gone: list[Callable[[str], object]] = []
        self._closed = False
        self._factory: Callable[[], object] | None = None
        self._cluster: Cluster | None = None  # the driver's Cluster opened here (None: the caller owns the session)
        self._session: Session | None = None  # the driver's Session (None only while the first opens)
        if isinstance(session_or_cluster_factory, Session):
            self._session = session_or_cluster_factory
        elif callable(session_or_cluster_factory):
            self._factory = session_or_cluster_factory
            self._session = self._open_owned()
        else:
            raise InvalidInputError("expected a cassandra-driver Session or a callable returning a Cluster")
        self._pid = os.getpid()

    def _open_owned(self) -> Session:
        assert self._factory is not None, "only a session built from a cluster factory opens its own"
        try:
            self._cluster, session = open_session(self._factory)
        except Exception as exc:
            raise self.translate(exc, "connect", None) from exc
        return session

    # ----- the driver session ----------------------------------------------------------------------
    def driver(self) -> Session:
        """The driver session of this process (opened again after a fork when owned)."""
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
                    self.serializers = {}
                    self._session = self._open_owned()
                    self._pid = pid
        return self._session

    @property
    def cluster(self) -> Cluster | None:
        """The Cluster this session owns (None when it runs on a caller's Session)."""
        return self._cluster

    def quoted(self, phys: str) -> str:
        """``"keyspace"."table"`` of a physical table name."""
        return quoted(self.keyspace, phys)

    def describe(self) -> str:
        try:
            hosts = ",".join(str(h) for h in self._session.cluster.contact_points) if self._session is not None else "?"
        except Exception:
            hosts = "?"
        return f"cassandra keyspace {self.keyspace} at {hosts}"

    def close(self) -> None:
        """Shut down the cluster this session owns (in the process that opened it); nothing more runs."""
        if self._closed:
            return
        self._closed = True
        self.shut_down_owned()

    def shut_down_owned(self) -> None:
        if self._cluster is not None and os.getpid() == self._pid:
            try:
                self._cluster.shutdown()
            except Exception:
                pass

    # ----- errors ----------------------------------------------------------------------------------
    def when_table_gone(self, forget: Callable[[str], object]) -> None:
        """Call ``forget(table)`` whenever a table is found missing or dropped (a cache of its metadata)."""
        self._gone.append(forget)

    def table_gone(self, table: str) -> None:
        """Forget ``table``: its prepared statements, and whatever :meth:`when_table_gone` registered."""
        for forget in self._gone:
            forget(table)
        phys = physical_table_name(table)
        with self._lock:
            for key in [k for k in self._prepared if k[0] == phys]:
                self._prepared.pop(key, None)

    def translate(self, exc: BaseException, op: str, table: str | None, lwt: bool = False) -> Exception:
        error = translate(exc, op, table, self.keyspace, self._secrets, lwt)
        if table and isinstance(error, TableNotFoundError):
            self.table_gone(table)
        if UNAVAILABLE_HINT in str(error) and self._session is not None:
            error = StoreUnavailableError(f"{error}{down_note(self._session.cluster)}")  # which datacenter
        return error

    # ----- execution -------------------------------------------------------------------------------
    def execute(
        self,
        op: str,
        table: str | None,
        statement: str | Statement | PreparedStatement,
        params: Sequence[object] | None = None,
        timeout: float | None = None,
        lwt: bool = False,
    ) -> ResultSet:
        try:
            return self.driver().execute(statement, params, timeout=timeout or self.request_timeout)
        except (StoreUnavailableError, InvalidInputError):
            raise
        except Exception as exc:
            raise self.translate(exc, op, table, lwt) from exc

    def rows(self, op: str, table: str | None, rs: ResultSet) -> Iterator[tuple]:
        """The rows of a ResultSet as tuples; iterating fetches further pages, whose driver errors are
        translated like those of the first request."""
        try:
            for row in rs:
                yield row_tuple(row)
        except (StoreUnavailableError, InvalidInputError):
            raise
        except Exception as exc:
            raise self.translate(exc, op, table) from exc

    def concurrent(
        self, op: str, table: str | None, statements_and_params: Sequence[Request], lwt: bool = False
    ) -> list[ResultSet]:
        """Run concurrently; returns the ResultSets in order; raises on the first failure."""
        if not statements_and_params:
            return []
        try:
            results = execute_concurrent(
                self.driver(), statements_and_params, concurrency=self.concurrency, raise_on_first_error=True
            )
        except (StoreUnavailableError, InvalidInputError):
            raise
        except Exception as exc:
            raise self.translate(exc, op, table, lwt) from exc
        return [r.result_or_exc for r in results]

    def execute_stream(self, op: str, table: str | None, requests: Iterable[Request]) -> None:
        """Run ``requests`` (``(statement, params)``, possibly built lazily while earlier ones are in flight)
        concurrently, in windows of ``WINDOW_PER_CONCURRENCY * concurrency`` whose results are dropped: memory
        does not grow with the stream. Raises on the first failure (nothing more is sent then), translated."""
        window = WINDOW_PER_CONCURRENCY * self.concurrency
        it = iter(requests)
        sent = [0]

        def counted(part: Iterable[Request]) -> Iterator[Request]:
            for request in part:
                sent[0] += 1
                yield request

        try:
            session = self.driver()
            while True:
                before = sent[0]
                execute_concurrent(
                    session, counted(islice(it, window)), concurrency=self.concurrency, raise_on_first_error=True
                )
                if sent[0] - before < window:
                    break
        except (StoreUnavailableError, InvalidInputError):
            raise
        except Exception as exc:
            raise self.translate(exc, op, table) from exc

    def prepare(self, table: str, kind: str, operation: Operation | None = None) -> PreparedStatement:
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
            ps = self.driver().prepare(cql.format(t=self.quoted(phys)))
        except Exception as exc:
            raise self.translate(exc, "prepare", table) from exc
        ps.consistency_level = self.levels[operation or default_operation]
        if lwt:
            ps.serial_consistency_level = self.levels[Operation.SERIAL]
        ps.is_idempotent = idempotent
        ps.fetch_size = self.page_size
        with self._lock:
            self._prepared[key] = ps
        return ps
