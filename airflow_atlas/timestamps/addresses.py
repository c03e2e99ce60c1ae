"""Finding the timestamp servers: their addresses (``host:port``, as the ``timestamp_servers`` setting and the CLI
take them), the environment variable that names them, and how long a client keeps trying them."""
from __future__ import annotations

import os

DEFAULT_PORT = 9350
"""The timestamp server's port when an address names none."""
DEFAULT_RETRY_SECONDS = 20.0
"""Default of the ``timestamp_retry_seconds`` setting: how long a draw keeps trying the servers (across a takeover)."""
SERVERS_ENV = "ATLAS_TIMESTAMP_SERVERS"
"""The environment variable that names a process's timestamp servers when the ``timestamp_servers`` setting is
empty (comma-separated ``host[:port]``): how a deployment, the project's scripts and the test suite point every
process on a machine at the servers of its cluster without a setting in each."""


def parse_address(text: str) -> str:
    """``host:port`` (the port defaults to :data:`DEFAULT_PORT`); ValueError naming the text when malformed."""
    text = text.strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, str(DEFAULT_PORT)
    if not host:
        raise ValueError(f"timestamp server address {text!r} names no host")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"timestamp server address {text!r}: the port must be 1..65535")
    return f"{host}:{int(port)}"


def servers_from_environment() -> tuple[str, ...]:
    """The addresses in ``$ATLAS_TIMESTAMP_SERVERS`` (empty when unset); ValueError naming it when malformed."""
    text = os.environ.get(SERVERS_ENV, "")
    try:
        return tuple(parse_address(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise ValueError(f"${SERVERS_ENV}: {exc}") from None
