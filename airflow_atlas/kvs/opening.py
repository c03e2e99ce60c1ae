"""Opening the key-value service a :class:`~.address.StoreAddress` names: THE one place a backend is built
from address options (the URL form, an Airflow connection, a Spark task and the CLI all come through here,
by way of :meth:`airflow_atlas.store.AtlasStore.open`). The backends are imported inside the function, so
a SQLite store never loads cassandra-driver; no backend imports this module back.

In-memory stores are not supported (each thread and process would see a different database). Errors are
InvalidInputError naming the problem; no message ever contains the password.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError
from .address import StoreAddress
from .address_options import CASSANDRA, SQLITE
from .api import KeyValueService
from .scrub import scrub

if TYPE_CHECKING:
    import ssl


def tls_context(ssl_ca: str | None = None, ssl_verify: bool = True) -> ssl.SSLContext:
    """THE client TLS context of the project, for a URL's and a connection's TLS options alike: the CA file
    ``ssl_ca`` pinned (without it, the system's CAs), the node's certificate chain AND its name (the address
    or host name connected to) verified unless ``ssl_verify`` is false. A CA file that cannot be read or
    parsed is InvalidInputError (never retried)."""
    import ssl

    try:
        context = ssl.create_default_context(cafile=ssl_ca)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidInputError(f"cannot load the TLS CA file {ssl_ca!r}: {exc.__class__.__name__}") from None
    if not ssl_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _open_sqlite(address: StoreAddress, opts: dict[str, object]) -> KeyValueService:
    from .sqlite import SqliteKeyValueService

    # One copy of the data: no consistency levels, no grace period (the settings were validated anyway).
    opts.pop("consistency", None)
    opts.pop("gc_grace_guard", None)
    kwargs: dict[str, Any] = {**address.options(), **opts}
    return SqliteKeyValueService(os.path.abspath(address.path or ""), **kwargs)


def _open_cassandra(address: StoreAddress, opts: dict[str, object]) -> KeyValueService:
    from .cassandra import CassandraKeyValueService

    if address.settings and opts.get("consistency") is None:
        raise InvalidInputError(
            f"URL option(s) {', '.join(name for name, _ in address.settings)} are engine settings: open the store "
            "with AtlasStore.open (it resolves them with the other settings) or pass the resolved consistency / "
            "gc_grace_guard"
        )
    kwargs: dict[str, Any] = address.options()
    ssl_on = kwargs.pop("ssl", False)
    ssl_ca = kwargs.pop("ssl_ca", None)
    ssl_verify = kwargs.pop("ssl_verify", True)
    if ssl_on:
        kwargs["ssl_context"] = tls_context(ssl_ca, ssl_verify)
    if address.port is not None:
        kwargs["port"] = address.port
    if address.username is not None:
        kwargs["username"] = address.username
        kwargs["password"] = address.password
    kwargs.update(opts)
    return CassandraKeyValueService.connect(list(address.hosts), keyspace=address.keyspace or "", **kwargs)


def open_kvs(address: StoreAddress, *, must_exist: bool = False, **opts: object) -> KeyValueService:
    """Open the key-value service ``address`` names; ``opts`` go to the backend's constructor (and override
    the address's options), e.g. ``busy_timeout_ms=...`` (SQLite) or ``fresh_timestamp_supplier=...``.

    ``must_exist``: open an existing store only and write nothing to find out - a missing SQLite file, a
    foreign SQLite database, a missing keyspace or a keyspace without the registry raise
    StoreNotInitializedError (no file, WAL switch, keyspace or ``atlas_metadata`` is created).

    ``consistency`` / ``gc_grace_guard`` (in ``opts``): the replica-safety lookups built from the resolved
    settings (``StoreConfig.consistency_policy()`` / ``gc_grace_guard()``), which include the address's own
    replica-safety settings; an address with such settings needs them."""
    if not isinstance(address, StoreAddress):
        raise InvalidInputError(f"a StoreAddress is required, got {type(address).__name__}")
    if must_exist:
        if address.backend == SQLITE:
            opts.setdefault("create", False)
        else:
            opts.setdefault("create_keyspace", False)
            opts.setdefault("create_registry", False)
    try:
        if address.backend == CASSANDRA:
            return _open_cassandra(address, opts)
        return _open_sqlite(address, opts)
    except InvalidInputError as exc:  # whatever went wrong, the message never holds the credentials
        secrets = address.secrets()
        if not secrets:
            raise
        raise type(exc)(scrub(str(exc), secrets)) from None
