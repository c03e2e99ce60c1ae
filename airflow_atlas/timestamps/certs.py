"""Certificates for the timestamp servers' mutual TLS (``atlas-sweep certs DIR --host NAME ...``): a CA
of the deployment's own, a server certificate it signs for the names the clients dial, and a client certificate
it signs, as PEM files in one directory - what a deployment without a PKI of its own needs to serve TLS
(``scripts/deploy.sh``, the compose file's ``airflow-init``; docs/SECURITY.md).

The files (:class:`CertificateFiles`): ``ca.pem`` (what clients pin: ``timestamp_tls_ca``; what a server
requiring client certificates trusts: ``--client-ca-file``), ``ca.key``, ``server.pem`` / ``server.key``
(``--cert-file`` / ``--key-file``: subjectAltName IP or DNS of each host, extended key usage serverAuth) and
``client.pem`` / ``client.key`` (``timestamp_tls_cert`` / ``timestamp_tls_key``: clientAuth). Keys are ECDSA
P-256, written mode 0600.

Nothing is half-written or lost: the six files are made in a temporary directory inside ``DIR`` and linked
into place one by one (never over an existing file) only when all are written; a directory holding all six is kept as it is (the command is idempotent,
as a deployment's init runs it at every start) once its certificates are checked to be unexpired and its server
certificate to name every host asked for; one holding some of them is refused, naming what is there and what is missing - a CA is never replaced
under certificates it signed. Made with the ``cryptography`` package (an Airflow dependency), imported here only.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidInputError

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
    from cryptography.x509.oid import ObjectIdentifier

DEFAULT_DAYS = 825
"""How long the certificates are valid by default (about 27 months: the longest validity common TLS clients accept
for a server certificate); renew by making a new directory and restarting the servers and clients on it."""
CA_NAME = "airflow-atlas timestamps CA"
CLIENT_NAME = "airflow-atlas timestamps client"
FILE_NAMES = ("ca.pem", "ca.key", "server.pem", "server.key", "client.pem", "client.key")
_PRIVATE = frozenset({"ca.key", "server.key", "client.key"})


@dataclass(frozen=True)
class CertificateFiles:
    """The files of one certificate directory, and whether this call made them (False: kept as found)."""

    directory: Path
    created: bool
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def of(cls, directory: Path, created: bool) -> CertificateFiles:
        return cls(directory, created, directory / "ca.pem", directory / "server.pem", directory / "server.key",
                   directory / "client.pem", directory / "client.key")


def _general_name(host: str) -> x509.GeneralName:
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _checked_hosts(hosts: Sequence[str]) -> list[str]:
    names = [h.strip() for h in hosts]
    if not names or any(not h for h in names):
        raise InvalidInputError("certs: name at least one host the clients dial (--host NAME or address), "
                                f"none empty; got {list(hosts)!r}")
    for host in names:
        if any(c.isspace() for c in host) or (":" in host and not _is_ip(host)):
            raise InvalidInputError(f"certs: {host!r} is no host name or IP address (no port, no spaces)")
    return names


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _name(common: str) -> x509.Name:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _new_key() -> EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert: x509.Certificate) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _validity(days: int) -> tuple[datetime.datetime, datetime.datetime]:
    now = datetime.datetime.now(datetime.UTC)
    return now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)


def _make_ca(days: int, name: str) -> tuple[x509.Certificate, EllipticCurvePrivateKey]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    key = _new_key()
    start, end = _validity(days)
    cert = (
        x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name)).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _issue(ca: x509.Certificate, ca_key: EllipticCurvePrivateKey, common: str, usage: ObjectIdentifier,
           hosts: Sequence[str], days: int) -> tuple[x509.Certificate, EllipticCurvePrivateKey]:
    """A leaf certificate ``ca_key`` signs for ``common`` with the extended key usage ``usage`` and the
    subjectAltName of ``hosts`` (when any); its new key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    key = _new_key()
    start, end = _validity(days)
    builder = (
        x509.CertificateBuilder().subject_name(_name(common)).issuer_name(ca.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(h) for h in hosts]),
                                        critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def _load(path: Path) -> x509.Certificate:
    from cryptography import x509

    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"certs: {path} is no PEM certificate: {exc}") from None


