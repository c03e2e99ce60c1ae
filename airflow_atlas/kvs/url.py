"""Open a key-value service from a URL.

* ``sqlite:///relative/path.db`` and ``sqlite:////absolute/path.db`` - SQLAlchemy's convention (as in
  Airflow's ``sql_alchemy_conn``): the text after ``sqlite:///`` is the path, absolute when it starts with
  ``/``. Relative paths are resolved against the current directory when the store is opened.
  Query options: ``busy_timeout_ms``, ``synchronous``.
* ``cassandra://[user:password@]host1,host2[:port]/keyspace?replication_factor=1&protocol_version=5&ssl=true``
  Query options: ``replication_factor``, ``protocol_version``, ``create_keyspace``, ``datacenter``,
  ``ssl``, ``ssl_ca`` (CA file), ``ssl_verify`` (default true), ``connect_timeout``, ``request_timeout``,
  ``concurrency``, ``page_size``. User and password are percent-decoded.
  Replica safety (:mod:`.consistency`): ``consistency_<operation>`` (a level name, e.g.
  ``consistency_sweep_delete=QUORUM``), ``allow_weak_sweep_consistency``, ``repair_interval_seconds``,
  ``allow_gc_grace_below_repair_interval``. These are engine settings: :func:`url_settings` hands them to
  the settings resolver (:func:`airflow_atlas.settings_resolver.store_url_layer`, the top layer: the URL
  describes this one store), which validates them with every other layer; :func:`open_kvs` then takes the
  resolved ``consistency`` / ``gc_grace_guard`` (``AtlasStore.open`` does both).

In-memory stores are not supported (each thread and process would see a different database).
Errors are InvalidInputError naming the problem; no message ever contains the password.
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote

from ..errors import InvalidInputError
from . import consistency
from .api import KeyValueService

if TYPE_CHECKING:
    import ssl

STORE_URL_ENV = "ATLAS_STORE_URL"
"""The environment variable naming the store for processes without an argument for it (the CLI, a Spark
job without ``--store-url-file``); read only by :func:`store_url_from_environment`."""


def read_private_line(path: str, what: str) -> str:
    """The first line (stripped) of the file ``path`` holding a secret (``what`` names it in errors: "store URL
    file", "password file"). A file readable by group or others is refused, as are a missing and an empty
    file: InvalidInputError naming the file, never its content. THE reading of secret files (the CLI's
    ``--store-file`` and ``--password-file``, a Spark job's ``--store-url-file``)."""
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise InvalidInputError(f"{what} {path} does not exist (or is not a file)")
    mode = p.stat().st_mode & 0o777
    if mode & 0o077:
        raise InvalidInputError(f"{what} {path} has mode {mode:o}: it must not be readable by group/others (use 0600)")
    text = p.read_text(encoding="utf-8").strip()
    line = text.splitlines()[0].strip() if text else ""
    if not line:
        raise InvalidInputError(f"{what} {path} is empty")
    return line


def store_url_from_environment(environ: os._Environ[str] | dict[str, str] | None = None) -> str | None:
    """The store URL of :data:`STORE_URL_ENV` (stripped), or None when it is unset or empty."""
    url = ((os.environ if environ is None else environ).get(STORE_URL_ENV) or "").strip()
    return url or None


_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-_]*$")
_IPV6 = re.compile(r"^[0-9A-Fa-f:.]+$")


def _userinfo_end(rest: str) -> int:
    """Index of the ``@`` that ends the credentials of ``rest`` (the URL after ``scheme://``), or -1.

    The LAST ``@`` of the URL: a password typed with an unescaped ``/``, ``?``, ``#`` or ``@`` still counts
    as the password (never as a host, a port, a path or a query), so no parse error can echo part of it.
    (An ``@`` inside a query value must therefore be percent-encoded as ``%40``.)"""
    return rest.rfind("@")


def url_secrets(url) -> list[str]:
    """Every secret in ``url``, to scrub from any text: the password of the credentials (raw and
    percent-decoded, and its pieces between the characters a parser splits at) and ``password=`` query
    values. Longest first. (THE credential scrubbing of the project: :func:`redact_url` and
    :func:`scrub` use it.)"""
    if not isinstance(url, str) or "://" not in url:
        return []
    scheme, _, rest = url.partition("://")
    found: set[str] = set()
    at = -1 if scheme.strip().lower() == "sqlite" else _userinfo_end(rest)
    if at >= 0:
        userinfo = rest[:at]
        if ":" in userinfo:
            password = userinfo.split(":", 1)[1]
            found.update({password, unquote(password)})
            found.update(p for p in re.split(r"[/?#@:&=;,\[\]]", password) if len(p) >= 3)
    for value in re.findall(r"(?i)[?&]password=([^&#]*)", rest[at + 1 :] if at >= 0 else rest):
        found.update({value, unquote(value)})
    return sorted((s for s in found if s), key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str] = (), *, url: str | None = None) -> str:
    """``text`` with each secret (e.g. :func:`url_secrets`) replaced by ``***``; with ``url``, also that URL
    (written out whole, it becomes :func:`redact_url`) and every secret in it. THE scrubbing of the project
    (the CLI, the Cassandra backend's errors, the Spark jobs and their submission use it)."""
    if not text:
        return text
    if url:
        text = text.replace(url, redact_url(url))
        secrets = [*secrets, *url_secrets(url)]
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def redact_url(url: str) -> str:
    """``url`` with the password (and any ``password=`` query value) replaced by ``***``."""
    if not isinstance(url, str):
        return "<not a URL>"
    scheme, sep, rest = url.partition("://")
    if not sep:
        return re.sub(r"(?i)(password=)[^&#]*", r"\1***", url)
    at = -1 if scheme.strip().lower() == "sqlite" else _userinfo_end(rest)
    if at >= 0:
        userinfo, rest = rest[:at], rest[at + 1 :]
        user = userinfo.split(":", 1)[0]
        prefix = f"{user}:***@" if ":" in userinfo else f"{user}@"
    else:
        prefix = ""
    rest = re.sub(r"(?i)([?&]password=)[^&#]*", r"\1***", rest)
    return scrub(f"{scheme}://{prefix}{rest}", url_secrets(url))


