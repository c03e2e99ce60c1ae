"""``atlas-sweep init``: create the store's tables and user tables; validate everything before applying."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..errors import AtlasError
from .output import EXIT_OK, EXIT_USAGE, CliError, emit_json, wants_json

if TYPE_CHECKING:
    from .store import StoreHandle


def plan_tables(wanted: list[tuple[str, str]], existing: dict[str, str]) -> list[tuple[str, str]]:
    """The user tables to create, or CliError (exit 2) before anything is applied: a name given twice with
    different strategies, or an existing table with another strategy."""
    seen: dict[str, str] = {}
    for name, strategy in wanted:
        if seen.get(name, strategy) != strategy:
            raise CliError(EXIT_USAGE, f"table {name!r} is given twice, as {seen[name]} and {strategy}")
        seen[name] = strategy
    for name, strategy in seen.items():
        if name in existing and existing[name] != strategy:
            raise CliError(
                EXIT_USAGE,
                f"table {name!r} exists with strategy {existing[name]}, not {strategy}: nothing was changed "
                "(the shard count and the other tables included)",
            )
    return [(name, strategy) for name, strategy in seen.items() if name not in existing]


def cmd_init(args: argparse.Namespace, h: StoreHandle) -> int:
    store = h.store
    before = None
    try:
        before = store.number_of_shards() if store.kvs.table_exists("_sweep_progress") else None
    except AtlasError:
        before = None
    existing = {name: s.value for name, s in store.user_tables().items()}
    to_create = plan_tables(args.table, existing)  # validate first ...
    store.initialize(shards=args.shards)  # ... then apply
    for name, strategy in to_create:
        store.create_table(name, strategy)
    created = [name for name, _ in to_create]
    shards = store.number_of_shards()
    tables = {k: v.value for k, v in sorted(store.user_tables().items())}
    result = {"store": store.describe(), "number_of_shards": shards, "shards_before": before,
              "tables_created": created, "tables": tables}
    if wants_json(args):
        emit_json(result)
    else:
        print(f"initialized {store.describe()}: {shards} shard(s)")
        if args.shards is not None and args.shards < shards:
            print(f"note: the shard count stays {shards}: it is never lowered")
        for name in created:
            print(f"created table {name} ({tables[name]})")
    return EXIT_OK
