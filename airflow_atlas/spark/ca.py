"""The pinned CA of a Spark job travels WITH the job, as its content, not as a path.

The store URL names the CA file to pin (``ssl_ca``); that file is where the job is submitted from (the
Airflow worker that holds the connection, a CLI user's machine), not necessarily on the Spark workers:
on a standalone master, YARN or Kubernetes they are other machines, deployed apart from Airflow. So the
driver reads the file once (:func:`job_ca`; an unreadable or empty CA fails the job before any task, not
retried) and its PEM content goes to every task in the task's closure; each task writes it to a file of
its own machine named by the content's hash (:func:`task_address`) and pins that. A CA certificate is public,
so shipping it leaks nothing; the executors pin exactly the bytes the connection names, and a new CA in the
connection takes effect at the next job, with nothing to deploy on the workers. (A URL without ``ssl_ca``
verifies against the executors' system CAs, as a process without Spark would.)

The timestamp servers' CA (the ``timestamp_tls_ca`` setting, else the driver's ``$ATLAS_TIMESTAMP_TLS_CA``:
issue 45) travels the same way, and so do the client certificate and key of mutual TLS (``timestamp_tls_cert`` /
``timestamp_tls_key``, else ``$ATLAS_TIMESTAMP_TLS_CERT`` / ``_KEY``): :func:`job_timestamp_tls` reads and checks
them on the driver, :func:`task_settings` names this machine's copies. The executors verify the servers against
exactly the CA the driver does and present exactly its certificate; they never fall back to plaintext, or to no
client certificate, for want of a file on their machine. The key is a secret: it travels in the task closure as
the store URL's password does (protect Spark's RPC with ``spark.authenticate`` / ``spark.network.crypto.enabled``
off a private network), and each copy is written mode 0600 in a directory of this user's only (mode 0700).
"""
from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidInputError

if TYPE_CHECKING:
    from ..kvs.address import StoreAddress

PEM_MARKER = "-----BEGIN CERTIFICATE-----"


def job_ca(address: StoreAddress) -> str | None:
    """On the driver: the PEM text of the address's ``ssl_ca`` file, or None when it names none."""
    path = address.ssl_ca
    if not path:
        return None
    try:
        text = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot read the TLS CA file {path!r} (ssl_ca): {type(exc).__name__}") from None
    if PEM_MARKER not in text:
        raise InvalidInputError(f"the TLS CA file {path!r} (ssl_ca) holds no PEM certificate")
    return text


def ca_directory() -> Path:
    """Where a task keeps the CA copies of its machine (one per user: ``<tmp>/airflow-atlas-ca-<uid>``)."""
    return Path(tempfile.gettempdir()) / f"airflow-atlas-ca-{os.getuid()}"


@dataclass(frozen=True)
class TimestampTlsPem:
    """The content of a job's timestamp TLS files (PEM text), read on the driver, shipped in the task closure: the
    servers' CA and, for mutual TLS, the client's certificate and key (both or neither)."""

    ca: str
    cert: str | None = None
    key: str | None = field(default=None, repr=False)


def job_timestamp_tls(settings: dict) -> TimestampTlsPem | None:
    """On the driver: the content of the job's timestamp TLS files (the settings ``timestamp_tls_ca`` /
    ``_cert`` / ``_key``, else the driver's ``$ATLAS_TIMESTAMP_TLS_CA`` / ``_CERT`` / ``_KEY``), each checked as a
    client checks it (InvalidInputError naming a bad one, before any task); None without a CA (plaintext gRPC)."""
    from ..timestamps.tls import client_tls

    tls = client_tls(settings.get("timestamp_tls_ca"), settings.get("timestamp_tls_cert"),
                     settings.get("timestamp_tls_key"))
    if tls is None:
        return None
    ca, pair = tls.read()
    if pair is None:
        return TimestampTlsPem(ca.decode("ascii"))
    try:
        cert, key = pair[0].decode("ascii"), pair[1].decode("ascii")
    except UnicodeDecodeError:
        raise InvalidInputError(f"the timestamp client's certificate {tls.cert} or key {tls.key} is not PEM text "
                                "(ASCII)") from None
    return TimestampTlsPem(ca.decode("ascii"), cert, key)


def task_settings(settings: dict, timestamp_tls: TimestampTlsPem | None) -> dict:
    """On an executor: ``settings`` with ``timestamp_tls_ca`` (and ``timestamp_tls_cert`` / ``_key``) naming this
    machine's copies of the job's timestamp TLS files (the key's copy mode 0600)."""
    if timestamp_tls is None:
        return settings
    copies = {"timestamp_tls_ca": str(_local_copy(timestamp_tls.ca))}
    if timestamp_tls.cert is not None and timestamp_tls.key is not None:
        copies["timestamp_tls_cert"] = str(_local_copy(timestamp_tls.cert))
        copies["timestamp_tls_key"] = str(_local_copy(timestamp_tls.key, suffix=".key"))
    return {**settings, **copies}


def task_address(address: StoreAddress, ca_pem: str | None) -> StoreAddress:
    """On an executor: ``address`` with ``ssl_ca`` pointing at this machine's copy of ``ca_pem`` (written
    once per content, atomically, and rewritten when a file of that name holds anything else)."""
    if ca_pem is None:
        return address
    return address.with_ssl_ca(str(_local_copy(ca_pem)))


def _private_directory() -> Path:
    """:func:`ca_directory`, created mode 0700 if missing; InvalidInputError when it is not a directory of this
    user's only (the copies may hold a private key)."""
    directory = ca_directory()
    directory.mkdir(mode=0o700, exist_ok=True)
    info = directory.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise InvalidInputError(
            f"{directory} (this machine's copies of a Spark job's TLS files) must be a directory of uid "
            f"{os.getuid()} with mode 0700, found uid {info.st_uid} mode {stat.S_IMODE(info.st_mode):o}: remove it"
        )
    return directory


def _local_copy(pem: str, suffix: str = ".pem") -> Path:
    """This machine's copy of ``pem`` (named by its hash; mode 0600, written atomically, and rewritten when a
    file of that name holds anything else or is readable by group/others)."""
    directory = _private_directory()
    path = directory / f"{hashlib.sha256(pem.encode('ascii')).hexdigest()[:32]}{suffix}"
    try:
        current = path.read_text(encoding="ascii") if not path.stat().st_mode & 0o077 else None
    except (OSError, UnicodeDecodeError):
        current = None
    if current != pem:
        fd, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")  # mode 0600
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(pem)
        os.replace(temporary, path)
    return path