def url_option(url: object, name: str) -> str | None:
    """The (decoded) value of the query option ``name`` of a store URL, or None (absent, not a URL)."""
    if not isinstance(url, str) or "://" not in url:
        return None
    scheme = url.strip().partition("://")[0].lower()
    try:
        _, _, query = _split(url.strip(), scheme)
        pairs = parse_qsl(query, keep_blank_values=True)
    except (InvalidInputError, ValueError):
        return None
    return next((value for key, value in pairs if key == name), None)


def with_url_option(url: str, name: str, value: str) -> str:
    """``url`` with its query option ``name`` set to ``value`` (replaced, or added last); scheme,
    credentials, hosts and keyspace are kept as they are written."""
    from urllib.parse import urlencode

    url = url.strip()
    scheme, _, rest = url.partition("://")
    at = -1 if scheme.lower() == "sqlite" else _userinfo_end(rest)
    head, rest = rest[: at + 1], rest[at + 1 :]
    path, _, query = rest.partition("?")
    pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != name] + [(name, value)]
    return f"{scheme}://{head}{path}?{urlencode(pairs)}"


def url_settings(url: object) -> dict[str, str]:
    """The replica-safety options of a ``cassandra://`` URL's query, as text (validated by the settings
    resolver, not here); ``{}`` for other URLs and for text that is not a URL."""
    if not isinstance(url, str) or not url.strip().lower().startswith("cassandra://"):
        return {}
    url = url.strip()
    try:
        _, _, query = _split("cassandra" + url[len("cassandra"):], "cassandra")
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except (InvalidInputError, ValueError):
        return {}  # open_kvs reports the malformed URL
    out: dict[str, str] = {}
    for name, value in pairs:
        if name in consistency.SETTING_NAMES:
            if name in out:
                raise InvalidInputError(f"URL option {name!r} given twice")
            out[name] = value
    return out


