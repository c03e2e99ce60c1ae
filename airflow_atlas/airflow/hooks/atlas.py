"""AtlasHook: the store (:class:`airflow_atlas.store.AtlasStore`) behind an Airflow connection.

Two connection types are understood:

``cassandra`` - the Cassandra provider's own connection type, read through its ``CassandraHook``:
    * host: contact points, comma separated (``10.0.0.1,10.0.0.2``); port: native port (9042)
    * schema: the keyspace (required)
    * login / password: PlainText authentication
    * TLS extras, the same names and meaning as the store URL's options: ``ssl`` (bool), ``ssl_ca`` (the
      absolute path of the CA file to pin; without it the system's CAs), ``ssl_verify`` (bool, default
      true: the node's certificate chain AND its name are verified). The provider's ``ssl_options`` turns
      TLS on too, its ``ca_certs`` being ``ssl_ca``. In the task and on Spark executors alike the TLS
      context is :func:`airflow_atlas.kvs.url.tls_context` (hostname verification on by default, unlike
      the driver's own handling of ``ssl_options``); Spark jobs get them as the URL's ``ssl*`` options.
    * extra (JSON): the provider's keys ``ssl_options`` (e.g. ``{"ca_certs": "/etc/ca.pem"}``),
      ``load_balancing_policy`` + ``load_balancing_policy_args``, ``protocol_version``, ``cql_version``;
      and ours: ``create_keyspace`` (bool, default false), ``replication_factor`` (int, default 1),
      ``datacenter`` (NetworkTopologyStrategy datacenter for ``create_keyspace``); the replica-safety
      settings ``consistency_<operation>`` (e.g. ``"consistency_sweep_delete": "ALL"``),
      ``allow_weak_sweep_consistency``, ``repair_interval_seconds``, ``allow_gc_grace_below_repair_interval``
      (see :mod:`airflow_atlas.kvs.consistency`): the settings resolver's top layer (``STORE``, over
      ``atlas_settings`` and the task's ``store_config``) for this store; Spark executors get the resolved
      settings in the Spark conf (never a second copy in the store URL).
    When ``protocol_version`` is absent the hook starts the negotiation at 5 (Cassandra 4.0+).
    Example (environment variable, JSON form: URI query values would arrive as strings)::

        AIRFLOW_CONN_ATLAS_DEFAULT='{"conn_type": "cassandra", "host": "10.0.0.1,10.0.0.2", "port": 9042,
            "schema": "atlas", "login": "sweeper", "password": "...",
            "extra": {"ssl": true, "ssl_ca": "/etc/ssl/atlas-ca.pem",
                      "load_balancing_policy": "DCAwareRoundRobinPolicy",
                      "load_balancing_policy_args": {"local_dc": "dc1"}}}'

``atlas_embedded`` - the embedded store, one SQLite file on the worker's disk (single machine only):
    * host: the absolute path of the database file (or the ``path`` extra field)::

        AIRFLOW_CONN_ATLAS_DEFAULT='{"conn_type": "atlas_embedded", "host": "/var/lib/atlas/atlas.db"}'

    * URI form: ``atlas-embedded:///var/lib/atlas/atlas.db`` (Airflow puts the path in ``schema``).

Operators never open sessions themselves: they ask this hook for a store and close it when done. Nothing
here logs a password: :func:`describe_connection` reports only whether authentication is configured.
"""
from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_atlas.errors import InvalidInputError

if TYPE_CHECKING:
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.settings_resolver import Layer
    from airflow_atlas.store import AtlasStore

EMBEDDED_CONN_TYPE = "atlas_embedded"
CASSANDRA_CONN_TYPE = "cassandra"
DEFAULT_PROTOCOL_VERSION = 5


def _extra(conn, name: str, default: Any = None) -> Any:
    """An extra field, stored either plainly or with the UI's ``extra__<type>__`` prefix."""
    extra = conn.extra_dejson or {}
    if name in extra:
        return extra[name]
    return extra.get(f"extra__{conn.conn_type}__{name}", default)


def embedded_path(conn) -> str:
    """The SQLite file of an ``atlas_embedded`` connection (absolute path)."""
    path = _extra(conn, "path") or conn.host or ""
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
    return path


