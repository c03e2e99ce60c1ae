"""The Airflow-connection form of a store address: the fields of a :class:`~.address.StoreAddress` read from a
connection (duck-typed on ``airflow.sdk.Connection``'s attributes; Airflow is never imported here).

``atlas_embedded``: host (or the ``path`` extra, or the URI form's schema) is the absolute path of the SQLite
file. ``cassandra`` (the provider's type): host = contact points (comma separated), port, schema = keyspace,
login / password; the extras are the URL's options by the same names and rules
(:mod:`.address_options`), plus the provider's ``ssl_options`` (TLS on, its ``ca_certs`` being ``ssl_ca``),
``load_balancing_policy_args.local_dc`` (the local datacenter when ``datacenter`` is not set) and
``protocol_version``. Unset options get the connection's defaults, written out: port 9042, protocol 5,
``create_keyspace`` false, ``replication_factor`` 1. Extras of other names (the provider's
``load_balancing_policy``, ``cql_version``) are not read: the store always routes token-aware within its
local datacenter. Errors name the connection and the field or extra.
"""
from __future__ import annotations

import os
from typing import Any

from ..errors import InvalidInputError
from .address_options import (
    CASSANDRA,
    CASSANDRA_CONN_TYPE,
    DEFAULT_PORT,
    DEFAULT_PROTOCOL_VERSION,
    EMBEDDED_CONN_TYPE,
    OPTIONS,
    SQLITE,
    check_host,
    check_port,
    option_fields,
)
from .consistency import SETTING_NAMES


def extra(conn: Any, name: str, default: Any = None) -> Any:
    """An extra field, stored either plainly or with the UI's ``extra__<type>__`` prefix."""
    extras = conn.extra_dejson or {}
    if name in extras:
        return extras[name]
    return extras.get(f"extra__{conn.conn_type}__{name}", default)


def _given(value: Any) -> bool:
    return value is not None and value != ""


def _embedded_fields(conn: Any) -> dict[str, Any]:
    path = extra(conn, "path") or conn.host or ""
    if not path and conn.schema:
        path = "/" + conn.schema.lstrip("/")  # URI form atlas-embedded:///abs/path.db
    if not isinstance(path, str) or not path.strip():
        raise InvalidInputError(
            f"connection {conn.conn_id!r} (atlas_embedded) names no database file: set host to its absolute path"
        )
    path = path.strip()
    if not os.path.isabs(path):
        raise InvalidInputError(
            f"connection {conn.conn_id!r}: the embedded store path {path!r} must be absolute "
            "(workers run in other directories)"
        )
    return {"backend": SQLITE, "path": path}


def _tls(conn: Any, given: dict[str, Any]) -> bool:
    """The provider's ``ssl_options`` folded into the ``ssl`` / ``ssl_ca`` options of ``given``, checked;
    whether the connection has ``ssl_options``."""
    conn_id = conn.conn_id
    ssl_options = extra(conn, "ssl_options")
    if ssl_options in ("", None):
        ssl_options = None
    elif not isinstance(ssl_options, dict):
        raise InvalidInputError(f"connection {conn_id!r}: extra ssl_options must be a JSON object")
    provider_ca = (ssl_options or {}).get("ca_certs")
    ca = given.get("ssl_ca")
    if ca and provider_ca and ca != provider_ca:
        raise InvalidInputError(
            f"connection {conn_id!r}: extras ssl_ca and ssl_options.ca_certs name different CA files: keep one"
        )
    ca = ca or provider_ca or None
    if ssl_options:
        given.setdefault("ssl", True)
    given.pop("ssl_ca", None)
    if ca is not None:
        if not isinstance(ca, str) or not os.path.isabs(ca.strip()):
            raise InvalidInputError(
                f"connection {conn_id!r}: extra ssl_ca must be the absolute path of the CA file, got {ca!r}"
            )
        given["ssl_ca"] = ca.strip()
    return ssl_options is not None


def _cassandra_fields(conn: Any) -> dict[str, Any]:
    conn_id = conn.conn_id
    hosts = [h.strip() for h in (conn.host or "").split(",") if h.strip()]
    if not hosts:
        raise InvalidInputError(f"connection {conn_id!r} (cassandra) names no host")
    if not conn.schema:
        raise InvalidInputError(f"connection {conn_id!r} (cassandra) names no keyspace: put it in the schema field")
    from .cassandra.statements import validate_keyspace  # the driver's package: only for this form

    try:
        keyspace = validate_keyspace(conn.schema)
        for host in hosts:
            check_host(host, what="host")
        port = check_port(conn.port, what="port") if conn.port else DEFAULT_PORT
    except InvalidInputError as exc:
        raise InvalidInputError(f"connection {conn_id!r}: {exc}") from None
    given = {name: extra(conn, name) for name in OPTIONS[CASSANDRA] if _given(extra(conn, name))}
    policy_args = extra(conn, "load_balancing_policy_args")
    local_dc = policy_args.get("local_dc") if isinstance(policy_args, dict) else None
    if _given(local_dc):
        given.setdefault("datacenter", local_dc)
    given.setdefault("protocol_version", DEFAULT_PROTOCOL_VERSION)
    given.setdefault("create_keyspace", False)
    given.setdefault("replication_factor", 1)
    provider_tls = _tls(conn, given)
    given.update((name, extra(conn, name)) for name in SETTING_NAMES if _given(extra(conn, name)))
    fields = option_fields(CASSANDRA, given, prefix=f"connection {conn_id!r}: extra")
    tls_extras = fields.get("ssl_ca") is not None or fields.get("ssl_verify") is not None or provider_tls
    if tls_extras and not fields.get("ssl"):
        raise InvalidInputError(f"connection {conn_id!r}: extras ssl_ca / ssl_verify / ssl_options need ssl true")
    return {
        "backend": CASSANDRA, "hosts": tuple(hosts), "port": port, "keyspace": keyspace,
        "username": conn.login or None, "password": (conn.password or None) if conn.login else None,
        "settings_source": f"connection {conn_id!r} extras", **fields,
    }


def address_fields(conn: Any) -> dict[str, Any]:
    """The :class:`~.address.StoreAddress` fields of the connection ``conn`` (module doc)."""
    conn_type = (conn.conn_type or "").strip()
    if conn_type == EMBEDDED_CONN_TYPE:
        return _embedded_fields(conn)
    if conn_type == CASSANDRA_CONN_TYPE:
        return _cassandra_fields(conn)
    raise InvalidInputError(
        f"connection {conn.conn_id!r} has type {conn_type!r}: an Atlas store connection is of type "
        f"{CASSANDRA_CONN_TYPE!r} or {EMBEDDED_CONN_TYPE!r}"
    )
