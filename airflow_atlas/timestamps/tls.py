"""TLS of the timestamp server's gRPC (issue 45): the server's certificate and key, the CA clients verify it with,
and - mutual TLS - the clients' certificates and the CA the server verifies them with.

A client that an impostor can answer could be handed timestamps below ones already handed out (snapshot
isolation broken, deleted data back), so on any network that is not private the servers serve TLS
(``atlas-sweep timestamps serve --cert-file FILE --key-file FILE``, :func:`server_credentials`) and every client
pins the CA that signed their certificates (the ``timestamp_tls_ca`` setting, else ``$ATLAS_TIMESTAMP_TLS_CA``).
A server started with ``--client-ca-file FILE`` too requires every client to present a certificate that CA
signed (``require_client_auth``): the clients' ``timestamp_tls_cert`` and ``timestamp_tls_key`` settings (else
``$ATLAS_TIMESTAMP_TLS_CERT`` / ``$ATLAS_TIMESTAMP_TLS_KEY``), both or neither, only with a CA. A client's three
files are one value, :class:`ClientTls` (:func:`client_tls` resolves the settings and the environment).

A client with a CA talks only TLS: a server whose certificate the CA did not sign, or that serves plaintext, fails
the draw at once naming the server and the TLS problem (:func:`tls_failure`); there is no fallback to plaintext. A
server that refuses the client's certificate (or its lack of one) closes the connection after the handshake, which
grpc reports as "Socket closed", as it reports a plaintext client of a TLS server (:func:`closed_cause` names the
likely cause). Every file is read and checked when it is named - a missing, unreadable or invalid one, or a key
readable by group/others, is an :class:`~airflow_atlas.errors.InvalidInputError` naming it.
Only grpc's and the standard library's public API.
"""
from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc

from ..errors import InvalidInputError
from ..settings_model import AbsolutePath

CA_ENV = "ATLAS_TIMESTAMP_TLS_CA"
"""The environment variable naming the timestamp servers' CA file when the ``timestamp_tls_ca`` setting is null
(as ``$ATLAS_TIMESTAMP_SERVERS`` names the servers)."""
CERT_ENV = "ATLAS_TIMESTAMP_TLS_CERT"
"""The environment variable naming the client's certificate file when the ``timestamp_tls_cert`` setting is null."""
KEY_ENV = "ATLAS_TIMESTAMP_TLS_KEY"
"""The environment variable naming the client's key file when the ``timestamp_tls_key`` setting is null."""
PEM_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"
_HANDSHAKE = "handshake failed"
_PROTOCOL = "ssl_error_ssl"
"""What grpc's UNAVAILABLE details say when the TLS handshake failed on the protocol - a certificate refused, a
peer that speaks no TLS (grpc 1.85: "Tls handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: ...
CERTIFICATE_VERIFY_FAILED" / "BAD_SIGNATURE" / "WRONG_VERSION_NUMBER") -, not on I/O (SSL_ERROR_SYSCALL: a
connection lost mid-handshake, as when an instance is killed; retried like any lost connection)."""
SOCKET_CLOSED = "socket closed"
"""What grpc's UNAVAILABLE details say (grpc 1.85: "failed to connect to all addresses; last error: UNAVAILABLE:
ipv4:HOST:PORT: Socket closed") when the server closed the connection: a TLS server refusing a plaintext client,
and a server requiring client certificates refusing a client without one, or with one its client CA did not sign
(TLS 1.3: the client's side of the handshake is done before the server checks its certificate; the server's
reason - PEER_DID_NOT_RETURN_A_CERTIFICATE, CERTIFICATE_VERIFY_FAILED - is logged by the server only). A lost
connection can look the same, so it is retried within the retry bound, then named (:func:`closed_cause`)."""


def path_from_environment(name: str) -> str | None:
    """The file the environment variable ``name`` names (None when unset or empty), by the rule of a setting's
    file (:class:`~airflow_atlas.settings_model.AbsolutePath`); InvalidInputError naming the variable otherwise."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return AbsolutePath().check(text)
    except ValueError as exc:
        raise InvalidInputError(f"${name} {exc}") from None


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


def read_pair(cert_file: str, key_file: str, *, owner: str, names: tuple[str, str]) -> tuple[bytes, bytes]:
    """The PEM bytes of a certificate (chain) and its private key, checked now: each readable and PEM, the key not
    readable by group/others, the two a matching pair. ``owner`` ("timestamp server's") and ``names`` (the flag or
    setting of each file) name them in the InvalidInputError."""
    cert_what, key_what = f"{owner} certificate file ({names[0]})", f"{owner} key file ({names[1]})"
    cert = _read(cert_file, cert_what)
    key = _read(key_file, key_what)
    if PEM_CERTIFICATE not in cert:
        raise InvalidInputError(f"the {cert_what} {cert_file} holds no PEM certificate")
    mode = os.stat(key_file).st_mode & 0o777
    if mode & 0o077:
        raise InvalidInputError(f"the {key_what} {key_file} has mode {mode:o}: it must not be readable by "
                                "group/others (use 0600)")
    if b"PRIVATE KEY-----" not in key:
        raise InvalidInputError(f"the {key_what} {key_file} holds no PEM private key")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(cert_file, key_file)
    except ssl.SSLError as exc:
        raise InvalidInputError(f"the {owner} certificate {cert_file} and key {key_file} are not a valid pair: {exc}") from None
    return cert, key


def server_credentials(cert_file: str, key_file: str, client_ca_file: str | None = None) -> grpc.ServerCredentials:
    """The server's TLS credentials from its certificate (chain) and private key, PEM files; with ``client_ca_file``
    (``--client-ca-file``) every client must present a certificate that CA signed (mutual TLS). Every file is read
    and checked now, so a bad one fails the start naming it, not the first client's handshake."""
    cert, key = read_pair(cert_file, key_file, owner="timestamp server's", names=("--cert-file", "--key-file"))
    if client_ca_file is None:
        return grpc.ssl_server_credentials([(key, cert)])
    client_ca = read_ca(client_ca_file, "timestamp server's client CA file (--client-ca-file)")
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=client_ca, require_client_auth=True)