def _bool_extra(conn, name: str, default: bool) -> bool:
    from airflow_atlas.settings_model import Bool

    value = _extra(conn, name, default)
    try:
        return Bool().parse(value) if isinstance(value, str) else Bool().check(value)
    except ValueError:
        raise InvalidInputError(f"connection {conn.conn_id!r}: extra {name} must be true or false, got {value!r}") from None


def connection_tls(conn) -> dict:
    """The TLS of a ``cassandra`` connection, validated: ``{"ssl": bool, "ssl_ca": path or None,
    "ssl_verify": bool}`` from the extras ``ssl`` / ``ssl_ca`` / ``ssl_verify`` (the store URL's options)
    or the provider's ``ssl_options`` (TLS on; its ``ca_certs`` is the CA). Secret-free."""
    conn_id = conn.conn_id
    ssl_options = _extra(conn, "ssl_options")
    if ssl_options in ("", None):
        ssl_options = None
    elif not isinstance(ssl_options, dict):
        raise InvalidInputError(f"connection {conn_id!r}: extra ssl_options must be a JSON object")
    ca = _extra(conn, "ssl_ca")
    provider_ca = (ssl_options or {}).get("ca_certs")
    if ca and provider_ca and ca != provider_ca:
        raise InvalidInputError(
            f"connection {conn_id!r}: extras ssl_ca and ssl_options.ca_certs name different CA files: keep one"
        )
    ca = ca or provider_ca or None
    on = _bool_extra(conn, "ssl", bool(ssl_options))
    verify = _bool_extra(conn, "ssl_verify", True)
    if not on and (ca is not None or _extra(conn, "ssl_verify") is not None or ssl_options is not None):
        raise InvalidInputError(f"connection {conn_id!r}: extras ssl_ca / ssl_verify / ssl_options need ssl true")
    if ca is not None and (not isinstance(ca, str) or not os.path.isabs(ca.strip())):
        raise InvalidInputError(
            f"connection {conn_id!r}: extra ssl_ca must be the absolute path of the CA file, got {ca!r}"
        )
    return {"ssl": on, "ssl_ca": ca.strip() if ca else None, "ssl_verify": verify}


def connection_layer(conn) -> Layer:
    """The replica-safety settings a ``cassandra`` connection's extras set, as the settings resolver's
    ``STORE`` layer (text or JSON values; checked by the resolver, naming the connection)."""
    from airflow_atlas.kvs.consistency import SETTING_NAMES
    from airflow_atlas.settings_resolver import Layer, Rank

    values = {}
    if (conn.conn_type or "").strip() == CASSANDRA_CONN_TYPE:
        for name in SETTING_NAMES:
            value = _extra(conn, name)
            if value is not None and value != "":
                values[name] = value
    return Layer(Rank.STORE, f"connection {conn.conn_id!r} extras", values, text=True)


def describe_connection(conn) -> dict:
    """What a connection points at, validated, without secrets (safe to log and return to XCom)."""
    conn_type = (conn.conn_type or "").strip()
    if conn_type == EMBEDDED_CONN_TYPE:
        return {"conn_id": conn.conn_id, "backend": "sqlite", "path": embedded_path(conn)}
    if conn_type == CASSANDRA_CONN_TYPE:
        from airflow_atlas.kvs.cassandra import validate_keyspace

        hosts = [h.strip() for h in (conn.host or "").split(",") if h.strip()]
        if not hosts:
            raise InvalidInputError(f"connection {conn.conn_id!r} (cassandra) names no host")
        if not conn.schema:
            raise InvalidInputError(
                f"connection {conn.conn_id!r} (cassandra) names no keyspace: put it in the schema field"
            )
        try:
            validate_keyspace(conn.schema)
        except InvalidInputError as exc:
            raise InvalidInputError(f"connection {conn.conn_id!r}: {exc}") from None
        rf = _extra(conn, "replication_factor", 1)
        try:
            rf = int(rf)
        except (TypeError, ValueError):
            raise InvalidInputError(f"connection {conn.conn_id!r}: extra replication_factor must be an integer") from None
        from airflow_atlas.config import StoreConfig
        from airflow_atlas.settings_model import layer_values

        layer = connection_layer(conn)  # bad consistency extras fail here, naming the connection
        layer_values(StoreConfig, layer.values, layer.source, text=True)
        protocol = _extra(conn, "protocol_version")
        if protocol not in (None, ""):
            try:
                protocol = int(protocol)
            except (TypeError, ValueError):
                raise InvalidInputError(
                    f"connection {conn.conn_id!r}: extra protocol_version must be an integer, got {protocol!r}"
                ) from None
        return {
            "conn_id": conn.conn_id,
            "backend": "cassandra",
            "hosts": hosts,
            "port": int(conn.port) if conn.port else 9042,
            "keyspace": conn.schema,
            "authenticated": bool(conn.login),
            **connection_tls(conn),
            "load_balancing_policy": _extra(conn, "load_balancing_policy") or "RoundRobinPolicy",
            "protocol_version": int(protocol) if protocol else DEFAULT_PROTOCOL_VERSION,
            "create_keyspace": _bool_extra(conn, "create_keyspace", False),
            "replication_factor": rf,
            "datacenter": _extra(conn, "datacenter"),
        }
    raise InvalidInputError(
        f"connection {conn.conn_id!r} has type {conn_type!r}: an Atlas store connection is of type "
        f"{CASSANDRA_CONN_TYPE!r} or {EMBEDDED_CONN_TYPE!r}"
    )


