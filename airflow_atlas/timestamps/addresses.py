"""Timestamp server addresses (``host:port``), as the ``timestamp_servers`` setting and the CLI take them."""
from __future__ import annotations

DEFAULT_PORT = 9350
"""The timestamp server's port when an address names none."""


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
