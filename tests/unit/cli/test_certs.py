"""``atlas-sweep certs`` (airflow_atlas/cli/certs.py): it needs no store, prints the flags and settings that use
the files (or them as JSON), keeps a full directory, and fails with exit 2 naming the problem."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_atlas.cli import EXIT_OK, EXIT_USAGE, main


def test_certs_needs_no_store_and_says_how_to_use_them(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("ATLAS_STORE_URL", raising=False)
    directory = tmp_path / "tls"
    assert main(["certs", str(directory), "--host", "127.0.0.11", "--host", "timestamps-1"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith(f"made: the timestamp servers' certificates in {directory}")
    assert f"--cert-file {directory / 'server.pem'} --key-file {directory / 'server.key'} " \
           f"--client-ca-file {directory / 'ca.pem'}" in out
    assert f"timestamp_tls_cert={directory / 'client.pem'} timestamp_tls_key={directory / 'client.key'}" in out
    assert main(["certs", str(directory), "--host", "timestamps-1", "--json"]) == EXIT_OK
    files = json.loads(capsys.readouterr().out)
    assert files == {"directory": str(directory), "created": False, "ca": str(directory / "ca.pem"),
                     "server_cert": str(directory / "server.pem"), "server_key": str(directory / "server.key"),
                     "client_cert": str(directory / "client.pem"), "client_key": str(directory / "client.key")}


@pytest.mark.parametrize("argv, message", [
    (["certs", "DIR"], "the following arguments are required: --host"),
    (["certs", "DIR", "--host", "h", "--days", "0"], "--days"),
    (["certs", "DIR", "--host", "h:9350"], "no port"),
])
def test_bad_arguments_exit_2_naming_the_problem(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    argv = [str(tmp_path / "tls") if a == "DIR" else a for a in argv]
    assert main(argv) == EXIT_USAGE
    assert message in capsys.readouterr().err
    assert not (tmp_path / "tls").exists()
