"""A writer in its own process for the soak test (not a test module).

    python -m tests.reliability.writer_process URL SECONDS SEED TABLES_JSON SHARDS OUT_JSONL

Commits mixed transactions (:class:`tests.reliability.helpers.WriterLoop`) for SECONDS, then writes every
committed transaction (and those whose outcome was unknown) to OUT_JSONL, one JSON object per line, and a
last line ``{"stats": ...}``.
"""
from __future__ import annotations

import json
import sys
import threading

from airflow_atlas.store import AtlasStore
from tests.reliability.helpers import CONFIG, Committed, Model, WriterLoop


def main(argv: list[str]) -> int:
    url, seconds, seed, tables, shards, out = argv
    store = AtlasStore.open(url, config=CONFIG)
    model = Model()
    loop = WriterLoop(store, model, json.loads(tables), seed=int(seed), rows=200, columns=4, shards_for_large=int(shards))
    stop = threading.Event()
    timer = threading.Timer(float(seconds), stop.set)
    timer.start()
    print("WRITING", flush=True)
    try:
        loop.run(stop)
    finally:
        timer.cancel()
    model.resolve(store)  # unknown outcomes: ask the transactions table
    with open(out, "w", encoding="utf-8") as f:
        for txn in model.committed:
            f.write(json.dumps(txn.to_json()) + "\n")
        f.write(json.dumps({"stats": loop.stats.to_json()}) + "\n")
    store.close()
    return 0


def load(path: str) -> tuple[list[Committed], dict]:
    committed, stats = [], {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            data = json.loads(line)
            if "stats" in data:
                stats = data["stats"]
            else:
                committed.append(Committed.from_json(data))
    return committed, stats


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
