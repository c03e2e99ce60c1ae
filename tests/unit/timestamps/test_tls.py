"""TLS of the timestamp server's gRPC (issue 45), without a store: the ``timestamp_tls_ca`` setting (parsing,
validation, ``$ATLAS_TIMESTAMP_TLS_CA``), the checks of the CA, certificate and key files (each bad file named), the
Spark job's copy of the CA, and the client against real gRPC servers on loopback: a TLS draw, a server whose
certificate another CA signed and a plaintext server fail at once naming the server and TLS, a plaintext client of a
TLS server fails naming the likely cause - never a fallback to plaintext."""
from __future__ import annotations

import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError, StoreAccessError, StoreUnavailableError, is_retriable
from airflow_atlas.settings_resolver import Rank, resolve, text_layer
from airflow_atlas.spark.ca import job_timestamp_ca, task_settings
from airflow_atlas.store import AtlasStore
from airflow_atlas.timestamps import timestamps_pb2 as pb
from airflow_atlas.timestamps.client import TimestampClient
from airflow_atlas.timestamps.rpc import service_handler
from airflow_atlas.timestamps.tls import CA_ENV, ca_from_environment, is_handshake_failure, read_ca, server_credentials
from tests.tls_material import Material, make_material


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> Material:
    return make_material(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory) -> Material:
    return make_material(tmp_path_factory.mktemp("other-tls"), name="another CA")


# ----- the setting ---------------------------------------------------------------------------------------
def test_the_setting_is_null_by_default_and_takes_an_absolute_path(tls):
    assert StoreConfig().timestamp_tls_ca is None
    assert StoreConfig(timestamp_tls_ca=str(tls.ca)).timestamp_tls_ca == str(tls.ca)
    resolved = resolve(text_layer(Rank.COMMAND_LINE, {"timestamp_tls_ca": f" {tls.ca} "}, "--set"))
    assert resolved.timestamp_tls_ca == str(tls.ca)
    assert resolve(text_layer(Rank.COMMAND_LINE, {"timestamp_tls_ca": "null"}, "--set")).timestamp_tls_ca is None
    assert StoreConfig(timestamp_tls_ca=str(tls.ca)).to_json()["timestamp_tls_ca"] == str(tls.ca)


@pytest.mark.parametrize("value", ["ca.pem", "./certs/ca.pem", "", 3, True])
def test_a_relative_path_or_a_non_text_is_refused_naming_the_setting(value):
    with pytest.raises(InvalidInputError, match="timestamp_tls_ca") as refused:
        StoreConfig(timestamp_tls_ca=value)
    assert "absolute file path" in str(refused.value) or "got" in str(refused.value)


def test_a_relative_path_from_the_command_line_is_refused_naming_the_layer():
    with pytest.raises(InvalidInputError, match=r"timestamp_tls_ca must be an absolute file path.*--set"):
        resolve(text_layer(Rank.COMMAND_LINE, {"timestamp_tls_ca": "ca.pem"}, "--set"))


def test_the_environment_names_the_ca_when_the_setting_is_null(tls, tmp_path, monkeypatch):
    monkeypatch.delenv(CA_ENV, raising=False)
    assert ca_from_environment() is None
    monkeypatch.setenv(CA_ENV, str(tls.ca))
    assert ca_from_environment() == str(tls.ca)
    with AtlasStore.open(f"sqlite:///{tmp_path / 'a.db'}") as store:
        assert store.timestamp_tls_ca == str(tls.ca)
    with AtlasStore.open(f"sqlite:///{tmp_path / 'a.db'}", StoreConfig(timestamp_tls_ca=str(other_path(tmp_path)))) as store:
        assert store.timestamp_tls_ca == str(other_path(tmp_path))  # the setting wins
    monkeypatch.setenv(CA_ENV, "relative/ca.pem")
    with pytest.raises(InvalidInputError, match=rf"\${CA_ENV} must be the absolute path"):
        ca_from_environment()


def other_path(tmp_path: Path) -> Path:
    return tmp_path / "elsewhere" / "ca.pem"


# ----- the files -------------------------------------------------------------------------------------------
def test_a_missing_empty_or_invalid_ca_file_is_refused_naming_it(tls, tmp_path):
    assert read_ca(str(tls.ca)).startswith(b"-----BEGIN CERTIFICATE-----")
    missing = tmp_path / "missing.pem"
    with pytest.raises(InvalidInputError, match=f"cannot read the timestamp servers' CA file .*{missing}"):
        read_ca(str(missing))
    empty = tmp_path / "empty.pem"
    empty.write_text("")
    with pytest.raises(InvalidInputError, match=f"{empty} holds no PEM certificate"):
        read_ca(str(empty))
    broken = tmp_path / "broken.pem"
    broken.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    with pytest.raises(InvalidInputError, match=f"{broken} is not a valid PEM certificate bundle"):
        read_ca(str(broken))
    with pytest.raises(InvalidInputError, match=str(missing)):
        TimestampClient("ks", ["127.0.0.1:1"], lambda: "", tls_ca=str(missing))  # at construction, before a draw


