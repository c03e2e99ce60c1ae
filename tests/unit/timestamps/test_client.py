"""The timestamp client against real gRPC servers on loopback whose answers the test writes (no store):
coalescing (one request in flight, callers never given a block fetched before they asked), following a
FAILED_PRECONDITION to the leader it names, refusing a block that goes down, and failing with an error that
names the servers when none answers within the retry bound."""
from __future__ import annotations

import threading
import time
from concurrent import futures

import grpc
import pytest

from airflow_atlas.errors import InvalidInputError, StoreUnavailableError
from airflow_atlas.timestamps import timestamps_pb2 as pb
from airflow_atlas.timestamps.client import TimestampClient, TimestampOrderError
from airflow_atlas.timestamps.rpc import LEADER_METADATA, service_handler


class FakeServer:
    """A gRPC server whose FreshTimestamps hands out a counter (or what ``answer`` says)."""

    def __init__(self, *, delay: float = 0.0):
        self.next = 1
        self.requests: list[tuple[int, float, float]] = []  # (count, arrived, answered)
        self.delay = delay
        self.redirect: str | None = None
        self.start_override: int | None = None
        self.not_found = False
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((service_handler({
            "FreshTimestamps": self._fresh, "CurrentBound": self._bound, "Describe": self._describe}),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"
        self.server.start()

    def _fresh(self, request, context):
        arrived = time.monotonic()
        if self.not_found:
            context.abort(grpc.StatusCode.NOT_FOUND, "store x is not served by a timestamp server")
        if self.redirect is not None:
            context.set_trailing_metadata(((LEADER_METADATA, self.redirect),))
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "not the leader")
        time.sleep(self.delay)
        with self._lock:
            start = self.next if self.start_override is None else self.start_override
            self.next = start + request.count
            self.requests.append((request.count, arrived, time.monotonic()))
        return pb.FreshTimestampsResponse(start=start, count=request.count, epoch=1)

    def _bound(self, request, context):
        return pb.CurrentBoundResponse(issued=self.next - 1, epoch=1)

    def _describe(self, request, context):
        return pb.DescribeResponse(server=self.address)

    def stop(self) -> None:
        self.server.stop(0).wait()


@pytest.fixture
def servers():
    made: list[FakeServer] = []

    def make(**kwargs) -> FakeServer:
        made.append(FakeServer(**kwargs))
        return made[-1]

    yield make
    for server in made:
        server.stop()


def client(*addresses: str, locate=lambda: "", retry: float = 2.0) -> TimestampClient:
    return TimestampClient("ks", addresses, locate, retry_seconds=retry, rpc_timeout=0.5)


def test_concurrent_callers_share_requests_and_get_distinct_increasing_blocks(servers):
    server = servers(delay=0.01)
    c = client(server.address)
    got: list[tuple[float, float, range]] = []
    lock = threading.Lock()

    def draw() -> None:
        for _ in range(25):
            asked = time.monotonic()
            block = c.fresh_timestamps(2)
            with lock:
                got.append((asked, time.monotonic(), block))

    threads = [threading.Thread(target=draw) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    values = [v for _, _, block in got for v in block]
    assert len(values) == len(set(values)) == 16 * 25 * 2
    assert len(server.requests) < 16 * 25 / 2  # coalesced: far fewer requests than draws
    # in flight one at a time: each request arrived after the previous one was answered
    spans = sorted((arrived, answered) for _, arrived, answered in server.requests)
    assert all(later[0] >= earlier[1] - 0.005 for earlier, later in zip(spans, spans[1:], strict=False))
    # a caller that asked after another caller got its block gets larger timestamps
    ordered = sorted(got, key=lambda g: g[1])
    for asked, _, block in got:
        before = [b for _, ended, b in ordered if ended < asked]
        if before:
            assert block[0] > max(b[-1] for b in before)


def test_a_standby_redirects_to_the_leader(servers):
    leader, standby = servers(), servers()
    standby.redirect = leader.address
    c = client(standby.address)
    assert c.fresh_timestamp() == 1
    assert leader.requests and not standby.requests


def test_the_store_record_is_read_when_no_configured_server_answers(servers):
    leader = servers()
    located = []

    def locate() -> str:
        located.append(1)
        return leader.address

    c = client("127.0.0.1:1", locate=locate)  # nothing listens on port 1
    assert c.fresh_timestamp() == 1 and located


def test_a_block_not_above_what_was_received_is_refused(servers):
    server = servers()
    c = client(server.address)
    c.fresh_timestamps(10)
    server.start_override = 5
    with pytest.raises(TimestampOrderError, match="not above 10"):
        c.fresh_timestamp()


def test_no_server_answering_fails_naming_the_addresses_tried():
    c = client("127.0.0.1:1", retry=1.0)
    began = time.monotonic()
    with pytest.raises(StoreUnavailableError, match=r"127\.0\.0\.1:1") as failed:
        c.fresh_timestamp()
    assert time.monotonic() - began < 5
    assert "within 1s" in str(failed.value)


def test_a_store_no_server_serves_is_bad_input_at_once(servers):
    server = servers()
    server.not_found = True
    with pytest.raises(InvalidInputError, match="not served"):
        client(server.address, retry=10).fresh_timestamp()


def test_more_than_one_requests_worth_is_refused_early(servers):
    c = client(servers().address)
    with pytest.raises(InvalidInputError):
        c.fresh_timestamps((1 << 62) + 1)
