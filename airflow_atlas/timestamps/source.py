"""Where a store's timestamps come from: the one choice every drawer goes through (``AtlasStore.timestamps``).

- The embedded store: its cell (:mod:`.cell`), always - one machine, no server needed.
- A Cassandra store: its timestamp server (:mod:`.client`) once the store is adopted (:mod:`.record`), found
  from the ``timestamp_servers`` setting or the store's record; before adoption, its cell. The first draw of
  a process finds out which (the cell refuses an adopted store, and from then on this process asks the
  server); nothing ever draws from the cell of an adopted store.

Transactions, sweep (its sweep timestamps and the fresh timestamp of every delete and sentinel call), punch,
compaction, the CLI, the operators and Spark executors all draw through the object this returns.
"""
from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Protocol

from ..kvs.api import KeyValueService
from .addresses import DEFAULT_RETRY_SECONDS
from .cell import TimestampService
from .record import StoreServedByServerError, read_record

if TYPE_CHECKING:
    from .client import TimestampClient
    from .tls import ClientTls



class TimestampSource(Protocol):
    @property
    def served(self) -> bool:
        """Whether this process draws the store's timestamps from a timestamp server."""
        ...

    def ensure_tables(self) -> None: ...

    def fresh_timestamp(self) -> int: ...

    def fresh_timestamps(self, n: int) -> range: ...

    def current_bound(self, *, serial: bool = True) -> int: ...


class StoreTimestamps:
    """A Cassandra store's timestamps: from its timestamp server once it is adopted, else from its cell."""

    def __init__(self, kvs: KeyValueService, servers: tuple[str, ...] = (),
                 retry_seconds: float = DEFAULT_RETRY_SECONDS, tls: ClientTls | None = None):
        self._kvs = kvs
        self._servers = servers
        self._retry = retry_seconds
        self._tls = tls
        self._cell = TimestampService(kvs)
        self._served: TimestampClient | None = None

    @property
    def served(self) -> bool:
        """Whether this process has found the store adopted (it then draws only from the server)."""
        return self._served is not None

    def client(self) -> TimestampClient:
        """The store's server client (switching this process to it for good)."""
        if self._served is None:
            self._served = shared_client(self._kvs, self._servers, self._retry, self._tls)
        return self._served

    def ensure_tables(self) -> None:
        self._cell.ensure_tables()

    def fresh_timestamp(self) -> int:
        return self.fresh_timestamps(1)[0]

    def fresh_timestamps(self, n: int) -> range:
        if self._served is None:
            try:
                return self._cell.fresh_timestamps(n)
            except StoreServedByServerError:
                pass
        return self.client().fresh_timestamps(n)

    def current_bound(self, *, serial: bool = True) -> int:
        if self._served is None:
            try:
                return self._cell.current_bound(serial=serial)
            except StoreServedByServerError:
                pass
        return self.client().current_bound(serial=serial)


_CLIENTS: dict[tuple[int, str, tuple[str, ...], ClientTls | None], TimestampClient] = {}
"""(pid, store, servers, TLS files) -> the client: two stores of one process with other TLS files (another client
certificate, another CA) never share a client, and so never each other's channels."""
_CLIENTS_LOCK = threading.Lock()


def shared_client(kvs: KeyValueService, servers: tuple[str, ...], retry_seconds: float,
                  tls: ClientTls | None = None) -> TimestampClient:
    """The process's one client for the store ``kvs`` names (shared by every AtlasStore of it with the same TLS
    files, so that their requests coalesce); ``tls``: the CA that verifies the servers and the client's own
    certificate (TLS), None for plaintext."""
    from .client import TimestampClient

    store = str(getattr(kvs, "keyspace", "") or kvs.describe())
    key = (os.getpid(), kvs.describe(), servers, tls)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:

            def locate() -> str:
                record, _ = read_record(kvs, serial=False)
                return record.leader_address if record is not None else ""

            from .server import cluster_name

            client = _CLIENTS[key] = TimestampClient(store, servers, locate, retry_seconds=retry_seconds,
                                                     cluster=cluster_name(kvs), tls=tls)
        return client


def open_timestamps(kvs: KeyValueService, servers: tuple[str, ...] = (),
                    retry_seconds: float = DEFAULT_RETRY_SECONDS, tls: ClientTls | None = None) -> TimestampSource:
    if kvs.backend != "cassandra":
        return TimestampService(kvs)
    return StoreTimestamps(kvs, servers, retry_seconds, tls)
