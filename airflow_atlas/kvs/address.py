"""StoreAddress: where a store is and how to reach it, parsed ONCE, from a URL or an Airflow connection.

Two forms name a store, and both become the same value object:

* a URL (:meth:`StoreAddress.from_url`), SQLAlchemy's convention for SQLite (as in Airflow's
  ``sql_alchemy_conn``): ``sqlite:///relative/path.db`` / ``sqlite:////absolute/path.db`` (a relative path
  is resolved against the current directory when the store is opened), options ``busy_timeout_ms``,
  ``synchronous``; ``cassandra://[user:password@]host1,host2[:port]/keyspace?option=value&...``, options
  ``replication_factor``, ``protocol_version``, ``create_keyspace``, ``datacenter``, ``ssl``, ``ssl_ca``
  (CA file), ``ssl_verify`` (default true), ``connect_timeout``, ``request_timeout``, ``concurrency``,
  ``page_size``; user and password are percent-decoded;
* an Airflow connection (:meth:`StoreAddress.from_connection`, duck-typed on the attributes of
  ``airflow.sdk.Connection``: this module never imports Airflow): type ``atlas_embedded`` (host or the
  ``path`` extra: the absolute path of the SQLite file) or ``cassandra`` (host: contact points, port,
  schema: keyspace, login/password; extras with the URL options' names and meanings, plus the provider's
  ``ssl_options.ca_certs`` (= ``ssl_ca``, TLS on), ``load_balancing_policy_args.local_dc`` (= ``datacenter``)
  and ``protocol_version``; the UI's ``extra__cassandra__<name>`` form is read too).

Both forms may carry the replica-safety settings (:mod:`.consistency`: ``consistency_<operation>``,
``allow_weak_sweep_consistency``, ``repair_interval_seconds``, ``allow_gc_grace_below_repair_interval``) in
:attr:`StoreAddress.settings`: engine settings, the settings resolver's top layer for this store
(:func:`airflow_atlas.settings_resolver.address_layer`), validated there with every other layer, never here.

:meth:`StoreAddress.to_url` writes the address back as a URL WITH its password (what a Spark job gets, through
a private file); ``repr`` and :meth:`StoreAddress.redacted` never show it. Errors are InvalidInputError
naming the option (and the connection), never holding the password. The store is opened from an address by
:meth:`airflow_atlas.store.AtlasStore.open` (the key-value service: :func:`.opening.open_kvs`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode

from ..errors import InvalidInputError
from .address_options import (
    CASSANDRA,
    DEFAULT_PORT,
    DEFAULT_PROTOCOL_VERSION,
    OPTIONS,
    SQLITE,
    URL_SOURCE,
    check_host,
    check_port,
    format_value,
    option_fields,
)
from .scrub import redact_url, scrub, url_secrets, userinfo_end


@dataclass(frozen=True)
class StoreAddress:
    """A store's address, validated (module doc). Backend options are None when not given (the backend's
    default applies); :attr:`settings` are the replica-safety settings as given (text or JSON values)."""

    backend: str
    path: str | None = None
    """SQLite: the database file as given (relative paths are resolved when the store is opened)."""
    hosts: tuple[str, ...] = ()
    port: int | None = None
    keyspace: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    busy_timeout_ms: int | None = None
    synchronous: str | None = None
    protocol_version: int | None = None
    create_keyspace: bool | None = None
    replication_factor: int | None = None
    datacenter: str | None = None
    ssl: bool | None = None
    ssl_ca: str | None = None
    ssl_verify: bool | None = None
    connect_timeout: float | None = None
    request_timeout: float | None = None
    concurrency: int | None = None
    page_size: int | None = None
    settings: tuple[tuple[str, Any], ...] = ()
    settings_source: str = field(default=URL_SOURCE, compare=False)
    """Where :attr:`settings` came from, for the resolver's messages (``the store URL``, ``connection 'x' extras``)."""

    def __post_init__(self) -> None:
        if self.backend not in OPTIONS:
            raise InvalidInputError(f"unknown store backend {self.backend!r}: {SQLITE} or {CASSANDRA}")

    # ----- parsing -------------------------------------------------------------------------------------------
    @classmethod
    def from_url(cls, url: str) -> StoreAddress:
        """The address a store URL names (module doc). InvalidInputError naming the problem, never the password."""
        if not isinstance(url, str) or not url.strip():
            raise InvalidInputError("a key-value store URL is required (sqlite:///path.db or cassandra://host/keyspace)")
        url = url.strip()
        scheme = url.partition("://")[0].lower() if "://" in url else ""
        try:
            if scheme == SQLITE:
                return _sqlite_from_url(url)
            if scheme == CASSANDRA:
                return _cassandra_from_url(url)
        except InvalidInputError as exc:  # whatever went wrong, the message never holds the credentials
            secrets = url_secrets(url)
            if not secrets:
                raise
            raise type(exc)(scrub(str(exc), secrets)) from None
        if url.lower() in ("memory", "memory://", "mem://", ":memory:"):
            raise InvalidInputError("in-memory key-value stores are not supported: use sqlite:///path.db")
        if not scheme:
            raise InvalidInputError(
                "key-value store URL has no scheme: use sqlite:///path.db or cassandra://[user:pass@]host/keyspace"
            )
        raise InvalidInputError(
            f"unsupported key-value store URL scheme {scheme[:20]!r}: use sqlite:///path.db or "
            "cassandra://[user:pass@]host/keyspace"
        )

    @classmethod
    def from_connection(cls, conn: Any) -> StoreAddress:
        """The address an Airflow connection names (module doc; ``conn``: anything with the attributes
        ``conn_id``, ``conn_type``, ``host``, ``port``, ``login``, ``password``, ``schema``, ``extra_dejson``).
        InvalidInputError naming the connection and the field or extra."""
        from .address_connection import address_fields

        return cls(**address_fields(conn))

    # ----- writing -------------------------------------------------------------------------------------------
    def options(self) -> dict[str, Any]:
        """The backend options that were given (name -> typed value), in :func:`to_url`'s order."""
        return {name: getattr(self, name) for name in OPTIONS[self.backend] if getattr(self, name) is not None}

    def to_url(self) -> str:
        """The address as a URL, WITH the password: for a process without Airflow (a Spark job gets it in a
        private file); never log it. ``StoreAddress.from_url(a.to_url()) == a``."""
        pairs = [(name, format_value(value)) for name, value in [*self.options().items(), *self.settings]]
        query = f"?{urlencode(pairs)}" if pairs else ""
        if self.backend == SQLITE:
            return f"sqlite:///{quote(self.path or '')}{query}"
        auth = ""
        if self.username is not None:
            auth = quote(self.username, safe="")
            if self.password is not None:
                auth += ":" + quote(self.password, safe="")
            auth += "@"
        hosts = ",".join(f"[{h}]" if ":" in h else h for h in self.hosts)
        port = f":{self.port}" if self.port is not None else ""
        return f"cassandra://{auth}{hosts}{port}/{quote(self.keyspace or '', safe='')}{query}"

    def redacted(self) -> str:
        """:meth:`to_url` with the password replaced by ``***`` (safe to log)."""
        return redact_url(self.to_url())

    def __repr__(self) -> str:
        return f"StoreAddress({self.redacted()!r})"

    def secrets(self) -> list[str]:
        """What to scrub from any text about this store (the password and its pieces, longest first)."""
        return url_secrets(self.to_url())

    def scrub(self, text: str) -> str:
        """``text`` with this address's secrets (and its URL written out whole) replaced."""
        return scrub(text, url=self.to_url())

    def without_settings(self) -> StoreAddress:
        """The address alone, its replica-safety settings left out (they travel in the resolved settings)."""
        return replace(self, settings=())

    def with_ssl_ca(self, path: str) -> StoreAddress:
        """The same address pinning the CA file ``path`` (a Spark task's local copy of the job's CA)."""
        return replace(self, ssl_ca=path)

    def describe(self) -> dict:
        """What the address points at, with the backends' defaults filled in and no secret (safe to log / XCom)."""
        if self.backend == SQLITE:
            return {"backend": SQLITE, "path": self.path}
        return {
            "backend": CASSANDRA,
            "hosts": list(self.hosts),
            "port": self.port if self.port is not None else DEFAULT_PORT,
            "keyspace": self.keyspace,
            "authenticated": self.username is not None,
            "ssl": bool(self.ssl),
            "ssl_ca": self.ssl_ca,
            "ssl_verify": self.ssl_verify is not False,
            "protocol_version": self.protocol_version or DEFAULT_PROTOCOL_VERSION,
            "create_keyspace": self.create_keyspace is not False,
            "replication_factor": self.replication_factor if self.replication_factor is not None else 1,
            "datacenter": self.datacenter,
        }


