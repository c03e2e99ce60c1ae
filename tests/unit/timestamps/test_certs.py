"""``atlas-sweep certs`` (airflow_atlas/timestamps/certs.py): the files it makes, their modes and names,
a real mutual TLS handshake with them over loopback, idempotence, and the refusals that keep a CA from being
replaced under the certificates it signed."""
from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.timestamps.certs import FILE_NAMES, make_certificates


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_it_makes_a_ca_a_server_and_a_client_certificate(tmp_path: Path) -> None:
    files = make_certificates(tmp_path / "tls", ["timestamps-1", "127.0.0.11"], days=10)
    assert files.created
    assert sorted(p.name for p in files.directory.iterdir()) == sorted(FILE_NAMES)  # no staging left behind
    for name in FILE_NAMES:
        mode = (files.directory / name).stat().st_mode & 0o777
        assert mode == (0o600 if name.endswith(".key") else 0o644), (name, oct(mode))
    ca, server, client = _load(files.ca), _load(files.server_cert), _load(files.client_cert)
    server.verify_directly_issued_by(ca)
    client.verify_directly_issued_by(ca)
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["timestamps-1"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.11"]
    usage = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH in usage
    assert (server.not_valid_after_utc - server.not_valid_before_utc).days == 10


def test_a_mutual_tls_handshake_with_them(tmp_path: Path) -> None:
    """A TLS server with server.pem that requires a client certificate from ca.pem accepts client.pem, and a
    client pinning ca.pem verifies the server by the address it dials."""
    files = make_certificates(tmp_path, ["127.0.0.1"])
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(files.ca))
    server_context.load_cert_chain(str(files.server_cert), str(files.server_key))
    server_context.verify_mode = ssl.CERT_REQUIRED
    client_context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(files.ca))
    client_context.load_cert_chain(str(files.client_cert), str(files.client_key))
    seen: list[str] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            conn, _ = listener.accept()
            with server_context.wrap_socket(conn, server_side=True) as tls:
                peer = tls.getpeercert()
                seen.append(dict(x[0] for x in peer["subject"])["commonName"])
                tls.sendall(b"ok")

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                client_context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert tls.recv(2) == b"ok"
        thread.join(10)
    assert seen == ["airflow-atlas timestamps client"]


def test_a_full_directory_is_kept_and_a_partial_one_refused(tmp_path: Path) -> None:
    first = make_certificates(tmp_path, ["timestamps-1", "timestamps-2"])
    before = {n: (tmp_path / n).read_bytes() for n in FILE_NAMES}
    again = make_certificates(tmp_path, ["timestamps-2"])  # every host named: kept
    assert first.created and not again.created
    assert {n: (tmp_path / n).read_bytes() for n in FILE_NAMES} == before
    with pytest.raises(InvalidInputError, match="does not name timestamps-3"):
        make_certificates(tmp_path, ["timestamps-1", "timestamps-3"])
    (tmp_path / "client.key").unlink()
    with pytest.raises(InvalidInputError, match=r"holds ca\.pem, ca\.key, server\.pem, server\.key, client\.pem "
                                                r"but not client\.key"):
        make_certificates(tmp_path, ["timestamps-1"])
    assert {n: (tmp_path / n).read_bytes() for n in FILE_NAMES if n != "client.key"} == \
        {n: v for n, v in before.items() if n != "client.key"}
    assert not (tmp_path / "client.key").exists()


@pytest.mark.parametrize("hosts, message", [
    ([], "at least one host"), ([" "], "at least one host"), (["a b"], "no host name"),
    (["timestamps-1:9350"], "no port"),
])
def test_bad_hosts_are_refused_before_anything_is_written(tmp_path: Path, hosts: list[str], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        make_certificates(tmp_path / "tls", hosts)
    assert not (tmp_path / "tls").exists()


def test_bad_days_and_a_file_for_a_directory_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="--days must be at least 1"):
        make_certificates(tmp_path / "tls", ["h"], days=0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidInputError, match="not a directory"):
        make_certificates(tmp_path / "file", ["h"])


def test_an_expired_certificate_is_not_kept(tmp_path: Path) -> None:
    """A full directory whose client certificate has expired is refused, naming the file and the date."""
    import datetime

    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    make_certificates(tmp_path, ["h"])
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "old client")])
    past = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    old = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
           .serial_number(1).not_valid_before(past).not_valid_after(past + datetime.timedelta(days=1))
           .sign(key, hashes.SHA256()))
    (tmp_path / "client.pem").write_bytes(old.public_bytes(serialization.Encoding.PEM))
    with pytest.raises(InvalidInputError, match=r"client\.pem expired on 2020-01-02"):
        make_certificates(tmp_path, ["h"])
