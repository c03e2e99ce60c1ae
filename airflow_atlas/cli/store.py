"""Opening the store a command names (``--store``, ``--conn-id``, ``$ATLAS_STORE_URL``) without secrets in
any message, and without writing anything unless the command is ``init``."""
from __future__ import annotations

import contextlib
import sys

from ..errors import AtlasError, InvalidInputError, StoreNotInitializedError
from ..kvs.url import STORE_URL_ENV, redact_url, scrub, store_url_from_environment, url_secrets
from .output import EXIT_USAGE, PROG, CliError


def engine_config(args):
    """The command's engine settings, resolved once (:func:`airflow_atlas.settings_resolver.resolve`):
    defaults < ``--set NAME=VALUE`` and ``--max-entries-per-second`` (the ``COMMAND_LINE`` layer, each
    value parsed and validated by its setting's declaration); the store URL's or connection's
    replica-safety options go on top when the store opens."""
    from ..settings_resolver import Rank, resolve, text_layer

    layers = [text_layer(Rank.COMMAND_LINE, getattr(args, "settings", None) or [], "--set")]
    rate = getattr(args, "max_entries_per_second", None)
    if rate is not None:
        layers.append(text_layer(Rank.COMMAND_LINE, {"sweep_max_entries_per_second": rate}, "--max-entries-per-second"))
    return resolve(*layers)


class StoreHandle:
    """The opened store and how to describe it without secrets."""

    def __init__(self, store, label: str, secrets: list[str]):
        self.store = store
        self.label = label
        self.secrets = secrets

    def scrub(self, text: str) -> str:
        return scrub(text, self.secrets)


def chosen_url(args) -> str | None:
    return getattr(args, "store", None) or store_url_from_environment()


def open_store(args, *, must_exist: bool = True) -> StoreHandle:
    """Open the store the arguments name. ``must_exist`` (every command but ``init``): write nothing before
    knowing it is an initialized store - a missing SQLite file, a foreign SQLite database, a missing
    keyspace, a keyspace without the registry or a store without its internal tables are a usage error
    (exit 2: run ``init`` first)."""
    url = getattr(args, "store", None)
    conn_id = getattr(args, "conn_id", None)
    if url is not None and conn_id is not None:
        raise CliError(EXIT_USAGE, "give either --store or --conn-id, not both")
    config = engine_config(args)
    if conn_id is not None:
        store, label, secrets = _open_from_connection(conn_id, config, must_exist), f"Airflow connection {conn_id!r}", []
    else:
        if url is None:
            url = store_url_from_environment()
            if not url:
                raise CliError(EXIT_USAGE, f"no store given: pass --store URL or --conn-id ID, or set {STORE_URL_ENV}")
        from ..store import AtlasStore

        label = redact_url(url)
        secrets = url_secrets(url)
        try:
            store = AtlasStore.open(url, config, must_exist=must_exist)
        except StoreNotInitializedError as exc:
            raise CliError(EXIT_USAGE, f"{label}: {scrub(str(exc), secrets)}: run '{PROG} init' first") from None
        except InvalidInputError as exc:
            raise CliError(EXIT_USAGE, f"{label}: {scrub(str(exc), secrets)}") from None
    if must_exist:
        from ..sweep.queue_tables import SWEEP_PROGRESS

        try:
            initialized = store.kvs.table_exists(SWEEP_PROGRESS)
        except BaseException:
            store.close()
            raise
        if not initialized:
            store.close()
            raise CliError(EXIT_USAGE, f"store {label} is not initialized: run '{PROG} init' first")
        try:
            _ = store.transactions_schema_version  # refuse a disagreeing setting before anything runs
        except BaseException:
            store.close()
            raise
    return StoreHandle(store, label, secrets)


def _open_from_connection(conn_id: str, config, must_exist: bool):
    """The store of an Airflow connection, opened by the Airflow hook (which applies the connection's own
    create_keyspace extra; the internal tables are checked afterwards)."""
    # Airflow may log to stdout while it loads its configuration and resolves the connection; keep stdout
    # for results (--json) by sending anything printed meanwhile to stderr.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            from ..airflow.hooks.atlas import AtlasHook  # imports Airflow: only on this path
        except ImportError as exc:
            raise CliError(EXIT_USAGE, f"--conn-id needs Apache Airflow and this package's Airflow hook: {exc}") from None
        try:
            return AtlasHook(atlas_conn_id=conn_id, config=config, must_exist=must_exist).get_store()
        except StoreNotInitializedError as exc:
            raise CliError(EXIT_USAGE, f"Airflow connection {conn_id!r}: {exc}: run '{PROG} init' first") from None
        except (AtlasError, CliError):
            raise
        except Exception as exc:
            names = {c.__name__ for c in type(exc).__mro__}
            if "AirflowNotFoundException" in names:
                raise CliError(EXIT_USAGE, f"Airflow connection {conn_id!r} is not defined") from None
            raise