# ----- the URL form ---------------------------------------------------------------------------------------
def _split(url: str, scheme: str) -> tuple[str, str, str]:
    """(netloc, path, query) of ``scheme://netloc/path?query``; fragments are refused. The netloc keeps
    its credentials (everything up to the last ``@``, see :func:`.scrub.userinfo_end`)."""
    rest = url[len(scheme) + 3 :]
    userinfo = ""
    if scheme != SQLITE:
        at = userinfo_end(rest)
        if at >= 0:
            userinfo, rest = rest[: at + 1], rest[at + 1 :]
    if "#" in rest:
        raise InvalidInputError("key-value store URLs take no #fragment")
    rest, _, query = rest.partition("?")
    slash = rest.find("/")
    netloc, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    return userinfo + netloc, path, query


def _query(query: str) -> dict[str, str]:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise InvalidInputError("malformed URL query string") from None
    out: dict[str, str] = {}
    for name, value in pairs:
        if name in out:
            raise InvalidInputError(f"URL option {name!r} given twice")
        out[name] = value
    return out


def _sqlite_from_url(url: str) -> StoreAddress:
    netloc, path, query = _split(url, SQLITE)
    if netloc:
        raise InvalidInputError(
            "sqlite URLs have no host: use sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    path = unquote(path[1:])  # drop the slash that ends the (empty) authority
    if not path or path in (":memory:", "memory") or path.endswith("/"):
        raise InvalidInputError(
            "sqlite URL needs a database file path (in-memory stores are not supported): "
            "sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    return StoreAddress(backend=SQLITE, path=path, **option_fields(SQLITE, _query(query)))


def _parse_hosts(hostpart: str) -> tuple[tuple[str, ...], int | None]:
    if not hostpart:
        raise InvalidInputError("cassandra URL names no host: cassandra://host1,host2[:port]/keyspace")
    hosts: list[str] = []
    ports: set[int] = set()
    for item in hostpart.split(","):
        host, port_text = check_host(item)
        if port_text is not None:
            ports.add(check_port(port_text))
        hosts.append(host)
    if len(ports) > 1:
        raise InvalidInputError(f"cassandra URL hosts use different ports {sorted(ports)}: one port for all hosts")
    return tuple(hosts), (ports.pop() if ports else None)


def _cassandra_from_url(url: str) -> StoreAddress:
    netloc, path, query = _split(url, CASSANDRA)
    username = password = None
    if "@" in netloc:
        userinfo, netloc = netloc.rsplit("@", 1)
        user_text, colon, pass_text = userinfo.partition(":")
        username = unquote(user_text)
        password = unquote(pass_text) if colon else None
        if not username:
            raise InvalidInputError("cassandra URL has credentials without a user name")
    hosts, port = _parse_hosts(netloc)
    keyspace = path.strip("/")
    if not keyspace:
        raise InvalidInputError("cassandra URL names no keyspace: cassandra://host/keyspace")
    if "/" in keyspace:
        raise InvalidInputError("cassandra URL path must be exactly one keyspace name")
    from .cassandra.statements import validate_keyspace  # the driver's package: only for this form

    keyspace = validate_keyspace(unquote(keyspace))
    options = option_fields(CASSANDRA, _query(query))
    if (options.get("ssl_ca") is not None or options.get("ssl_verify") is not None) and not options.get("ssl"):
        raise InvalidInputError("URL options ssl_ca / ssl_verify need ssl=true")
    return StoreAddress(
        backend=CASSANDRA, hosts=hosts, port=port, keyspace=keyspace, username=username, password=password, **options
    )