@dataclass(frozen=True)
class ClientTls:
    """A timestamp server client's TLS files, the one value from the settings (:func:`client_tls`) to every
    client (``AtlasStore.timestamp_tls`` -> ``StoreTimestamps`` -> ``shared_client`` -> ``TimestampClient``, whose
    cache key it is part of): ``ca`` verifies the servers' certificates; ``cert`` and ``key``, both or neither,
    are the client's own, presented to servers that require client certificates (mutual TLS)."""

    ca: str
    cert: str | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            given, missing = (("timestamp_tls_cert", "timestamp_tls_key") if self.key is None
                              else ("timestamp_tls_key", "timestamp_tls_cert"))
            raise InvalidInputError(
                f"the settings timestamp_tls_cert and timestamp_tls_key go together (a client certificate and its "
                f"key; else ${CERT_ENV} and ${KEY_ENV}): {given} is set ({self.cert or self.key}) but {missing} is "
                "not - set both, or neither"
            )

    def read(self) -> tuple[bytes, tuple[bytes, bytes] | None]:
        """The PEM bytes of the CA and of the client's (certificate, key) pair (None without one), every file read
        and checked now (:func:`read_ca`, :func:`read_pair`): InvalidInputError naming a bad one."""
        ca = read_ca(self.ca)
        if self.cert is None or self.key is None:
            return ca, None
        return ca, read_pair(self.cert, self.key, owner="timestamp client's",
                             names=("timestamp_tls_cert", "timestamp_tls_key"))

    def credentials(self) -> grpc.ChannelCredentials:
        """The channel credentials: the servers verified against the CA (and their names: the address), the
        client's certificate presented when it has one (mutual TLS)."""
        ca, pair = self.read()
        if pair is None:
            return grpc.ssl_channel_credentials(root_certificates=ca)
        cert, key = pair
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def client_tls(ca: str | None, cert: str | None, key: str | None) -> ClientTls | None:
    """A client's TLS files from the settings ``timestamp_tls_ca`` / ``_cert`` / ``_key`` (each, when null, from
    ``$ATLAS_TIMESTAMP_TLS_CA`` / ``_CERT`` / ``_KEY``); None without a CA (plaintext). InvalidInputError naming
    the settings when only one of the certificate and key is named, or they are named without a CA."""
    ca = ca or path_from_environment(CA_ENV)
    cert = cert or path_from_environment(CERT_ENV)
    key = key or path_from_environment(KEY_ENV)
    if ca is None:
        if cert is not None or key is not None:
            raise InvalidInputError(
                f"the settings timestamp_tls_cert and timestamp_tls_key (a client certificate, {cert or key}) need "
                f"timestamp_tls_ca (or ${CA_ENV}): a client presents its certificate only over TLS"
            )
        return None
    return ClientTls(ca, cert, key)


def is_handshake_failure(details: str) -> bool:
    """Whether grpc's details of an UNAVAILABLE answer say that the TLS handshake failed."""
    text = (details or "").lower()
    return _HANDSHAKE in text and _PROTOCOL in text


def is_closed(details: str) -> bool:
    """Whether grpc's details of an UNAVAILABLE answer say that the server closed the connection (:data:`SOCKET_CLOSED`)."""
    return SOCKET_CLOSED in (details or "").lower()


def tls_failure(address: str, details: str, *, ca: str | None) -> str:
    """The message of a draw that failed on TLS with the server ``address``."""
    return (f"timestamp server {address}: TLS handshake failed ({details}): the server's certificate is not "
            f"signed by the CA the client pins ({ca or 'none'}; setting timestamp_tls_ca / ${CA_ENV}), does not "
            "name that address, or the server serves plaintext (start it with --cert-file and --key-file); the "
            "client never falls back to plaintext")


PLAINTEXT_HINT = (f"(a timestamp server serving TLS closes a plaintext client's connection - 'Socket closed': if the "
                  f"servers serve TLS, name their CA in the setting timestamp_tls_ca or ${CA_ENV})")


def closed_cause(tls: ClientTls | None) -> str:
    """The likely cause of servers closing this client's connections ('Socket closed'), by what the client has."""
    if tls is None:
        return PLAINTEXT_HINT
    if tls.cert is None:
        return ("the servers likely require a client certificate (started with --client-ca-file) and this client "
                f"presents none: set the settings timestamp_tls_cert and timestamp_tls_key (or ${CERT_ENV} and "
                f"${KEY_ENV}) to a certificate and key signed by the servers' client CA (a server's log shows the "
                "refused handshake: PEER_DID_NOT_RETURN_A_CERTIFICATE)")
    return (f"the servers likely do not trust this client's certificate {tls.cert} (settings timestamp_tls_cert / "
            f"timestamp_tls_key, or ${CERT_ENV} / ${KEY_ENV}): it must be signed by the CA of their --client-ca-file, "
            "valid now, and allowed for client authentication (a server's log shows the refused handshake: "
            "CERTIFICATE_VERIFY_FAILED)")
