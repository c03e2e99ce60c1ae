"""``atlas-sweep shards``: show the shard count and progress, or raise the count."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..kvs.tables import SWEEPABLE_STRATEGY_NAMES as STRATEGIES
from .output import EXIT_OK, EXIT_USAGE, CliError, emit_json, table, wants_json

if TYPE_CHECKING:
    from ..store import AtlasStore
    from .store import StoreHandle


def cmd_shards(args: argparse.Namespace, h: StoreHandle) -> int:
    store = h.store
    current = store.number_of_shards()
    result = {"store": store.describe(), "number_of_shards": current}
    if args.raise_to is not None:
        if args.raise_to < current:
            raise CliError(
                EXIT_USAGE,
                f"cannot lower the shard count from {current} to {args.raise_to}: shards are never removed "
                "(queued writes were placed by the count in force when they were written)",
            )
        new = store.queue.update_number_of_shards(args.raise_to)
        result.update(number_of_shards=new, previous=current, changed=new != current)
        if wants_json(args):
            emit_json(result)
        elif new == current:
            print(f"the store already has {current} shard(s)")
        else:
            print(f"raised the shard count from {current} to {new}")
        return EXIT_OK
    progress = [
        {"shard": shard, **{s: store.queue.progress.get_progress(shard, s) for s in STRATEGIES}} for shard in range(current)
    ]
    result["progress"] = progress
    if wants_json(args):
        emit_json(result)
    else:
        print(f"{current} shard(s) in {store.describe()}")
        print(table(["SHARD", "CONSERVATIVE PROGRESS", "THOROUGH PROGRESS"],
                    [[p["shard"], p["CONSERVATIVE"], p["THOROUGH"]] for p in progress]), end="")
    return EXIT_OK


def check_shards(store: AtlasStore, shards: list[int] | None) -> list[int]:
    """The selected shards (default all), or CliError (exit 2) for a shard the store does not have."""
    count = store.number_of_shards()
    if shards is None:
        return list(range(count))
    bad = [s for s in shards if s >= count]
    if bad:
        raise CliError(EXIT_USAGE, f"shard {bad[0]} is out of range: this store has {count} shard(s) (0..{count - 1})")
    return sorted(set(shards))
