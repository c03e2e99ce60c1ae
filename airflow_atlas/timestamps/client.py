"""The client of the timestamp server: every draw of a served store goes through one of these per process.

**Coalescing.** At most one request per store is in flight from a process. Callers that arrive while it is
in flight wait and then share the next request (its count is the sum of theirs), and the answer is split
among them in order. A caller is only ever given timestamps of a request sent after it asked, so what it
gets is larger than everything any client received before it asked (the server's guarantee carries over).
No thread of its own: the first waiting caller sends the next request (leader/follower), so the client
survives ``fork`` (a child builds its channels anew).

**Finding the server.** The addresses of the ``timestamp_servers`` setting, the leader a server names in
a FAILED_PRECONDITION answer, and the leader the store's record names (read from the store when no known
address answers). A server of another Cassandra cluster answers FAILED_PRECONDITION too (it never serves
this store): the client goes on to the store's own, so one address list may name several clusters' servers. A request is retried across a takeover for up to ``retry_seconds``; then
:class:`~airflow_atlas.errors.StoreUnavailableError` names every address tried and the last answer. A server
the store refuses (its role lacks a grant: PERMISSION_DENIED) fails the draw at once with
:class:`~airflow_atlas.errors.StorePermissionError` naming the server and the permission: no retry fixes grants.

**TLS.** With ``tls`` (a :class:`~.tls.ClientTls`: the ``timestamp_tls_ca`` setting, and for mutual TLS
``timestamp_tls_cert`` / ``timestamp_tls_key``) every channel is TLS, the servers' certificates verified against
that CA and the client's own certificate presented when it has one; a round over the addresses in which a TLS
handshake failed and no server answered fails the draw at once with :class:`~airflow_atlas.errors.StoreAccessError`
naming the server and the TLS problem (a wrong CA, a plaintext server): no retry fixes a certificate, and there is
no fallback to plaintext. A server that requires client certificates and refuses this client's (or its lack of
one) closes the connection after the handshake: grpc says only "Socket closed", as for a lost connection, so the
draw is retried within ``retry_seconds``; when a server closed the TLS connection at every attempt of the call
(a restarting server also refuses connections or answers in between) and none answered, the draw then fails with
StoreAccessError naming it and the likely cause (:func:`~.tls.closed_cause`).

**Checking.** Every block must lie above every timestamp this client received before; a server that broke
that rule would be a bug, and the client fails loudly instead of handing the block out.
"""
from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Literal, overload

import grpc

from ..errors import AtlasError, InvalidInputError, StoreAccessError, StorePermissionError, StoreUnavailableError
from ..validation import check_int
from . import timestamps_pb2 as pb
from .addresses import DEFAULT_RETRY_SECONDS
from .lease import MAX_REQUEST
from .rpc import LEADER_METADATA, TimestampsStub
from .tls import ClientTls, closed_cause, is_closed, is_handshake_failure, tls_failure

RPC_TIMEOUT_SECONDS = 2.0
"""One request's deadline: a paused or unreachable leader costs a caller at most this before the next address."""


class TimestampOrderError(AtlasError):
    """A timestamp server answered with a block not above what this client already received."""


_PERMISSION = re.compile(r"has no (\w+) permission on (<[^>]*>)")
"""How the server's message (the store's refusal, :func:`airflow_atlas.kvs.cassandra.errors.access_error`) names
the permission and the resource."""


def refused_by_the_store(address: str, details: str) -> StoreAccessError:
    """The error of a PERMISSION_DENIED answer: the store refused the server's role."""
    message = (f"timestamp server {address}: the store refused the server's role: {details} (the role of "
               "`atlas-sweep timestamps serve` needs the grants `atlas-sweep grants --role timestamps` prints, "
               "on every store it serves)")
    match = _PERMISSION.search(details)
    if match is None:
        return StoreAccessError(message)
    return StorePermissionError(message, permission=match.group(1), resource=match.group(2))


class _Ask:
    __slots__ = ("count", "done", "result", "error", "run_next")

    def __init__(self, count: int):
        self.count = count
        self.done = threading.Event()
        self.result: range | None = None
        self.error: BaseException | None = None
        self.run_next = False


