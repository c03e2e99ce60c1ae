"""TLS material for the suite's timestamp servers: a CA of its own and a server certificate it signs,
as PEM files, made with the ``cryptography`` package (requirements.lock). The keys are written mode 0600.

``make_ca(directory)`` -> (ca.pem, ca.key); ``make_server_cert(directory, ca, hosts)`` -> (cert.pem, key.pem):
subjectAltName IP (or DNS) of each host, so a client verifies the name it dials.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

DAYS = 30


@dataclass(frozen=True)
class Material:
    """A CA's certificate (what clients pin) and a server certificate and key it signed."""

    ca: Path
    cert: Path
    key: Path


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _name(common: str):  # noqa: ANN202 - cryptography's Name
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _key():  # noqa: ANN202
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:  # noqa: ANN001
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_material(directory: Path, hosts: Sequence[str] = ("127.0.0.1", "localhost"), *,
                  name: str = "airflow-atlas timestamps test CA") -> Material:
    """A new CA in ``directory`` (ca.pem, ca.key) and a server certificate for ``hosts`` it signs (server.pem,
    server.key)."""
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
    key = _key()
    cert = (
        x509.CertificateBuilder().subject_name(_name(hosts[0])).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    material = Material(ca=directory / "ca.pem", cert=directory / "server.pem", key=directory / "server.key")
    material.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_private(directory / "ca.key", _pem_key(ca_key))
    material.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_private(material.key, _pem_key(key))
    return material
