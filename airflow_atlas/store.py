"""AtlasStore: the engine's front door. One object wires the key-value layer to the timestamp service,
locks, transaction service, open-transaction registry, punch table, transaction manager, sweep queue and
sweepers. Operators, Spark tasks, the CLI and the demo all start here::

    store = AtlasStore.open("sqlite:///tmp/atlas.db")          # or "cassandra://127.0.0.1:9042/my_ks"
    store.initialize()
    store.create_table("orders", SweepStrategy.CONSERVATIVE)
    store.transactions.run(lambda txn: txn.put("orders", {Cell(b"r", b"c"): b"v"}))
    result = store.sweeper.run_iteration(shard=0, strategy=SweepStrategy.CONSERVATIVE)
"""
from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from .config import StoreConfig
from .kvs.api import KeyValueService
from .kvs.tables import SweepStrategy, TableMetadata, WriteMode, validate_table_name

if TYPE_CHECKING:
    from types import TracebackType

    from .kvs.address import StoreAddress
    from .locks import LockService
    from .sweep.history import SweepHistory
    from .sweep.legacy import LegacySweeper
    from .sweep.queue.sweep_queue import SweepQueue
    from .sweep.scrub import Scrubber, ScrubQueue
    from .sweep.sweep_timestamp import SweepTimestampProvider
    from .sweep.targeted import TargetedSweeper
    from .table_marks import TableMarks
    from .timestamps import TimestampSource
    from .timestamps.tls import ClientTls
    from .transactions.latency_source import StoreApplicationLatency
    from .transactions.manager import TransactionManager
    from .transactions.punch import PunchTable
    from .transactions.registry import OpenTransactionRegistry
    from .transactions.service import TransactionService