def _names_in(server: x509.Certificate, path: Path) -> set[str]:
    """The hosts (DNS names and IP addresses, as text) the server certificate ``server`` names."""
    from cryptography import x509

    try:
        alt = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        raise InvalidInputError(f"certs: {path} names no host (no subjectAltName)") from None
    return {*alt.get_values_for_type(x509.DNSName), *(str(ip) for ip in alt.get_values_for_type(x509.IPAddress))}


def _check_kept(target: Path, names: Sequence[str]) -> None:
    """A full directory is kept only while its certificates are valid and its server certificate names every
    host: InvalidInputError naming the file and what is wrong otherwise."""
    now = datetime.datetime.now(datetime.UTC)
    for name in ("ca.pem", "server.pem", "client.pem"):
        cert = _load(target / name)
        if cert.not_valid_after_utc <= now:
            raise InvalidInputError(
                f"certs: {target / name} expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC: make the "
                "certificates anew in an empty directory (and restart the servers and clients on them)")
    lacking = [h for h in names if h not in _names_in(_load(target / "server.pem"), target / "server.pem")]
    if lacking:
        raise InvalidInputError(
            f"certs: {target / 'server.pem'} does not name {', '.join(lacking)}: clients dialling it would refuse "
            "the server - make the certificates anew in an empty directory (and restart the servers and clients "
            "on them)")


def _write(path: Path, data: bytes, private: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def make_certificates(directory: Path | str, hosts: Sequence[str], *, days: int = DEFAULT_DAYS,
                      ca_name: str = CA_NAME) -> CertificateFiles:
    """The CA, server and client certificates in ``directory`` for a server dialled as any of ``hosts``: made
    when the directory holds none of the six files (it is created when missing), kept when it holds all six, none expired,
    and the server certificate names every host; InvalidInputError naming the problem otherwise (nothing written)."""
    from cryptography.x509.oid import ExtendedKeyUsageOID

    names = _checked_hosts(hosts)
    if days < 1:
        raise InvalidInputError(f"certs: --days must be at least 1, got {days}")
    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise InvalidInputError(f"certs: {target} exists and is not a directory")
    present = [n for n in FILE_NAMES if (target / n).exists()]
    if present:
        missing = [n for n in FILE_NAMES if n not in present]
        if missing:
            raise InvalidInputError(
                f"certs: {target} holds {', '.join(present)} but not {', '.join(missing)}: refusing to "
                "make a new CA beside certificates another one signed - use an empty directory")
        _check_kept(target, names)
        return CertificateFiles.of(target, created=False)
    ca, ca_key = _make_ca(days, ca_name)
    server, server_key = _issue(ca, ca_key, names[0], ExtendedKeyUsageOID.SERVER_AUTH, names, days)
    client, client_key = _issue(ca, ca_key, CLIENT_NAME, ExtendedKeyUsageOID.CLIENT_AUTH, (), days)
    contents = {"ca.pem": _cert_pem(ca), "ca.key": _key_pem(ca_key), "server.pem": _cert_pem(server),
                "server.key": _key_pem(server_key), "client.pem": _cert_pem(client), "client.key": _key_pem(client_key)}
    target.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".certs-", dir=target))
    try:
        for name in FILE_NAMES:
            _write(staging / name, contents[name], name in _PRIVATE)
        for name in FILE_NAMES:  # a link never replaces a file another call made meanwhile
            try:
                os.link(staging / name, target / name)
            except FileExistsError:
                raise InvalidInputError(f"certs: {target / name} appeared while the certificates were "
                                        "made (another call at once?): use an empty directory") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return CertificateFiles.of(target, created=True)
