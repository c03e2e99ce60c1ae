"""An expired certificate is one clear, final TLS error (issue 22 item 3), over a real TLS handshake: a
loopback TLS server (127.0.0.11) presents a certificate for its address, signed by a CA the client pins,
whose validity ended yesterday. The CLI exits 5 (an access error: never retried) naming the TLS failure and
the expiry, and no password. (Restarting the secured node with an expired certificate would cost a node
restart for the same handshake; the node's trusted, untrusted and misnamed certificates are tested in
test_secured_node.py.)"""
from __future__ import annotations

import contextlib
import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator

import pytest

from tests.integration.cli.conftest import Cli

pytestmark = pytest.mark.cassandra

ADDRESS = "127.0.0.11"
PASSWORD = "exp1red:p@ss"


def _certificates(tmp_path) -> tuple[str, str, str]:
    """(CA PEM path, server certificate chain PEM path, server key PEM path); the server's certificate
    expired a day ago."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "expired-test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=30))
          .not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ADDRESS)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=10)).not_valid_after(now - datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ADDRESS))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = tmp_path / "ca.pem", tmp_path / "server.pem", tmp_path / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(paths[0]), str(paths[1]), str(paths[2])


@contextlib.contextmanager
def _tls_server(certfile: str, keyfile: str) -> Iterator[int]:
    """A loopback TLS server that completes handshakes (when a client accepts it) and closes; its port."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certfile, keyfile)
    server = socket.create_server((ADDRESS, 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with contextlib.suppress(OSError), context.wrap_socket(client, server_side=True):
                pass  # the client refuses the certificate during the handshake

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        server.close()
        thread.join(timeout=5)


def test_an_expired_certificate_is_a_final_tls_error_naming_the_expiry(tmp_path):
    ca, cert, key = _certificates(tmp_path)
    with _tls_server(cert, key) as port:
        url = f"cassandra://sweeper:{PASSWORD.replace(':', '%3A').replace('@', '%40')}@{ADDRESS}:{port}/atlas_expired?ssl=true&ssl_ca={ca}"
        result = Cli(url, tmp_path).run("status", timeout=120)
    assert result.returncode == 5, f"exit {result.returncode}:\n{result.stdout}\n{result.stderr}"
    assert "TLS handshake failed" in result.stderr and "certificate has expired" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert PASSWORD not in result.stdout + result.stderr and "p%40ss" not in result.stdout + result.stderr