class AtlasStore:
    def __init__(self, kvs: KeyValueService, config: StoreConfig | None = None):
        self.kvs = kvs
        self.config = config or StoreConfig()
        # Sentinels and deletes take a fresh timestamp per batch call (spec 002).
        self.kvs.set_fresh_timestamp_supplier(self.timestamps.fresh_timestamp)

    # ----- construction ----------------------------------------------------------------------------
    @classmethod
    def open(
        cls, address: StoreAddress | str, config: StoreConfig | None = None, *, must_exist: bool = False,
        **kvs_options: object,
    ) -> AtlasStore:
        """THE opening of a store: the one ``address`` names (a :class:`~airflow_atlas.kvs.address.StoreAddress`,
        or a URL, parsed once here). ``config``: the resolved settings of every layer below the store
        (:func:`airflow_atlas.settings_resolver.resolve`; None = the defaults); the address's own
        replica-safety settings are the top layer (:func:`~airflow_atlas.settings_resolver.with_address`).
        The consistency levels and gc_grace guard of the key-value service come from the result;
        ``must_exist`` and ``kvs_options`` go to :func:`airflow_atlas.kvs.opening.open_kvs`."""
        from .kvs.address import StoreAddress
        from .kvs.opening import open_kvs
        from .settings_resolver import with_address

        if not isinstance(address, StoreAddress):
            address = StoreAddress.from_url(address)
        config = with_address(config, address)
        kvs = open_kvs(
            address, must_exist=must_exist, consistency=config.consistency_policy(),
            gc_grace_guard=config.gc_grace_guard(), **kvs_options,
        )
        return cls(kvs, config)

    def close(self) -> None:
        if "transactions" in self.__dict__:
            self.transactions.close()  # publishes the application latency left (best-effort)
        self.kvs.close()

    def __enter__(self) -> AtlasStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def describe(self) -> str:
        return self.kvs.describe()

    # ----- components (built lazily, once) ---------------------------------------------------------
    @cached_property
    def timestamps(self) -> TimestampSource:
        """Every timestamp of the store: its timestamp server once adopted (Cassandra), else its cell."""
        from .timestamps import open_timestamps

        return open_timestamps(self.kvs, self.timestamp_servers, self.config.timestamp_retry_seconds,
                               self.timestamp_tls if self.kvs.backend == "cassandra" else None)

    @cached_property
    def timestamp_servers(self) -> tuple[str, ...]:
        """The ``timestamp_servers`` setting, or when it is empty ``$ATLAS_TIMESTAMP_SERVERS``."""
        from .errors import InvalidInputError
        from .timestamps.addresses import servers_from_environment

        try:
            return self.config.timestamp_servers or servers_from_environment()
        except ValueError as exc:
            raise InvalidInputError(str(exc)) from None

    @cached_property
    def timestamp_tls(self) -> ClientTls | None:
        """The client's TLS files for the timestamp servers: the settings ``timestamp_tls_ca``, ``timestamp_tls_cert``
        and ``timestamp_tls_key``, each when null from ``$ATLAS_TIMESTAMP_TLS_CA`` / ``_CERT`` / ``_KEY``
        (:func:`~airflow_atlas.timestamps.tls.client_tls`: the certificate and key both or neither, only with a
        CA); None: plaintext gRPC. The embedded store never reads it."""
        from .timestamps.tls import client_tls

        cfg = self.config
        return client_tls(cfg.timestamp_tls_ca, cfg.timestamp_tls_cert, cfg.timestamp_tls_key)

    @cached_property
    def locks(self) -> LockService:
        from .locks import LockService

        return LockService(self.kvs)

    @cached_property
    def transactions_schema_version(self) -> int:
        """The store's transactions schema version (recorded at init, or inferred for a store initialised
        before records existed). InvalidInputError when the ``transactions_schema_version`` setting
        disagrees: a process must never look for commit entries in the other table."""
        from .transactions.schema import store_version

        return store_version(self.kvs, self.config.transactions_schema_version)

    @cached_property
    def transaction_service(self) -> TransactionService:
        from .transactions.service import make_transaction_service

        return make_transaction_service(self.kvs, version=self.transactions_schema_version)

    @cached_property
    def registry(self) -> OpenTransactionRegistry:
        from .transactions.registry import OpenTransactionRegistry

        # Registrations are spread over rows once the store's timestamps come from a server (transactions/registry.py).
        return OpenTransactionRegistry(self.kvs, striped=lambda: self.timestamps.served)

    @cached_property
    def punch(self) -> PunchTable:
        from .transactions.punch import PunchTable

        return PunchTable(self.kvs)

    @cached_property
    def queue(self) -> SweepQueue:
        from .sweep.queue.sweep_queue import SweepQueue

        return SweepQueue(self.kvs)

    @cached_property
    def scrub_queue(self) -> ScrubQueue:
        from .sweep.scrub import ScrubQueue

        return ScrubQueue(self.kvs)

    @cached_property
    def transactions(self) -> TransactionManager:
        from .transactions.latency_publisher import LatencyPublication
        from .transactions.manager import TransactionConfig, TransactionManager

        cfg = self.config
        latency = (
            LatencyPublication(cfg.app_latency_interval_seconds, cfg.app_latency_ttl_seconds)
            if cfg.app_latency_publish else None
        )
        return TransactionManager(
            self.kvs,
            self.timestamps,
            self.transaction_service,
            self.registry,
            self.punch,
            sweep_queue=self.queue.writer,
            scrub_queue=self.scrub_queue,
            config=TransactionConfig(
                lease_seconds=self.config.transaction_lease_seconds,
                punch_interval_seconds=self.config.punch_interval_seconds,
                running_writer_wait_seconds=self.config.running_writer_wait_seconds,
                latency=latency,
            ),
        )

    @cached_property
    def sweep_timestamps(self) -> SweepTimestampProvider:
        from .sweep.sweep_timestamp import SweepTimestampProvider

        return SweepTimestampProvider(
            self.timestamps, self.registry, self.punch, self.config.unreadable_window_seconds
        )

    @cached_property
    def sweeper(self) -> TargetedSweeper:
        from .sweep.targeted import TargetedSweeper

        return TargetedSweeper(self)

    @cached_property
    def legacy_sweeper(self) -> LegacySweeper:
        from .sweep.legacy import LegacySweeper

        return LegacySweeper(self)

    @cached_property
    def scrubber(self) -> Scrubber:
        from .sweep.scrub import Scrubber

        return Scrubber(self)

    @cached_property
    def table_marks(self) -> TableMarks:
        from .table_marks import TableMarks

        return TableMarks(self.kvs)

    @cached_property
    def history(self) -> SweepHistory:
        from .sweep.history import SweepHistory

        return SweepHistory(self.kvs)

    def application_latency(self) -> StoreApplicationLatency:
        """A fresh view of the application's publications for one sweep run (the application pace's source,
        transactions/latency_source.py)."""
        from .transactions.latency_source import StoreApplicationLatency

        return StoreApplicationLatency(self.kvs, self.config.app_latency_interval_seconds)

    # ----- schema ----------------------------------------------------------------------------------
    def initialize(self, shards: int | None = None) -> None:
        """Create every internal table (idempotent) and make sure the shard count is at least ``shards``.
        Records the transactions schema version first (refusing a setting that disagrees with the store's)."""
        from .transactions.latency_table import ensure_table as ensure_latency_table
        from .transactions.schema import record_version

        version = record_version(self.kvs, self.config.transactions_schema_version)
        if "transactions_schema_version" not in self.__dict__:
            self.__dict__["transactions_schema_version"] = version
        self.timestamps.ensure_tables()
        if self.timestamp_servers and self.kvs.backend == "cassandra":
            from .timestamps.record import adopt

            adopt(self.kvs)  # from now on only a timestamp server hands out this store's timestamps
        self.locks.ensure_tables()
        self.transaction_service.ensure_tables()
        self.registry.ensure_tables()
        self.punch.ensure_tables()
        self.queue.ensure_tables()
        self.scrub_queue.ensure_tables()
        self.history.ensure_tables()
        self.table_marks.ensure_tables()
        ensure_latency_table(self.kvs)
        wanted = shards if shards is not None else self.config.initial_shards
        if self.queue.progress.get_number_of_shards() < wanted:
            self.queue.progress.update_number_of_shards(wanted)

    def create_table(
        self, name: str, strategy: SweepStrategy | str = SweepStrategy.CONSERVATIVE, **cassandra_options: object
    ) -> None:
        validate_table_name(name, internal_ok=False)
        self.kvs.create_table(
            name,
            TableMetadata(strategy=SweepStrategy.parse(strategy), write_mode=WriteMode.LOGICAL, cassandra_options=cassandra_options),
        )

    def drop_table(self, name: str) -> None:
        """Drop a user table. Its queued writes are skipped by sweep (see :mod:`airflow_atlas.table_marks`)."""
        validate_table_name(name, internal_ok=False)
        self.table_marks.mark(name, self.timestamps.fresh_timestamp())
        self.kvs.drop_table(name)

    def truncate_table(self, name: str) -> None:
        """Truncate a user table; sweep never writes sentinels for writes queued before the truncate."""
        validate_table_name(name, internal_ok=False)
        self.table_marks.mark(name, self.timestamps.fresh_timestamp())
        self.kvs.truncate_table(name)

    def set_sweep_strategy(self, name: str, strategy: SweepStrategy | str) -> None:
        self.kvs.set_sweep_strategy(validate_table_name(name, internal_ok=False), SweepStrategy.parse(strategy))
        # this process's caches of table strategies (other processes see the change within their cache TTLs)
        if "queue" in self.__dict__:
            self.queue.writer.invalidate_caches()
        if "transactions" in self.__dict__:
            self.transactions.forget_metadata(name)

    def user_tables(self) -> dict[str, SweepStrategy]:
        """User tables (not the engine's internal ones) and their sweep strategies."""
        out: dict[str, SweepStrategy] = {}
        for name in self.kvs.list_tables():
            if not name.startswith("_"):
                out[name] = self.kvs.get_metadata(name).strategy
        return out

    def number_of_shards(self) -> int:
        return self.queue.progress.get_number_of_shards()
