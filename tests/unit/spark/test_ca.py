"""The pinned CA of a Spark job travels as content (airflow_atlas/spark/ca.py), on the job's parsed address."""
from __future__ import annotations

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