class TimestampClient:
    """Draws the timestamps of store ``store`` (its keyspace) from its timestamp server. Thread-safe.

    ``servers``: addresses to try (the setting); ``locate``: reads the leader's address from the store's
    record ("" if none) - called only when no known address answers; ``cluster``: the store's Cassandra
    cluster_name, which the server checks against its own (a store of another cluster is refused); ``tls``: the
    CA that verifies the servers and the client's own certificate and key (TLS; read and checked here), None for
    plaintext."""

    def __init__(self, store: str, servers: Sequence[str], locate: Callable[[], str], *,
                 retry_seconds: float = DEFAULT_RETRY_SECONDS, rpc_timeout: float = RPC_TIMEOUT_SECONDS, cluster: str = "",
                 tls: ClientTls | None = None):
        self.store = store
        self.tls = tls
        self._credentials = tls.credentials() if tls is not None else None
        self.cluster = cluster
        self._servers = tuple(servers)
        self._locate = locate
        self._retry = float(retry_seconds)
        self._timeout = float(rpc_timeout)
        self._lock = threading.Lock()
        self._waiting: list[_Ask] = []
        self._running = False
        self._highest = 0
        self._leader: str | None = None
        self._pid = os.getpid()
        self._channels: dict[str, tuple[grpc.Channel, TimestampsStub]] = {}

    # ----- the TimestampSource interface -----------------------------------------------------------------
    served = True

    def ensure_tables(self) -> None:
        """Nothing to create: an adopted store has its ``_timestamp`` table."""

    def fresh_timestamp(self) -> int:
        return self.fresh_timestamps(1)[0]

    def fresh_timestamps(self, n: int) -> range:
        check_int(n, "the number of timestamps to draw", 1, MAX_REQUEST)
        ask = _Ask(n)
        with self._lock:
            if os.getpid() != self._pid:
                self._after_fork()
            self._waiting.append(ask)
            lead = not self._running
            self._running = True
        if not lead:
            ask.done.wait()
            if not ask.run_next:
                return self._outcome(ask)
        self._run_one_batch()
        return self._outcome(ask)

    def current_bound(self, *, serial: bool = True) -> int:
        """The highest timestamp the server handed out (issues nothing)."""
        response = self._call("CurrentBound", pb.CurrentBoundRequest(store=self.store, cluster=self.cluster))
        return int(response.issued)

    def close(self) -> None:
        with self._lock:
            channels, self._channels = self._channels, {}
        for channel, _ in channels.values():
            channel.close()

    # ----- coalescing --------------------------------------------------------------------------------------
    def _run_one_batch(self) -> None:
        with self._lock:  # everyone waiting, up to one request's worth (the rest go in the next request)
            total, cut = 0, 0
            while cut < len(self._waiting) and total + self._waiting[cut].count <= MAX_REQUEST:
                total += self._waiting[cut].count
                cut += 1
            batch, self._waiting = self._waiting[:cut], self._waiting[cut:]
        try:
            block = self._fetch(sum(a.count for a in batch))
        except BaseException as exc:  # every caller of the batch sees the failure
            for a in batch:
                a.error = exc
        else:
            at = block.start
            for a in batch:
                a.result = range(at, at + a.count)
                at += a.count
        with self._lock:
            if self._waiting:
                self._waiting[0].run_next = True  # the next request is sent by the first caller waiting
                self._waiting[0].done.set()
            else:
                self._running = False
        for a in batch:
            a.done.set()

    @staticmethod
    def _outcome(ask: _Ask) -> range:
        ask.done.wait()
        if ask.error is not None:
            raise ask.error
        assert ask.result is not None
        return ask.result

    def _fetch(self, n: int) -> range:
        response = self._call("FreshTimestamps", pb.FreshTimestampsRequest(store=self.store, count=n, cluster=self.cluster))
        if response.count != n or response.start <= self._highest:
            raise TimestampOrderError(
                f"timestamp server {self._leader} answered [{response.start}, +{response.count}) for {n} "
                f"timestamps, not above {self._highest} already received: refusing it"
            )
        self._highest = response.start + n - 1
        return range(response.start, response.start + n)

    # ----- requests with failover --------------------------------------------------------------------------
    @overload
    def _call(self, method: Literal["CurrentBound"], request: pb.CurrentBoundRequest) -> pb.CurrentBoundResponse: ...

    @overload
    def _call(
        self, method: Literal["FreshTimestamps"], request: pb.FreshTimestampsRequest
    ) -> pb.FreshTimestampsResponse: ...

    def _call(
        self, method: Literal["CurrentBound", "FreshTimestamps"], request: pb.CurrentBoundRequest | pb.FreshTimestampsRequest
    ) -> pb.CurrentBoundResponse | pb.FreshTimestampsResponse:
        deadline = time.monotonic() + self._retry
        pause = 0.02
        tried: list[str] = []
        last = "no address to try: set timestamp_servers, or start a server for the store"
        located = False
        quiet: dict[str, float] = {}  # address -> when to ask it again (it let a request time out in this call)
        other: set[str] = set()  # addresses that gave another answer than "Socket closed" in this call
        while True:
            handshake: str | None = None  # a TLS failure of this round: fatal unless another server answers
            closed: list[str] = []  # servers that closed the connection this round ("Socket closed", tls.py)
            for address in self._candidates(located):
                if quiet.get(address, 0.0) > time.monotonic():
                    continue  # a paused or cut-off leader: do not spend another request timeout on it yet
                if address not in tried:
                    tried.append(address)
                try:
                    response = getattr(self._stub(address), method)(request, timeout=self._timeout)
                except grpc.RpcError as exc:
                    code = exc.code()
                    details = exc.details()
                    if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
                        raise InvalidInputError(f"timestamp server {address}: {details}") from None
                    if code == grpc.StatusCode.PERMISSION_DENIED:
                        raise refused_by_the_store(address, details) from None
                    if code == grpc.StatusCode.FAILED_PRECONDITION:
                        leader = dict(exc.trailing_metadata() or ()).get(LEADER_METADATA, "")
                        if leader and leader != address and leader not in quiet:
                            self._leader = leader
                    else:
                        if self._leader == address:
                            self._leader = None
                        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                            quiet[address] = time.monotonic() + self._timeout
                        if code == grpc.StatusCode.UNAVAILABLE and is_handshake_failure(details):
                            handshake = handshake or tls_failure(address, details,
                                                                 ca=self.tls.ca if self.tls else None)
                    if code == grpc.StatusCode.UNAVAILABLE and is_closed(details):
                        closed.append(address)
                    else:
                        other.add(address)
                    last = f"{address}: {code.name} {details}"
                    continue
                self._leader = address
                return response
            if handshake is not None:
                raise StoreAccessError(f"store {self.store!r}: {handshake}")
            if time.monotonic() >= deadline:
                refusing = [a for a in closed if a not in other]  # closed at every attempt: refuses this client
                if refusing and self.tls is not None:
                    raise StoreAccessError(
                        f"store {self.store!r}: timestamp server {', '.join(refusing)} closed the TLS connection "
                        f"('Socket closed') at every attempt for {self._retry:g}s: {closed_cause(self.tls)} "
                        f"(last answer: {last})"
                    )
                raise StoreUnavailableError(
                    f"no timestamp server served store {self.store!r} within {self._retry:g}s (tried "
                    f"{', '.join(tried) or 'none'}; last answer: {last})"
                    + (f" {closed_cause(self.tls)}" if closed else "")
                )
            time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
            pause = min(pause * 2, 0.5)
            located = True

    def _candidates(self, locate: bool) -> list[str]:
        found = [self._leader] if self._leader else []
        found += [s for s in self._servers if s not in found]
        if locate or not found:
            try:
                recorded = self._locate()
            except AtlasError:
                recorded = ""
            if recorded and recorded not in found:
                found.insert(0, recorded)
        return found

    def _stub(self, address: str) -> TimestampsStub:
        with self._lock:
            if os.getpid() != self._pid:
                self._after_fork()
            entry = self._channels.get(address)
            if entry is None:
                options = [("grpc.enable_retries", 0)]
                channel = (grpc.insecure_channel(address, options=options) if self._credentials is None
                           else grpc.secure_channel(address, self._credentials, options=options))
                entry = self._channels[address] = (channel, TimestampsStub(channel))
            return entry[1]

    def _after_fork(self) -> None:
        # The parent's channels and waiting callers belong to the parent (never close its sockets here).
        self._channels = {}
        self._waiting = []
        self._running = False
        self._pid = os.getpid()