def test_the_servers_certificate_and_key_are_checked_naming_the_file(tls, other_ca, tmp_path):
    assert server_credentials(str(tls.cert), str(tls.key)) is not None
    missing = tmp_path / "missing.pem"
    with pytest.raises(InvalidInputError, match=f"certificate file \\(--cert-file\\) {missing}"):
        server_credentials(str(missing), str(tls.key))
    with pytest.raises(InvalidInputError, match=f"key file \\(--key-file\\) {missing}"):
        server_credentials(str(tls.cert), str(missing))
    with pytest.raises(InvalidInputError, match=f"--cert-file\\) {tls.key} holds no PEM certificate"):
        server_credentials(str(tls.key), str(tls.key))
    with pytest.raises(InvalidInputError, match=f"--key-file\\) {tls.cert} has mode|--key-file\\) {tls.cert} holds no"):
        server_credentials(str(tls.cert), str(tls.cert))
    with pytest.raises(InvalidInputError, match=f"{tls.cert} and key {other_ca.key} are not a valid pair"):
        server_credentials(str(tls.cert), str(other_ca.key))
    readable = tmp_path / "readable.key"
    readable.write_bytes(tls.key.read_bytes())
    readable.chmod(0o644)
    with pytest.raises(InvalidInputError, match=f"{readable} has mode 644: it must not be readable"):
        server_credentials(str(tls.cert), str(readable))


def test_a_spark_job_ships_the_timestamp_ca_to_its_executors(tls, monkeypatch, tmp_path):
    monkeypatch.delenv(CA_ENV, raising=False)
    assert job_timestamp_ca({"timestamp_tls_ca": None}) is None
    assert task_settings({"a": 1}, None) == {"a": 1}
    pem = job_timestamp_ca({"timestamp_tls_ca": str(tls.ca)})
    assert pem == tls.ca.read_text()
    monkeypatch.setenv(CA_ENV, str(tls.ca))
    assert job_timestamp_ca({"timestamp_tls_ca": None}) == pem  # the driver's environment, shipped
    copied = task_settings({"timestamp_tls_ca": "/only/on/the/driver.pem", "a": 1}, pem)
    assert copied["a"] == 1 and Path(copied["timestamp_tls_ca"]).read_text() == pem
    with pytest.raises(InvalidInputError, match="missing.pem"):
        job_timestamp_ca({"timestamp_tls_ca": str(tmp_path / "missing.pem")})


def test_what_grpc_reports_for_a_failed_handshake_is_recognised():
    assert is_handshake_failure("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Tls "
                                "handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: CERTIFICATE_VERIFY_FAILED")
    assert not is_handshake_failure("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: "
                                    "Failed to connect to remote host: Connection refused")
    assert not is_handshake_failure("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Tls "
                                    "handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SYSCALL")  # I/O: retried
    assert not is_handshake_failure("")


# ----- the client against real gRPC servers ------------------------------------------------------------
class Server:
    def __init__(self, tls: Material | None):
        self.next = 1
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers((service_handler({
            "FreshTimestamps": self._fresh, "CurrentBound": self._bound,
            "Describe": lambda r, c: pb.DescribeResponse(server="x")}),))
        port = (self.server.add_insecure_port("127.0.0.1:0") if tls is None else
                self.server.add_secure_port("127.0.0.1:0", server_credentials(str(tls.cert), str(tls.key))))
        self.address = f"127.0.0.1:{port}"
        self.server.start()

    def _fresh(self, request, context):
        start, self.next = self.next, self.next + request.count
        return pb.FreshTimestampsResponse(start=start, count=request.count, epoch=1)

    def _bound(self, request, context):
        return pb.CurrentBoundResponse(issued=self.next - 1, epoch=1)


@pytest.fixture(scope="module")
def tls_server(tls):
    server = Server(tls)
    yield server
    server.server.stop(0).wait()


@pytest.fixture(scope="module")
def plain_server():
    server = Server(None)
    yield server
    server.server.stop(0).wait()


def test_a_client_with_the_ca_draws_over_tls(tls, tls_server):
    client = TimestampClient("ks", [tls_server.address], lambda: "", tls_ca=str(tls.ca))
    first = client.fresh_timestamps(3)
    assert client.fresh_timestamp() > first[-1] and client.current_bound() >= 4
    client.close()


def test_a_server_whose_certificate_another_ca_signed_fails_at_once_naming_it(other_ca, tls_server):
    client = TimestampClient("ks", [tls_server.address], lambda: "", retry_seconds=20, tls_ca=str(other_ca.ca))
    started = time.monotonic()
    with pytest.raises(StoreAccessError) as refused:
        client.fresh_timestamp()
    assert time.monotonic() - started < 10, "a certificate problem was retried as if the server were down"
    text = str(refused.value)
    assert f"timestamp server {tls_server.address}: TLS handshake failed" in text and str(other_ca.ca) in text, text
    assert not is_retriable(refused.value)
    client.close()


def test_a_tls_client_of_a_plaintext_server_fails_at_once_never_falling_back(tls, plain_server):
    client = TimestampClient("ks", [plain_server.address], lambda: "", retry_seconds=20, tls_ca=str(tls.ca))
    with pytest.raises(StoreAccessError, match=f"timestamp server {plain_server.address}: TLS handshake failed"):
        client.fresh_timestamp()
    assert plain_server.next == 1, "the plaintext server answered a request"
    client.close()


def test_a_tls_failure_does_not_hide_a_server_that_answers(tls, plain_server, tls_server):
    client = TimestampClient("ks", [plain_server.address, tls_server.address], lambda: "", tls_ca=str(tls.ca))
    assert client.fresh_timestamp() >= 1
    client.close()


def test_a_plaintext_client_of_a_tls_server_fails_naming_the_likely_cause(tls_server):
    client = TimestampClient("ks", [tls_server.address], lambda: "", retry_seconds=1)
    with pytest.raises(StoreUnavailableError) as failed:
        client.fresh_timestamp()
    text = str(failed.value)
    assert tls_server.address in text and "timestamp_tls_ca" in text and CA_ENV in text, text
    client.close()
