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
issue 45) travels the same way (:func:`job_timestamp_ca`, :func:`task_settings`): the executors verify the servers
against exactly the CA the driver does, and never fall back to plaintext for want of a file on their machine.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
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


def job_timestamp_ca(settings: dict) -> str | None:
    """On the driver: the PEM text of the timestamp servers' CA file (the job's ``timestamp_tls_ca`` setting,
    else ``$ATLAS_TIMESTAMP_TLS_CA``), checked; None when neither names one (plaintext gRPC)."""
    from ..timestamps.tls import ca_from_environment, read_ca

    path = settings.get("timestamp_tls_ca") or ca_from_environment()
    return None if path is None else read_ca(path).decode("ascii")


def task_settings(settings: dict, timestamp_ca_pem: str | None) -> dict:
    """On an executor: ``settings`` with ``timestamp_tls_ca`` naming this machine's copy of the job's timestamp CA."""
    if timestamp_ca_pem is None:
        return settings
    return {**settings, "timestamp_tls_ca": str(_local_copy(timestamp_ca_pem))}


def task_address(address: StoreAddress, ca_pem: str | None) -> StoreAddress:
    """On an executor: ``address`` with ``ssl_ca`` pointing at this machine's copy of ``ca_pem`` (written
    once per content, atomically, and rewritten when a file of that name holds anything else)."""
    if ca_pem is None:
        return address
    return address.with_ssl_ca(str(_local_copy(ca_pem)))


def _local_copy(ca_pem: str) -> Path:
    directory = ca_directory()
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / f"{hashlib.sha256(ca_pem.encode('ascii')).hexdigest()[:32]}.pem"
    try:
        current = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        current = None
    if current != ca_pem:
        fd, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(ca_pem)
        os.replace(temporary, path)
    return path