def store_url(conn) -> str:
    """The engine URL of a connection (see :meth:`AtlasHook.get_store_url`; contains the password)."""
    from urllib.parse import quote, urlencode

    info = describe_connection(conn)
    if info["backend"] == "sqlite":
        return "sqlite:///" + quote(info["path"])
    auth = ""
    if conn.login:
        auth = quote(conn.login, safe="")
        if conn.password:
            auth += ":" + quote(conn.password, safe="")
        auth += "@"
    query = {
        "protocol_version": info["protocol_version"],
        "create_keyspace": "true" if info["create_keyspace"] else "false",
        "replication_factor": info["replication_factor"],
    }
    if info["ssl"]:
        query["ssl"] = "true"
        if info["ssl_ca"]:
            query["ssl_ca"] = info["ssl_ca"]
        if not info["ssl_verify"]:
            query["ssl_verify"] = "false"
    policy_args = _extra(conn, "load_balancing_policy_args")
    local_dc = policy_args.get("local_dc") if isinstance(policy_args, dict) else None
    datacenter = info["datacenter"] or local_dc
    if datacenter:
        query["datacenter"] = datacenter
    hosts = ",".join(info["hosts"])
    return f"cassandra://{auth}{hosts}:{info['port']}/{info['keyspace']}?{urlencode(query)}"


