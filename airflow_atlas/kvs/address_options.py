"""The options of a store address: their names, kinds and defaults, and the checks of hosts and ports - shared
by the URL form (:mod:`.address`) and the Airflow-connection form (:mod:`.address_connection`) of a
:class:`~.address.StoreAddress`, so both forms parse every option by the same rule."""
from __future__ import annotations

import math
import re
from typing import Any

from ..errors import InvalidInputError
from ..settings_model import Bool
from .consistency import SETTING_NAMES

SQLITE = "sqlite"
CASSANDRA = "cassandra"
EMBEDDED_CONN_TYPE = "atlas_embedded"
"""The Airflow connection type of the embedded (SQLite) store."""
CASSANDRA_CONN_TYPE = "cassandra"
"""The Cassandra provider's connection type, read by :meth:`StoreAddress.from_connection`."""
DEFAULT_PORT = 9042
DEFAULT_PROTOCOL_VERSION = 5
"""The native protocol a Cassandra address starts the negotiation at when it names none (Cassandra 4.0+)."""
URL_SOURCE = "the store URL"

_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-_]*$")
_IPV6 = re.compile(r"^[0-9A-Fa-f:.]+$")


# ----- option values: one parser per kind, for the URL's text and the connection's JSON alike -----------------
def _bool(name: str, value: Any) -> bool:
    try:
        return Bool().parse(value) if isinstance(value, str) else Bool().check(value)
    except ValueError:
        raise InvalidInputError(f"option {name} must be true or false, got {value!r}") from None


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise InvalidInputError(f"option {name} must be an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"option {name} must be an integer, got {value!r}") from None


def _float(name: str, value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"option {name} must be a number, got {value!r}") from None
    if not (out > 0 and math.isfinite(out)):
        raise InvalidInputError(f"option {name} must be a positive finite number, got {value!r}")
    return out


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"option {name} must be text, got {value!r}")
    return value


def _upper(name: str, value: Any) -> str:
    return _text(name, value).upper()


OPTIONS: dict[str, dict[str, Any]] = {
    # backend -> option -> parser; the order is the order to_url writes them in
    SQLITE: {"busy_timeout_ms": _int, "synchronous": _upper},
    CASSANDRA: {
        "protocol_version": _int, "create_keyspace": _bool, "replication_factor": _int, "datacenter": _text,
        "ssl": _bool, "ssl_ca": _text, "ssl_verify": _bool, "connect_timeout": _float, "request_timeout": _float,
        "concurrency": _int, "page_size": _int,
    },
}


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def option_fields(backend: str, given: dict[str, Any], prefix: str = "URL option") -> dict[str, Any]:
    """``given`` (option name -> text or JSON value) parsed by each option's kind: the backend options as
    typed values and the replica-safety settings as ``settings`` (kept as given). Unknown names are refused."""
    allowed = OPTIONS[backend]
    out: dict[str, Any] = {}
    settings = []
    for name, value in given.items():
        if name in SETTING_NAMES and backend == CASSANDRA:
            settings.append((name, value))
        elif name in allowed:
            try:
                out[name] = allowed[name](name, value)
            except InvalidInputError as exc:
                raise InvalidInputError(f"{prefix} {str(exc).removeprefix('option ')}") from None
        else:
            names = sorted([*allowed, *(SETTING_NAMES if backend == CASSANDRA else ())])
            raise InvalidInputError(f"unknown {prefix} {name!r}; allowed: {', '.join(names)}")
    out["settings"] = tuple(settings)
    return out


def check_host(item: str, what: str = "cassandra URL host") -> tuple[str, str | None]:
    """``(host, port text or None)`` of one ``host[:port]`` / ``[ipv6][:port]`` item, validated."""
    item = item.strip()
    port_text = None
    if item.startswith("["):
        end = item.find("]")
        if end < 0:
            raise InvalidInputError(f"{what} {item!r}: unterminated IPv6 literal")
        host, after = item[1:end], item[end + 1 :]
        if after:
            if not after.startswith(":"):
                raise InvalidInputError(f"{what} {item!r} is malformed")
            port_text = after[1:]
        if not _IPV6.match(host):
            raise InvalidInputError(f"{what} {item!r} is not an IPv6 address")
        return host, port_text
    host, colon, port_text = item.partition(":")
    if not host or not _HOST.match(host):
        raise InvalidInputError(f"{what} {host!r} is not a valid host name or address")
    return host, (port_text if colon else None)


def check_port(port_text: object, what: str = "cassandra URL port") -> int:
    try:
        port = int(port_text)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise InvalidInputError(f"{what} {port_text!r} is not a number") from None
    if not 1 <= port <= 65535:
        raise InvalidInputError(f"{what} {port} is outside 1-65535")
    return port


