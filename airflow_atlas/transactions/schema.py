"""Which transactions table a store uses: a property of the store, never of a process.

The version (1: ``_transactions``, 2: ``_transactions2``, spec 004) is recorded once, at ``init``, in the
LWT table ``_transactions_schema`` (row ``b"version"``, column ``b"v"``, value ``VAR_LONG(version)``) with
put-unless-exists, so concurrent inits agree and the record never changes. Every process reads it before
it builds its transaction service (:meth:`airflow_atlas.store.AtlasStore.transaction_service`).

Why: readers and the sweeper take "no commit entry" to mean "not committed" and roll the writer back. A
process looking in the wrong table finds no entry for *every* committed transaction and deletes all of
their writes (issue 16). So a process whose ``transactions_schema_version`` setting disagrees with the
store's is refused (InvalidInputError, CLI exit 2) before it reads or writes anything.

A store initialised before the record existed has no ``_transactions_schema`` table. Its version is
inferred from its data: the one transactions table holding entries; with neither holding any, the table
that exists (2 when both or none do; at ``init``, the setting when given). With both holding entries the store is
refused: an operator must say which one is right (``init`` with the setting), after checking with
``atlas-sweep verify``. Reading never creates anything; ``init`` records the inferred version.

Changing the version of a store (a v1 -> v2 migration) is not supported: every process of the
deployment, including long-running workers that built their service before a switch, would have to
change tables at the same timestamp, and the spec's live-migration section (coordination service) is
empty. A store keeps the version it was initialised with.
"""
from __future__ import annotations

from ..encoding import from_var_long, var_long
from ..errors import InvalidInputError, KeyAlreadyExistsError, StoreUnavailableError
from ..kvs.api import Cell, KeyValueService
from ..kvs.tables import SweepStrategy, TableMetadata, WriteMode
from ..validation import check_int

SCHEMA_TABLE = "_transactions_schema"
SCHEMA_TABLE_METADATA = TableMetadata(strategy=SweepStrategy.NOTHING, write_mode=WriteMode.LWT)
_VERSION_CELL = Cell(b"version", b"v")
VERSIONS = (1, 2)
DEFAULT_VERSION = 2
"""The version ``init`` records for a new store unless told otherwise."""


def _tables() -> dict[int, str]:
    from .service import TRANSACTIONS2_TABLE, TRANSACTIONS_TABLE

    return {1: TRANSACTIONS_TABLE, 2: TRANSACTIONS2_TABLE}


def check_version(version: int | None) -> int | None:
    if version is None:
        return None
    return check_int(version, "transactions_schema_version", min(VERSIONS), max(VERSIONS))


def persisted_version(kvs: KeyValueService) -> int | None:
    """The recorded version, or None when the store has no record (not initialised, or initialised
    before records existed)."""
    if not kvs.table_exists(SCHEMA_TABLE):
        return None
    try:
        raw = kvs.get_lwt(SCHEMA_TABLE, [_VERSION_CELL], serial=True).get(_VERSION_CELL)
    except StoreUnavailableError:
        # A Paxos failure (e.g. "CAS operation result is unknown" on a loaded cluster; every command opens
        # with this read, a read-only status too): the record is written once, by init, so a value a plain
        # read sees is the record. Seeing none proves nothing: then the Paxos failure stands.
        raw = kvs.get_lwt(SCHEMA_TABLE, [_VERSION_CELL]).get(_VERSION_CELL)
        if raw is None:
            raise
    if raw is None:
        return None
    try:
        version = from_var_long(raw)
    except InvalidInputError:
        version = None
    if version not in VERSIONS:
        raise InvalidInputError(
            f"{SCHEMA_TABLE}: the recorded transactions schema version (bytes {bytes(raw).hex()}) is not 1 or 2: "
            "the store's metadata is corrupt; restore the cell (VAR_LONG of the version) before using the store"
        )
    return version


def _holds_data(kvs: KeyValueService, table: str) -> bool:
    return kvs.table_exists(table) and next(iter(kvs.scan(table, page_size=1)), None) is not None


def inferred_version(kvs: KeyValueService, requested: int | None = None, *, choosing: bool = False) -> int:
    """The version of a store without a record, from its data (see the module docstring). ``choosing``
    (init only): with both tables holding entries, ``requested`` is the operator's explicit choice."""
    tables = _tables()
    holding = [v for v, t in tables.items() if _holds_data(kvs, t)]
    if len(holding) == 2 and choosing and requested is not None:
        return requested
    if len(holding) == 2:
        raise InvalidInputError(
            f"this store has no recorded transactions schema version and both {tables[1]} and {tables[2]} hold "
            "transaction entries: refusing to guess (a process reading the wrong table rolls back every committed "
            "transaction it meets). Run 'atlas-sweep verify' with each transactions_schema_version to see which "
            "is consistent, then record it once with 'atlas-sweep --set transactions_schema_version=N init'"
        )
    if holding:
        return holding[0]
    if choosing and requested is not None:
        return requested
    existing = [v for v, t in tables.items() if kvs.table_exists(t)]
    return existing[0] if len(existing) == 1 else DEFAULT_VERSION


def store_version(kvs: KeyValueService, requested: int | None = None, *, choosing: bool = False) -> int:
    """The store's version: the record, else the inference. ``requested`` (a process's setting, None when
    unset) must agree, or InvalidInputError names both."""
    requested = check_version(requested)
    recorded = persisted_version(kvs)
    version = recorded if recorded is not None else inferred_version(kvs, requested, choosing=choosing)
    if requested is not None and requested != version:
        how = "recorded at init" if recorded is not None else "inferred from its transactions tables"
        raise InvalidInputError(
            f"transactions_schema_version={requested} disagrees with this store, which uses transactions schema "
            f"version {version} ({how}): a process reading the other table would roll back every committed "
            "transaction it meets. Remove the setting (every process follows the store); the version of a store "
            "cannot be changed"
        )
    return version


def record_version(kvs: KeyValueService, requested: int | None = None) -> int:
    """At init: record the store's version (the inferred one for an existing store, else ``requested`` or
    the default) unless recorded; returns the store's version. Refuses a ``requested`` that disagrees."""
    version = store_version(kvs, requested, choosing=True)
    kvs.create_table(SCHEMA_TABLE, SCHEMA_TABLE_METADATA)
    try:
        kvs.put_unless_exists(SCHEMA_TABLE, {_VERSION_CELL: var_long(version)})
    except KeyAlreadyExistsError:
        pass  # a concurrent init recorded one: it decides
    return store_version(kvs, requested)
