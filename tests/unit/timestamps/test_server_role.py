"""The timestamp server's Cassandra role and cluster (pure; the secured node enforces the role in
tests/integration/security/test_timestamp_server_role.py): the grants ``atlas-sweep grants --role timestamps``
prints; a store's refusal of the server's role reaching the client as a final error naming the permission (a
real gRPC server on loopback answers PERMISSION_DENIED as the server does; the client must not spend its retry
bound on it); a server of another cluster passed over for the store's own."""
from __future__ import annotations

import time
from concurrent import futures

import grpc
import pytest

from airflow_atlas.cli.args import build_parser
from airflow_atlas.errors import StoreAccessError, StorePermissionError, is_retriable
from airflow_atlas.grants import TIMESTAMP_SERVER_MODIFY, TIMESTAMP_SERVER_SELECT, timestamp_server_grants
from airflow_atlas.timestamps import timestamps_pb2 as pb
from airflow_atlas.timestamps.client import TimestampClient
from airflow_atlas.timestamps.record import TIMESTAMP_TABLE
from airflow_atlas.timestamps.rpc import LEADER_METADATA, service_handler
from airflow_atlas.transactions.schema import SCHEMA_TABLE
from tests.conftest import REPO_ROOT


def test_the_server_reads_the_registry_and_the_schema_and_writes_only_its_record():
    grants = timestamp_server_grants("ks", ["_timestamp", SCHEMA_TABLE, "_locks", "orders"])
    assert {(g.permission, g.resource) for g in grants} == {
        ("SELECT", "TABLE ks.atlas_metadata"),
        ("SELECT", "TABLE ks.atlas_transactions_schema"),
        ("SELECT", "TABLE ks.atlas_timestamp"),
        ("MODIFY", "TABLE ks.atlas_timestamp"),
    }
    assert all(g.why for g in grants)
    assert list(TIMESTAMP_SERVER_MODIFY) == [TIMESTAMP_TABLE]
    assert not any("KEYSPACE" in g.resource for g in grants), "never the whole keyspace: it reads no data"


def test_only_tables_of_the_store_are_named():
    """Cassandra refuses a grant on a table that does not exist; the registry always does."""
    assert [g.resource for g in timestamp_server_grants("ks", [])] == ["TABLE ks.atlas_metadata"]
    assert set(TIMESTAMP_SERVER_SELECT) == {"_metadata", SCHEMA_TABLE, TIMESTAMP_TABLE}


def test_the_cli_prints_the_timestamp_servers_role():
    args = build_parser().parse_args(["grants", "--role", "timestamps"])
    assert args.role == "timestamps"


def test_the_security_doc_names_the_servers_grants():
    text = (REPO_ROOT / "docs" / "SECURITY.md").read_text()
    assert "grants --role timestamps" in text
    for table in TIMESTAMP_SERVER_SELECT:
        assert f"`atlas{table}`" in text, table


class _Answering:
    """A real gRPC server on loopback answering every method of the timestamp service with ``answer(request,
    context)``; counts the requests."""

    def __init__(self, answer):
        self.answer = answer
        self.requests = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers((service_handler(
            dict.fromkeys(("FreshTimestamps", "CurrentBound", "Describe"), self._handle)),))
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def _handle(self, request, context):
        self.requests += 1
        return self.answer(request, context)


@pytest.fixture
def answering():
    made: list[_Answering] = []

    def make(answer) -> _Answering:
        made.append(_Answering(answer))
        return made[-1]

    yield make
    for server in made:
        server.server.stop(0).wait()


def refusing_with(details: str):
    """What the timestamp server answers when the store refuses its role."""

    def answer(request, context):
        context.abort(grpc.StatusCode.PERMISSION_DENIED, details)

    return answer


def test_a_store_refusing_the_servers_role_fails_the_draw_at_once_naming_the_permission(answering):
    details = ("cassandra get_lwt on _metadata in ks: the role has no SELECT permission on <table ks.atlas_metadata>; "
               "grant it (Unauthorized)")
    server = answering(refusing_with(details))
    client = TimestampClient("ks", [server.address], lambda: "", retry_seconds=10, rpc_timeout=1)
    started = time.monotonic()
    with pytest.raises(StorePermissionError) as refused:
        client.fresh_timestamp()
    assert time.monotonic() - started < 5, "a refusal no retry can fix was retried"
    assert server.requests == 1
    error = refused.value
    assert error.permission == "SELECT" and error.resource == "<table ks.atlas_metadata>", error
    assert server.address in str(error) and "grants --role timestamps" in str(error)
    assert not is_retriable(error)


def test_a_refusal_that_names_no_permission_is_an_access_error(answering):
    server = answering(refusing_with("cassandra open: the store refused the credentials"))
    client = TimestampClient("ks", [server.address], lambda: "", retry_seconds=10, rpc_timeout=1)
    with pytest.raises(StoreAccessError, match="refused the credentials") as refused:
        client.current_bound()
    assert not isinstance(refused.value, StorePermissionError)


def foreign(request, context):
    """A server of another Cassandra cluster, as the timestamp server answers a store it never serves
    (FAILED_PRECONDITION naming no leader)."""
    context.set_trailing_metadata(((LEADER_METADATA, ""),))
    context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                  "this timestamp server serves the Cassandra cluster 'a'; store 'ks' is on 'b'")


def own(request, context):
    return pb.FreshTimestampsResponse(start=100, count=request.count, epoch=1)


def test_a_client_given_another_clusters_servers_goes_on_to_the_leader_its_store_records(answering):
    """One address list for processes of several clusters (``$ATLAS_TIMESTAMP_SERVERS`` of a Spark worker started
    for another tier's cluster): the other cluster's servers answer as standbys naming no leader, and the client
    draws from the leader the store's record names."""
    other, leader = answering(foreign), answering(own)
    client = TimestampClient("ks", [other.address], lambda: leader.address, retry_seconds=5, rpc_timeout=1)
    try:
        assert client.fresh_timestamps(3) == range(100, 103)
        assert other.requests >= 1 and leader.requests >= 1
    finally:
        client.close()
