"""TLS material for the suite's timestamp servers: a CA of its own, a server certificate and a client certificate it
signs, as PEM files, made with the ``cryptography`` package (requirements.lock). The keys are written mode 0600.

``make_material(directory, hosts)`` -> :class:`Material`: the CA (ca.pem, ca.key), a server certificate for
``hosts`` (server.pem, server.key: subjectAltName IP or DNS of each host, so a client verifies the name it dials;
extended key usage serverAuth) and a client certificate (client.pem, client.key: clientAuth) - what a server
started with ``--client-ca-file ca.pem`` accepts and a client presents (``timestamp_tls_cert`` / ``_key``).
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
    from cryptography.x509.oid import ObjectIdentifier

DAYS = 30


@dataclass(frozen=True)
class Material:
    """A CA's certificate (what clients pin, and what a server requiring client certificates trusts), a server
    certificate and key it signed, and a client certificate and key it signed."""

    ca: Path
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _name(common: str) -> x509.Name:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _key() -> EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _issue(ca_cert: x509.Certificate, ca_key: EllipticCurvePrivateKey, common: str, usage: ObjectIdentifier,
           names: Sequence[x509.GeneralName] = ()) -> tuple[x509.Certificate, EllipticCurvePrivateKey]:
    """A leaf certificate ``ca_key`` signs for ``common`` with the extended key usage ``usage`` (and the
    subjectAltName ``names`` when any); its new key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    now = datetime.datetime.now(datetime.UTC)
    key = _key()
    builder = (
        x509.CertificateBuilder().subject_name(_name(common)).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=DAYS))
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(names)), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def make_material(directory: Path, hosts: Sequence[str] = ("127.0.0.1", "localhost"), *,
                  name: str = "airflow-atlas timestamps test CA") -> Material:
    """A new CA in ``directory`` (ca.pem, ca.key), a server certificate for ``hosts`` it signs (server.pem,
    server.key) and a client certificate it signs (client.pem, client.key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = _key()
    ca_cert = (
        x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name)).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    server, server_key = _issue(ca_cert, ca_key, hosts[0], ExtendedKeyUsageOID.SERVER_AUTH, names)
    client, client_key = _issue(ca_cert, ca_key, "airflow-atlas timestamps test client",
                                ExtendedKeyUsageOID.CLIENT_AUTH)
    material = Material(ca=directory / "ca.pem", cert=directory / "server.pem", key=directory / "server.key",
                        client_cert=directory / "client.pem", client_key=directory / "client.key")
    material.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_private(directory / "ca.key", _pem_key(ca_key))
    material.cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    _write_private(material.key, _pem_key(server_key))
    material.client_cert.write_bytes(client.public_bytes(serialization.Encoding.PEM))
    _write_private(material.client_key, _pem_key(client_key))
    return material
