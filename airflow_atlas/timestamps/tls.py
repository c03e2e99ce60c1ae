"""TLS of the timestamp server's gRPC (issue 45): the server's certificate and key, the CA clients verify it with.

A client that an impostor can answer could be handed timestamps below ones already handed out (snapshot
isolation broken, deleted data back), so on any network that is not private the servers serve TLS
(``atlas-sweep timestamps serve --cert-file FILE --key-file FILE``, :func:`server_credentials`) and every client
pins the CA that signed their certificates (the ``timestamp_tls_ca`` setting, else ``$ATLAS_TIMESTAMP_TLS_CA``:
:func:`ca_from_environment`, :func:`read_ca`). A client with a CA talks only TLS: a server whose certificate the
CA did not sign, or that serves plaintext, fails the draw naming the server and the TLS problem
(:func:`tls_failure`); there is no fallback to plaintext. Every file is read and checked when it is named - a
missing, unreadable or invalid one is an :class:`~airflow_atlas.errors.InvalidInputError` naming it.
Only grpc's and the standard library's public API.
"""
from __future__ import annotations

import os
import ssl
from pathlib import Path

import grpc

from ..errors import InvalidInputError

CA_ENV = "ATLAS_TIMESTAMP_TLS_CA"
"""The environment variable naming the timestamp servers' CA file when the ``timestamp_tls_ca`` setting is null
(as ``$ATLAS_TIMESTAMP_SERVERS`` names the servers)."""
PEM_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"
_HANDSHAKE = "handshake failed"
_PROTOCOL = "ssl_error_ssl"
"""What grpc's UNAVAILABLE details say when the TLS handshake failed on the protocol - a certificate refused, a
peer that speaks no TLS (grpc 1.85: "Tls handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: ...
CERTIFICATE_VERIFY_FAILED" / "BAD_SIGNATURE" / "WRONG_VERSION_NUMBER") -, not on I/O (SSL_ERROR_SYSCALL: a
connection lost mid-handshake, as when an instance is killed; retried like any lost connection)."""


def ca_from_environment() -> str | None:
    """The CA file ``$ATLAS_TIMESTAMP_TLS_CA`` names (None when unset or empty); InvalidInputError when relative."""
    text = os.environ.get(CA_ENV, "").strip()
    if not text:
        return None
    if not text.startswith("/"):
        raise InvalidInputError(f"${CA_ENV} must be the absolute path of the timestamp servers' CA file, got {text!r}")
    return text


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"cannot read the {what} {path}: {exc.strerror or exc.__class__.__name__}") from None


def read_ca(path: str, what: str = "timestamp servers' CA file (timestamp_tls_ca)") -> bytes:
    """The PEM bytes of the CA file ``path``, checked: InvalidInputError naming the file when it is missing,
    unreadable, or holds no certificate the TLS library loads."""
    data = _read(path, what)
    if PEM_CERTIFICATE not in data:
        raise InvalidInputError(f"the {what} {path} holds no PEM certificate")
    try:
        ssl.create_default_context(cadata=data.decode("ascii"))
    except (ssl.SSLError, ValueError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"the {what} {path} is not a valid PEM certificate bundle: {exc}") from None
    return data


def server_credentials(cert_file: str, key_file: str) -> grpc.ServerCredentials:
    """The server's TLS credentials from its certificate (chain) and private key, PEM files. Both are read and
    checked to be a matching pair now, so a bad file fails the start naming it, not the first client's handshake."""
    cert = _read(cert_file, "timestamp server's certificate file (--cert-file)")
    key = _read(key_file, "timestamp server's key file (--key-file)")
    if PEM_CERTIFICATE not in cert:
        raise InvalidInputError(f"the timestamp server's certificate file (--cert-file) {cert_file} holds no PEM certificate")
    mode = os.stat(key_file).st_mode & 0o777
    if mode & 0o077:
        raise InvalidInputError(f"the timestamp server's key file (--key-file) {key_file} has mode {mode:o}: it must "
                                "not be readable by group/others (use 0600)")
    if b"PRIVATE KEY-----" not in key:
        raise InvalidInputError(f"the timestamp server's key file (--key-file) {key_file} holds no PEM private key")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert_file, key_file)
    except ssl.SSLError as exc:
        raise InvalidInputError(
            f"the timestamp server's certificate {cert_file} and key {key_file} are not a valid pair: {exc}"
        ) from None
    return grpc.ssl_server_credentials([(key, cert)])


def channel_credentials(ca: bytes) -> grpc.ChannelCredentials:
    """A client's credentials: the servers' certificates verified against ``ca`` (and their names: the address)."""
    return grpc.ssl_channel_credentials(root_certificates=ca)


def is_handshake_failure(details: str) -> bool:
    """Whether grpc's details of an UNAVAILABLE answer say that the TLS handshake failed."""
    text = (details or "").lower()
    return _HANDSHAKE in text and _PROTOCOL in text


def tls_failure(address: str, details: str, *, ca: str | None) -> str:
    """The message of a draw that failed on TLS with the server ``address``."""
    return (f"timestamp server {address}: TLS handshake failed ({details}): the server's certificate is not "
            f"signed by the CA the client pins ({ca or 'none'}; setting timestamp_tls_ca / ${CA_ENV}), does not "
            "name that address, or the server serves plaintext (start it with --cert-file and --key-file); the "
            "client never falls back to plaintext")


PLAINTEXT_HINT = (f"(a timestamp server serving TLS closes a plaintext client's connection - 'Socket closed': if the "
                  f"servers serve TLS, name their CA in the setting timestamp_tls_ca or ${CA_ENV})")