class AtlasHook(BaseHook):
    """Opens the store named by an Airflow connection.

    :param atlas_conn_id: connection id (type ``cassandra`` or ``atlas_embedded``, see the module doc).
    :param config: the engine settings of the layers below the store (:class:`airflow_atlas.config.StoreConfig`
        from :func:`airflow_atlas.settings_resolver.resolve`: ``atlas_settings``, the task's ``store_config``);
        the ``atlas_settings`` Variable is NOT read here: operators pass them in. The connection's
        replica-safety extras are the top layer: the store's ``config`` is the result.

    Use as a context manager so the Cassandra cluster is always shut down::

        with AtlasHook("atlas_default") as hook:
            store = hook.get_store()
            store.sweep_timestamps.all()
    """

    conn_name_attr = "atlas_conn_id"
    default_conn_name = "atlas_default"
    conn_type = EMBEDDED_CONN_TYPE
    hook_name = "Atlas embedded store"

    def __init__(
        self,
        atlas_conn_id: str = default_conn_name,
        config: StoreConfig | None = None,
        must_exist: bool = False,
        **kwargs,
    ):
        """``must_exist``: open an existing store only and write nothing to find out (no SQLite file, no
        keyspace, no registry table is created; a store that is not there is StoreNotInitializedError)."""
        super().__init__(**kwargs)
        self.atlas_conn_id = atlas_conn_id
        self.config = config
        self.must_exist = must_exist
        self._store: AtlasStore | None = None

    # ----- store -----------------------------------------------------------------------------------
    def describe(self) -> dict:
        """The validated, secret-free description of the connection."""
        return describe_connection(self.get_connection(self.atlas_conn_id))

    def get_conn(self) -> AtlasStore:
        return self.get_store()

    def get_store(self) -> AtlasStore:
        """The store (opened once per hook). Bad connections raise InvalidInputError naming the problem."""
        if self._store is None:
            from airflow_atlas.store import AtlasStore

            conn = self.get_connection(self.atlas_conn_id)
            info = describe_connection(conn)
            config = self.resolved_config(conn)  # checked before connecting
            self._store = AtlasStore(self._open_kvs(conn, info, config), config)
        return self._store

    def resolved_config(self, conn=None) -> StoreConfig:
        """The store's engine settings: the connection's replica-safety extras over ``config`` (the
        layers below), resolved once (:func:`airflow_atlas.settings_resolver.resolve`). The embedded store
        keeps one copy of the data: its settings are checked, the levels then unused. This is what a Spark
        job of this store gets (``to_json``), so executors and the task use the same values."""
        from airflow_atlas.settings_resolver import resolve

        conn = conn or self.get_connection(self.atlas_conn_id)
        return resolve(connection_layer(conn), base=self.config)

    def _open_kvs(self, conn, info: dict, config: StoreConfig):
        if info["backend"] == "sqlite":
            from airflow_atlas.kvs.sqlite import SqliteKeyValueService

            return SqliteKeyValueService(info["path"], create=not self.must_exist)

        from airflow_atlas.kvs.cassandra import CassandraKeyValueService
        from airflow_atlas.kvs.url import tls_context

        conn_id = self.atlas_conn_id
        explicit_protocol = _extra(conn, "protocol_version") is not None
        # The one TLS context of the project (as for the URL form): built here, so a CA file that cannot be
        # read fails before connecting; kept by the factory (a forked child reuses it).
        tls = tls_context(info["ssl_ca"], info["ssl_verify"]) if info["ssl"] else None

        def cluster_factory():
            # The Cassandra provider's hook reads the connection (hosts, port, auth, TLS, policies) and
            # builds the Cluster; the key-value service owns the Cluster from here on (shut down on
            # close, rebuilt after a fork).
            from airflow.providers.apache.cassandra.hooks.cassandra import CassandraHook

            with warnings.catch_warnings():
                # The provider passes load_balancing_policy to Cluster(), which the driver deprecates in
                # favour of execution profiles; nothing to act on from here.
                warnings.filterwarnings("ignore", message="Legacy execution parameters", category=DeprecationWarning)
                cluster = CassandraHook(cassandra_conn_id=conn_id).get_cluster()
            if not explicit_protocol:
                cluster.protocol_version = DEFAULT_PROTOCOL_VERSION
            if tls is not None:
                cluster.ssl_context = tls  # over the driver's context from ssl_options (no hostname check)
            return cluster

        return CassandraKeyValueService(
            cluster_factory,
            keyspace=info["keyspace"],
            create_keyspace=info["create_keyspace"] and not self.must_exist,
            create_registry=not self.must_exist,
            replication_factor=info["replication_factor"],
            datacenter=info["datacenter"],
            consistency=config.consistency_policy(),
            gc_grace_guard=config.gc_grace_guard(),
            _secrets=(conn.password,) if conn.password else (),
        )

    def get_store_url(self) -> str:
        """The store as an engine URL (``sqlite:///...`` / ``cassandra://...``) for processes without
        Airflow, e.g. Spark executors. It CONTAINS THE PASSWORD: never log it or put it in XCom (the Spark
        helper passes it through a private file). Only what the URL form supports is carried over:
        hosts, port, keyspace, credentials, ``protocol_version``, TLS (:func:`connection_tls`), the
        local datacenter of ``DCAwareRoundRobinPolicy``, and our ``create_keyspace`` /
        ``replication_factor`` extras. The replica-safety extras are settings: they reach Spark with the
        resolved settings (``store.config``), not in the URL."""
        return store_url(self.get_connection(self.atlas_conn_id))

    # ----- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()

    def __enter__(self) -> AtlasHook:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def test_connection(self) -> tuple[bool, str]:
        """Used by the UI's "Test" button: opens the store and reads its shard count."""
        try:
            store = self.get_store()
            shards = store.number_of_shards()
            return True, f"Connected to {store.describe()} ({shards} shard(s))"
        except Exception as exc:  # reported to the user, never raised
            return False, f"{type(exc).__name__}: {exc}"
        finally:
            self.close()