def _bool(name: str, value: str) -> bool:
    from ..settings_model import Bool  # the one list of true/false words (imports kvs: not at module level)

    try:
        return Bool().parse(value)
    except ValueError:
        raise InvalidInputError(f"URL option {name} must be true or false, got {value!r}") from None


def _int(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise InvalidInputError(f"URL option {name} must be an integer, got {value!r}") from None


def _float(name: str, value: str) -> float:
    try:
        out = float(value)
    except ValueError:
        raise InvalidInputError(f"URL option {name} must be a number, got {value!r}") from None
    if not (out > 0 and math.isfinite(out)):
        raise InvalidInputError(f"URL option {name} must be a positive finite number, got {value!r}")
    return out


def _query(query: str, allowed: dict) -> dict:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise InvalidInputError("malformed URL query string") from None
    out: dict = {}
    for name, value in pairs:
        if name not in allowed:
            raise InvalidInputError(f"unknown URL option {name!r}; allowed: {', '.join(sorted(allowed))}")
        if name in out:
            raise InvalidInputError(f"URL option {name!r} given twice")
        out[name] = allowed[name](name, value)
    return out


def _split(url: str, scheme: str) -> tuple[str, str, str]:
    """(netloc, path, query) of ``scheme://netloc/path?query``; fragments are refused. The netloc keeps
    its credentials (everything up to the last ``@``, see :func:`_userinfo_end`)."""
    rest = url[len(scheme) + 3 :]
    userinfo = ""
    if scheme != "sqlite":
        at = _userinfo_end(rest)
        if at >= 0:
            userinfo, rest = rest[: at + 1], rest[at + 1 :]
    if "#" in rest:
        raise InvalidInputError("key-value store URLs take no #fragment")
    rest, _, query = rest.partition("?")
    slash = rest.find("/")
    netloc, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    return userinfo + netloc, path, query


def _open_sqlite(url: str, opts: dict) -> KeyValueService:
    from .sqlite import SqliteKeyValueService

    netloc, path, query = _split(url, "sqlite")
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
    kwargs = _query(
        query,
        {"busy_timeout_ms": _int, "synchronous": lambda n, v: v.upper()},
    )
    # One copy of the data: no consistency levels, no grace period (the settings were validated anyway).
    opts.pop("consistency", None)
    opts.pop("gc_grace_guard", None)
    kwargs.update(opts)
    return SqliteKeyValueService(os.path.abspath(path), **kwargs)


def _parse_hosts(hostpart: str) -> tuple[list[str], int | None]:
    if not hostpart:
        raise InvalidInputError("cassandra URL names no host: cassandra://host1,host2[:port]/keyspace")
    hosts: list[str] = []
    ports: set[int] = set()
    for item in hostpart.split(","):
        item = item.strip()
        port_text = None
        if item.startswith("["):
            end = item.find("]")
            if end < 0:
                raise InvalidInputError(f"cassandra URL host {item!r}: unterminated IPv6 literal")
            host, after = item[1:end], item[end + 1 :]
            if after:
                if not after.startswith(":"):
                    raise InvalidInputError(f"cassandra URL host {item!r} is malformed")
                port_text = after[1:]
            if not _IPV6.match(host):
                raise InvalidInputError(f"cassandra URL host {item!r} is not an IPv6 address")
        else:
            host, colon, port_text = item.partition(":")
            if not colon:
                port_text = None
            if not host or not _HOST.match(host):
                raise InvalidInputError(f"cassandra URL host {host!r} is not a valid host name or address")
        if port_text is not None:
            try:
                port = int(port_text)
            except ValueError:
                raise InvalidInputError(f"cassandra URL port {port_text!r} is not a number") from None
            if not 1 <= port <= 65535:
                raise InvalidInputError(f"cassandra URL port {port} is outside 1-65535")
            ports.add(port)
        hosts.append(host)
    if len(ports) > 1:
        raise InvalidInputError(f"cassandra URL hosts use different ports {sorted(ports)}: one port for all hosts")
    return hosts, (ports.pop() if ports else None)


def tls_context(ssl_ca: str | None = None, ssl_verify: bool = True) -> ssl.SSLContext:
    """THE client TLS context of the project, for the URL options ``ssl_ca`` / ``ssl_verify`` and an Airflow
    connection's TLS extras alike: the CA file ``ssl_ca`` pinned (without it, the system's CAs), the node's
    certificate chain AND its name (the address or host name connected to) verified unless ``ssl_verify``
    is false. A CA file that cannot be read or parsed is InvalidInputError (never retried)."""
    import ssl

    try:
        context = ssl.create_default_context(cafile=ssl_ca)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidInputError(f"cannot load the TLS CA file {ssl_ca!r}: {exc.__class__.__name__}") from None
    if not ssl_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _open_cassandra(url: str, opts: dict) -> KeyValueService:
    from .cassandra import CassandraKeyValueService, validate_keyspace

    netloc, path, query = _split(url, "cassandra")
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
    validate_keyspace(unquote(keyspace))
    q = _query(
        query,
        {
            "replication_factor": _int,
            "protocol_version": _int,
            "create_keyspace": _bool,
            "datacenter": lambda n, v: v,
            "ssl": _bool,
            "ssl_ca": lambda n, v: v,
            "ssl_verify": _bool,
            "connect_timeout": _float,
            "request_timeout": _float,
            "concurrency": _int,
            "page_size": _int,
            **{name: (lambda n, v: v) for name in consistency.SETTING_NAMES},
        },
    )
    in_url = [name for name in consistency.SETTING_NAMES if q.pop(name, None) is not None]
    if in_url and opts.get("consistency") is None:
        raise InvalidInputError(
            f"URL option(s) {', '.join(in_url)} are engine settings: open the store with AtlasStore.open (it "
            "resolves them with the other settings) or pass the resolved consistency / gc_grace_guard"
        )
    ssl_on = q.pop("ssl", False)
    ssl_ca = q.pop("ssl_ca", None)
    ssl_verify = q.pop("ssl_verify", True)
    if (ssl_ca is not None or "ssl_verify" in query) and not ssl_on:
        raise InvalidInputError("URL options ssl_ca / ssl_verify need ssl=true")
    kwargs: dict = dict(q)
    if ssl_on:
        kwargs["ssl_context"] = tls_context(ssl_ca, ssl_verify)
    if port is not None:
        kwargs["port"] = port
    if username is not None:
        kwargs["username"] = username
        kwargs["password"] = password
    kwargs.update(opts)
    return CassandraKeyValueService.connect(hosts, keyspace=unquote(keyspace), **kwargs)


def open_kvs(url: str, *, must_exist: bool = False, **opts) -> KeyValueService:
    """Open the key-value service a URL names; ``opts`` go to the backend's constructor (and override
    URL options), e.g. ``busy_timeout_ms=...`` (SQLite) or ``fresh_timestamp_supplier=...`` (Cassandra).

    ``must_exist``: open an existing store only and write nothing to find out - a missing SQLite file, a
    foreign SQLite database, a missing keyspace or a keyspace without the registry raise
    StoreNotInitializedError (no file, WAL switch, keyspace or ``atlas_metadata`` is created).

    ``consistency`` / ``gc_grace_guard`` (in ``opts``): the replica-safety lookups built from the
    resolved settings (``StoreConfig.consistency_policy()`` / ``gc_grace_guard()``), which include the
    URL's own replica-safety options (:func:`url_settings`); a URL with such options needs them."""
    if must_exist:
        scheme = url.strip().partition("://")[0].lower() if isinstance(url, str) else ""
        if scheme == "sqlite":
            opts.setdefault("create", False)
        elif scheme == "cassandra":
            opts.setdefault("create_keyspace", False)
            opts.setdefault("create_registry", False)
    if not isinstance(url, str) or not url.strip():
        raise InvalidInputError("a key-value store URL is required (sqlite:///path.db or cassandra://host/keyspace)")
    url = url.strip()
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    try:
        if scheme == "sqlite":
            return _open_sqlite(url, opts)
        if scheme == "cassandra":
            return _open_cassandra(url, opts)
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
