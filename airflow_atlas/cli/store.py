"""Opening the store a command names (``--store``, ``--store-file``, ``--conn-id``, ``$ATLAS_STORE_URL``)
without secrets in any message, and without writing anything unless the command is ``init``. A URL with a
password belongs in ``$ATLAS_STORE_URL`` or a 0600 file (``--store-file``), not on the command line, where
every local user sees it in the process table."""
from __future__ import annotations

import argparse
import contextlib
import sys
from typing import TYPE_CHECKING

from ..errors import AtlasError, InvalidInputError, StoreNotInitializedError
from ..kvs.scrub import redact_url, scrub, url_secrets
from ..kvs.url import STORE_URL_ENV, read_private_line, store_url_from_environment
from .output import EXIT_USAGE, PROG, CliError

if TYPE_CHECKING:
    from ..config import StoreConfig
    from ..settings_resolver import Layer, SettingValue
    from ..store import AtlasStore


def command_line_layers(args: argparse.Namespace) -> list[Layer]:
    """``--set NAME=VALUE`` and ``--max-entries-per-second`` as the resolver's ``COMMAND_LINE`` layers (each
    value parsed and validated by its setting's declaration when resolved)."""
    from ..settings_resolver import Rank, text_layer

    layers = [text_layer(Rank.COMMAND_LINE, getattr(args, "settings", None) or [], "--set")]
    rate = getattr(args, "max_entries_per_second", None)
    if rate is not None:
        layers.append(text_layer(Rank.COMMAND_LINE, {"sweep_max_entries_per_second": rate}, "--max-entries-per-second"))
    return layers


def engine_config(args: argparse.Namespace) -> StoreConfig:
    """The command's engine settings with ``--store``, resolved once (:func:`airflow_atlas.settings_resolver.resolve`):
    defaults < the command line (:func:`command_line_layers`); the store URL's replica-safety options go on
    top when the store opens. (With ``--conn-id`` the ``atlas_settings`` Variable is the layer below the
    command line, as in the DAGs: :func:`_open_from_connection`.)"""
    from ..settings_resolver import resolve

    return resolve(*command_line_layers(args))


class StoreHandle:
    """The opened store, how to describe it without secrets, and its effective settings with their sources
    (``settings``: :class:`~airflow_atlas.settings_resolver.SettingValue` list; ``settings_warnings``: e.g.
    a shadowed ``atlas_settings`` Variable)."""

    def __init__(self, store: AtlasStore, label: str, secrets: list[str], settings: list[SettingValue] | None = None,
                 settings_warnings: list[str] | None = None) -> None:
        self.store = store
        self.label = label
        self.secrets = secrets
        self.settings = settings or []
        self.settings_warnings = settings_warnings or []

    def scrub(self, text: str) -> str:
        return scrub(text, self.secrets)


def chosen_url(args: argparse.Namespace) -> str | None:
    """The store URL of ``--store``, ``--store-file`` (first line of a 0600 file) or ``$ATLAS_STORE_URL``."""
    url, path = getattr(args, "store", None), getattr(args, "store_file", None)
    if url is not None and path is not None:
        raise CliError(EXIT_USAGE, "give either --store or --store-file, not both")
    if path is not None:
        try:
            return read_private_line(path, "store URL file")
        except InvalidInputError as exc:
            raise CliError(EXIT_USAGE, str(exc)) from None
    return url or store_url_from_environment()


def open_store(args: argparse.Namespace, *, must_exist: bool = True) -> StoreHandle:
    """Open the store the arguments name. ``must_exist`` (every command but ``init``): write nothing before
    knowing it is an initialized store - a missing SQLite file, a foreign SQLite database, a missing
    keyspace, a keyspace without the registry or a store without its internal tables are a usage error
    (exit 2: run ``init`` first)."""
    named = [f"--{o}" for o in ("store", "store-file") if getattr(args, o.replace("-", "_"), None) is not None]
    conn_id = getattr(args, "conn_id", None)
    if named and conn_id is not None:
        raise CliError(EXIT_USAGE, f"give either {named[0]} or --conn-id, not both")
    layers = command_line_layers(args)
    if conn_id is not None:
        store, settings, warnings = _open_from_connection(conn_id, layers, must_exist)
        label, secrets = f"Airflow connection {conn_id!r}", []
    else:
        url = chosen_url(args)
        if not url:
            raise CliError(EXIT_USAGE, "no store given: pass --store URL or --conn-id ID, or set "
                           f"{STORE_URL_ENV} (or --store-file FILE)")
        from ..kvs.address import StoreAddress
        from ..settings_resolver import address_layer, resolve, sourced
        from ..store import AtlasStore

        label = redact_url(url)
        secrets = url_secrets(url)
        try:
            address = StoreAddress.from_url(url)  # parsed once: opened and described from this object
            config = resolve(*layers)
            store = AtlasStore.open(address, config, must_exist=must_exist)
            settings, warnings = sourced(store.config, *layers, address_layer(address)), []
        except StoreNotInitializedError as exc:
            raise CliError(EXIT_USAGE, f"{label}: {scrub(str(exc), secrets)}: run '{PROG} init' first") from None
        except InvalidInputError as exc:
            raise CliError(EXIT_USAGE, f"{label}: {scrub(str(exc), secrets)}") from None
    if must_exist:
        from ..sweep.queue.queue_tables import SWEEP_PROGRESS

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
    return StoreHandle(store, label, secrets, settings, warnings)


def _open_from_connection(
    conn_id: str, layers: list[Layer], must_exist: bool
) -> tuple[AtlasStore, list[SettingValue], list[str]]:
    """The store of an Airflow connection, opened by the Airflow hook (which applies the connection's own
    create_keyspace extra; the internal tables are checked afterwards), with the settings the DAGs' tasks
    use: the ``atlas_settings`` Variable < the command line (``layers``) < the connection's extras, resolved
    by the tasks' own call (:meth:`AtlasSettings.engine_config`). Returns (store, effective settings with
    their sources, settings warnings)."""
    # Airflow may log to stdout while it loads its configuration and resolves the connection; keep stdout
    # for results (--json) by sending anything printed meanwhile to stderr.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            from ..airflow.hooks.atlas import AtlasHook  # imports Airflow: only on this path
            from ..airflow.settings import AtlasSettings
            from ..settings_resolver import address_layer
        except ImportError as exc:
            raise CliError(EXIT_USAGE, f"--conn-id needs Apache Airflow and this package's Airflow hook: {exc}") from None
        try:
            settings = AtlasSettings.load(log_warnings=False, through_cli=True)  # the stored Variable too
            hook = AtlasHook(atlas_conn_id=conn_id, config=settings.engine_config(*layers), must_exist=must_exist)
            store = hook.get_store()
            effective = settings.effective(*layers, address_layer(hook.address()))
            return store, effective, settings.warnings()
        except StoreNotInitializedError as exc:
            raise CliError(EXIT_USAGE, f"Airflow connection {conn_id!r}: {exc}: run '{PROG} init' first") from None
        except (AtlasError, CliError):
            raise
        except Exception as exc:
            names = {c.__name__ for c in type(exc).__mro__}
            if "AirflowNotFoundException" in names:
                raise CliError(EXIT_USAGE, f"Airflow connection {conn_id!r} is not defined") from None
            raise
