"""The pinned CA of a Spark job travels as content (airflow_atlas/spark/ca.py), on the job's parsed address."""
from __future__ import annotations

import pathlib

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.address import StoreAddress
from airflow_atlas.spark.ca import ca_directory, job_ca, task_address

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
ADDRESS = StoreAddress.from_url(
    "cassandra://sweeper:p%40ss?w/rd@h1,h2:9042/ks?ssl=true&ssl_ca=/etc/ca.pem&protocol_version=5"
)


def test_a_moved_ca_keeps_the_credentials_and_every_other_option():
    moved = ADDRESS.with_ssl_ca("/tmp/x y.pem")
    assert moved.ssl_ca == "/tmp/x y.pem" and moved.protocol_version == 5 and moved.password == "p@ss?w/rd"
    assert moved.to_url().startswith("cassandra://sweeper:p%40ss%3Fw%2Frd@h1,h2:9042/ks?")
    assert StoreAddress.from_url(moved.to_url()) == moved and moved.secrets() == ADDRESS.secrets()


def test_job_ca_reads_the_file_and_task_address_points_at_a_copy(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text(PEM)
    address = ADDRESS.with_ssl_ca(str(ca))
    pem = job_ca(address)
    assert pem == PEM
    copy = task_address(address, pem).ssl_ca
    assert copy is not None and copy != str(ca) and copy.startswith(str(ca_directory())) and open(copy).read() == PEM
    open(copy, "w").write("tampered")
    assert open(task_address(address, pem).ssl_ca or "").read() == PEM  # rewritten when it differs
    assert task_address(address, None) == address
    assert job_ca(StoreAddress.from_url("cassandra://h1/ks?ssl=true")) is None


@pytest.mark.parametrize("content", [None, "not a certificate"])
def test_an_unreadable_or_empty_ca_is_refused_on_the_driver(tmp_path, content):
    ca = tmp_path / "ca.pem"
    if content is not None:
        ca.write_text(content)
    with pytest.raises(InvalidInputError, match="ssl_ca") as refused:
        job_ca(ADDRESS.with_ssl_ca(str(ca)))
    assert "p%40ss" not in str(refused.value) and "p@ss" not in str(refused.value)


def test_the_timestamp_client_certificate_and_key_travel_in_the_task_and_the_key_lands_0600(tmp_path, monkeypatch):
    """Mutual TLS to the timestamp servers (issue 45): the driver reads the client certificate and key of the job's
    settings once; they travel in the (pickled) task, never shown by its repr; each task's settings name its
    machine's copies, the key's mode 0600 in the user's 0700 directory."""
    import pickle
    import stat

    from airflow_atlas.spark.ca import job_timestamp_tls
    from airflow_atlas.spark.executor import TaskSpec
    from airflow_atlas.spark.jobs import TargetedSweepJob
    from airflow_atlas.timestamps.tls import CA_ENV, CERT_ENV, KEY_ENV, client_tls
    from tests.tls_material import make_material

    for name in (CA_ENV, CERT_ENV, KEY_ENV):
        monkeypatch.delenv(name, raising=False)
    material = make_material(tmp_path / "tls")
    settings = {"timestamp_tls_ca": str(material.ca), "timestamp_tls_cert": str(material.client_cert),
                "timestamp_tls_key": str(material.client_key)}
    spec = TaskSpec(address=ADDRESS, settings=settings, max_attempts=1, app_id="app", job=TargetedSweepJob(pairs=[(0, "CONSERVATIVE")]),
                    timestamp_tls=job_timestamp_tls(settings))
    key_text = material.client_key.read_text()
    assert "PRIVATE KEY" not in repr(spec)
    on_executor = pickle.loads(pickle.dumps(spec))  # what Spark ships
    task = on_executor.task_settings()
    key = pathlib.Path(task["timestamp_tls_key"])
    assert key.read_text() == key_text and key != material.client_key and key.parent == ca_directory()
    assert stat.S_IMODE(key.stat().st_mode) == 0o600, oct(key.stat().st_mode)
    assert stat.S_IMODE(ca_directory().stat().st_mode) == 0o700
    assert pathlib.Path(task["timestamp_tls_cert"]).read_bytes() == material.client_cert.read_bytes()
    tls = client_tls(task["timestamp_tls_ca"], task["timestamp_tls_cert"], task["timestamp_tls_key"])
    assert tls is not None and tls.credentials() is not None  # the task's client accepts its copies


def test_a_copy_directory_another_user_could_read_is_refused(tmp_path, monkeypatch):
    import airflow_atlas.spark.ca as ca

    opened = tmp_path / "shared"
    opened.mkdir(mode=0o755)
    opened.chmod(0o755)
    monkeypatch.setattr(ca, "ca_directory", lambda: opened)
    with pytest.raises(InvalidInputError, match=f"{opened} .*must be a directory of uid .* with mode 0700"):
        task_address(ADDRESS, PEM)
