"""The pinned CA of a Spark job travels as content (airflow_atlas/spark/ca.py) and the URL helpers it uses."""
from __future__ import annotations

import pytest

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.url import url_option, url_secrets, with_url_option
from airflow_atlas.spark.ca import ca_directory, job_ca, task_url

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
URL = "cassandra://sweeper:p%40ss?w/rd@h1,h2:9042/ks?ssl=true&ssl_ca=/etc/ca.pem&protocol_version=5"


def test_url_option_and_with_url_option_keep_the_credentials():
    assert url_option(URL, "ssl_ca") == "/etc/ca.pem" and url_option(URL, "datacenter") is None
    changed = with_url_option(URL, "ssl_ca", "/tmp/x y.pem")
    assert changed.startswith("cassandra://sweeper:p%40ss?w/rd@h1,h2:9042/ks?")
    assert url_option(changed, "ssl_ca") == "/tmp/x y.pem" and url_option(changed, "protocol_version") == "5"
    assert url_secrets(changed) == url_secrets(URL)


def test_job_ca_reads_the_file_and_task_url_points_at_a_copy(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text(PEM)
    url = with_url_option(URL, "ssl_ca", str(ca))
    pem = job_ca(url)
    assert pem == PEM
    moved = task_url(url, pem)
    copy = url_option(moved, "ssl_ca")
    assert copy != str(ca) and copy.startswith(str(ca_directory())) and open(copy).read() == PEM
    open(copy, "w").write("tampered")
    assert open(url_option(task_url(url, pem), "ssl_ca")).read() == PEM  # rewritten when it differs
    assert task_url(url, None) == url and job_ca(URL.replace("&ssl_ca=/etc/ca.pem", "")) is None


@pytest.mark.parametrize("content", [None, "not a certificate"])
def test_an_unreadable_or_empty_ca_is_refused_on_the_driver(tmp_path, content):
    ca = tmp_path / "ca.pem"
    if content is not None:
        ca.write_text(content)
    with pytest.raises(InvalidInputError, match="ssl_ca") as refused:
        job_ca(with_url_option(URL, "ssl_ca", str(ca)))
    assert "p%40ss" not in str(refused.value) and "p@ss" not in str(refused.value)
