"""AtlasHook: the store (:class:`airflow_atlas.store.AtlasStore`) behind an Airflow connection.

Two connection types are understood:

``cassandra`` - the Cassandra provider's own connection type (read by
:meth:`airflow_atlas.kvs.address.StoreAddress.from_connection`, the store opened by the engine like any
other address):
    * host: contact points, comma separated (``10.0.0.1,10.0.0.2``); port: native port (9042)
    * schema: the keyspace (required)
    * login / password: PlainText authentication
    * TLS extras, the same names and meaning as the store URL's options: ``ssl`` (bool), ``ssl_ca`` (the
      absolute path of the CA file to pin; without it the system's CAs), ``ssl_verify`` (bool, default
      true: the node's certificate chain AND its name are verified). The provider's ``ssl_options`` turns
      TLS on too, its ``ca_certs`` being ``ssl_ca``. In the task and on Spark executors alike the TLS
      context is :func:`airflow_atlas.kvs.opening.tls_context` (hostname verification on by default, unlike
      the driver's own handling of ``ssl_options``); Spark jobs get them as the URL's ``ssl*`` options.
    * extra (JSON): the provider's keys ``ssl_options`` (e.g. ``{"ca_certs": "/etc/ca.pem"}``),
      ``load_balancing_policy_args.local_dc`` (the local datacenter) and ``protocol_version`` (the
      provider's ``load_balancing_policy`` and ``cql_version`` are not read: the store always routes
      token-aware within its local datacenter, as on Spark executors); and ours, the store URL's options by
      the same names: ``create_keyspace`` (bool, default false), ``replication_factor`` (int, default 1),
      ``datacenter`` (the local datacenter, and the NetworkTopologyStrategy datacenter for
      ``create_keyspace``), ``connect_timeout``, ``request_timeout``, ``concurrency``, ``page_size``; the replica-safety
      settings ``consistency_<operation>`` (e.g. ``"consistency_sweep_delete": "ALL"``),
      ``allow_weak_sweep_consistency``, ``repair_interval_seconds``, ``allow_gc_grace_below_repair_interval``
      (see :mod:`airflow_atlas.kvs.consistency`): the settings resolver's top layer (``STORE``, over
      ``atlas_settings`` and the task's ``store_config``) for this store; Spark executors get the resolved
      settings in the Spark conf (never a second copy in the store URL).
    When ``protocol_version`` is absent the negotiation starts at 5 (Cassandra 4.0+).
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

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_atlas.kvs.address import StoreAddress
from airflow_atlas.kvs.address_options import EMBEDDED_CONN_TYPE

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from airflow_atlas.config import StoreConfig
    from airflow_atlas.settings_resolver import Layer
    from airflow_atlas.store import AtlasStore


def connection_layer(conn: Connection) -> Layer:
    """The replica-safety settings a ``cassandra`` connection's extras set, as the settings resolver's
    ``STORE`` layer (text or JSON values; checked by the resolver, naming the connection)."""
    from airflow_atlas.settings_resolver import address_layer

    return address_layer(StoreAddress.from_connection(conn))


def describe_connection(conn: Connection) -> dict:
    """What a connection points at, validated (its replica-safety extras too), without secrets (safe to log
    and return to XCom)."""
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.settings_model import layer_values
    from airflow_atlas.settings_resolver import address_layer

    address = StoreAddress.from_connection(conn)
    layer = address_layer(address)  # bad consistency extras fail here, naming the connection
    layer_values(StoreConfig, layer.values, layer.source, text=True)
    return {"conn_id": conn.conn_id, **address.describe()}


def store_url(conn: Connection) -> str:
    """The engine URL of a connection (see :meth:`AtlasHook.get_store_url`; contains the password)."""
    return StoreAddress.from_connection(conn).without_settings().to_url()


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
        **kwargs: Any,
    ) -> None:
        """``must_exist``: open an existing store only and write nothing to find out (no SQLite file, no
        keyspace, no registry table is created; a store that is not there is StoreNotInitializedError)."""
        super().__init__(**kwargs)
        self.atlas_conn_id = atlas_conn_id
        self.config = config
        self.must_exist = must_exist
        self._store: AtlasStore | None = None
        self._address: StoreAddress | None = None

    # ----- store -----------------------------------------------------------------------------------
    def address(self) -> StoreAddress:
        """The connection's store address, read once per hook (InvalidInputError naming the problem)."""
        if self._address is None:
            self._address = StoreAddress.from_connection(self.get_connection(self.atlas_conn_id))
        return self._address

    def describe(self) -> dict:
        """The validated, secret-free description of the connection."""
        return describe_connection(self.get_connection(self.atlas_conn_id))

    def get_conn(self) -> AtlasStore:
        return self.get_store()

    def get_store(self) -> AtlasStore:
        """The store (opened once per hook, by :meth:`airflow_atlas.store.AtlasStore.open` like every store).
        Bad connections raise InvalidInputError naming the problem."""
        if self._store is None:
            from airflow_atlas.store import AtlasStore

            self._store = AtlasStore.open(self.address(), self.config, must_exist=self.must_exist)
        return self._store

    def resolved_config(self) -> StoreConfig:
        """The store's engine settings: the connection's replica-safety extras over ``config`` (the
        layers below), resolved once (:func:`airflow_atlas.settings_resolver.with_address`). The embedded
        store keeps one copy of the data: its settings are checked, the levels then unused. This is what a
        Spark job of this store gets (``to_json``), so executors and the task use the same values."""
        from airflow_atlas.settings_resolver import with_address

        return with_address(self.config, self.address())

    def job_address(self) -> StoreAddress:
        """The store's address as a Spark job gets it: the connection's address without its replica-safety
        extras, which are settings - they reach Spark with the resolved settings (:meth:`resolved_config`),
        never a second copy in the address. It HOLDS THE PASSWORD (``repr`` never shows it): it goes to a
        Spark runner only, which writes it as a URL only where it enters the Spark process."""
        return self.address().without_settings()

    def get_store_url(self) -> str:
        """:meth:`job_address` as an engine URL (``sqlite:///...`` / ``cassandra://...``) for processes
        without Airflow. It CONTAINS THE PASSWORD: never log it or put it in XCom. Only what the URL form
        supports is carried over: hosts, port, keyspace, credentials, ``protocol_version``, TLS (``ssl*`` /
        ``ssl_options``), the local datacenter (``datacenter`` or ``load_balancing_policy_args.local_dc``),
        and our ``create_keyspace`` / ``replication_factor`` extras."""
        return self.job_address().to_url()

    # ----- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()

    def __enter__(self) -> AtlasHook:
        return self

    def __exit__(self, *exc: object) -> None:
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
