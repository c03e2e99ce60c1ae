"""Fault: the shard count is raised while writers commit and sweepers sweep.

Writers (threads) commit transactions of mixed sizes into a CONSERVATIVE, a THOROUGH and a NOTHING table;
two sweeper threads run iteration after iteration over every (shard, strategy) pair below the current
shard count; meanwhile the count is raised step by step (the writer's cached count goes stale for a few
seconds each time, as in production). Every queue entry the writers enqueue is recorded with the shard
it went to (by wrapping the queue writer's own partitioning), and every entry an iteration consumes
(read in its batch and passed by the progress it persisted) is recorded too.

At the end (writers stopped, one final sweep):

* no entry was consumed twice - progress passes each queued entry exactly once (a shard whose progress
  went backwards, or a cleaner that lost a row that was then re-written, would show here);
* no entry was skipped - every enqueued entry below the final sweep timestamp was consumed, in the shard
  it was queued in, and every shard it went to is one the sweepers visit (below the count);
* the oracle holds for the final sweep, nothing obsolete is left, the queue is empty below the sweep
  timestamp and below progress, and the store holds exactly what the model of committed writes says.

Short variant (default run): about 8 s of load, count 1 -> 4 -> 16. Long variant: about 90 s, 1 -> 2 ->
4 -> 8 -> 16 -> 32 -> 64.
"""
from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest

from airflow_atlas.errors import StoreUnavailableError
from airflow_atlas.oracle import Reader, compare, observe, obsolete_versions
from airflow_atlas.sweep.queue.shards import shard_for

from .helpers import (
    CONFIG,
    STRATEGIES,
    Model,
    WriterLoop,
    WriterStats,
    backlog_below,
    ensure_tables,
    leaked_queue_rows,
    model_mismatches,
)

pytestmark = pytest.mark.cassandra

TABLES = {"grow_c": "CONSERVATIVE", "grow_t": "THOROUGH", "grow_n": "NOTHING"}


class Recorder:
    """Enqueued entries (with their shard) and consumed entries, keyed (strategy, start, table, cell)."""

    def __init__(self, store):
        self.lock = threading.Lock()
        self.enqueued: dict[tuple, int] = {}  # key -> shard
        self.consumed: Counter = Counter()
        self.consumed_shard: dict[tuple, int] = {}
        self.uncertain: set = set()
        self.local = threading.local()
        writer, reader = store.queue.writer, store.queue.reader
        real_partition, real_read = writer._partition, reader.read_batch

        def partition(writes):
            parts = real_partition(writes)
            with self.lock:
                for (shard, conservative), items in parts.items():
                    strategy = "CONSERVATIVE" if conservative else "THOROUGH"
                    for w, _value in items:
                        self.enqueued[(strategy, w.start_ts, w.table, w.cell)] = shard
            return parts

        def read_batch(shard, strategy, *args, **kwargs):
            batch = real_read(shard, strategy, *args, **kwargs)
            self.local.batch = (shard, batch)
            return batch

        writer._partition = partition  # instance attributes: this store's own objects only
        reader.read_batch = read_batch

    def iterate(self, store, shard: int, strategy: str, holder: str, batch_limit: int):
        """One run_iteration, recording what it consumed. Returns the result (None when it failed)."""
        self.local.batch = None
        try:
            result = store.sweeper.run_iteration(shard, strategy, holder=holder, batch_limit=batch_limit)
        except StoreUnavailableError:  # a loaded node: the outcome of this iteration's progress is unknown
            stashed = self.local.batch
            if stashed is not None:
                with self.lock:
                    self.uncertain.update(self._keys(stashed[1]))
            return None
        stashed = self.local.batch
        if stashed is not None and result.status not in ("skipped_locked", "dry_run"):
            _, batch = stashed
            keys = [k for k, e in zip(self._keys(batch), batch.entries, strict=True) if result.old_progress < e.start_ts <= result.new_progress]
            with self.lock:
                for key in keys:
                    self.consumed[key] += 1
                    self.consumed_shard[key] = shard
        return result

    @staticmethod
    def _keys(batch):
        strategy = batch.strategy.value
        return [(strategy, e.start_ts, e.table, e.cell) for e in batch.entries]


def _sweeper(store, recorder, stop, name, errors, seed):
    rng = random.Random(seed)
    while not stop.is_set():
        try:
            pairs = [(shard, s) for shard in range(store.number_of_shards()) for s in STRATEGIES]
            rng.shuffle(pairs)
            for shard, strategy in pairs:
                recorder.iterate(store, shard, strategy, name, batch_limit=40)
        except Exception as exc:  # anything else is a finding
            errors.append(exc)
            return


def _grow_while_sweeping(shared_stores, seconds: float, counts: list[int]):
    store, _ = shared_stores(config=CONFIG, shards=1)
    ensure_tables(store, TABLES)
    recorder = Recorder(store)
    model = Model()
    stop_writers, stop_sweepers = threading.Event(), threading.Event()
    writers = [
        WriterLoop(store, model, TABLES, seed=100 + i, rows=600, columns=4, shards_for_large=16) for i in range(2)
    ]
    errors: list = []
    threads = [threading.Thread(target=w.run, args=(stop_writers,), daemon=True) for w in writers]
    threads += [
        threading.Thread(target=_sweeper, args=(store, recorder, stop_sweepers, f"sweeper-{i}", errors, i), daemon=True)
        for i in range(2)
    ]
    for t in threads:
        t.start()
    history = [1]
    step = seconds / (len(counts) + 1)
    for count in counts:
        time.sleep(step)
        assert store.queue.progress.update_number_of_shards(count) == count
        history.append(count)
    time.sleep(step)
    stop_writers.set()
    for t in threads[:2]:
        t.join(120)
    stop_sweepers.set()
    for t in threads[2:]:
        t.join(300)
    assert not any(t.is_alive() for t in threads)
    assert errors == [], errors
    stats = WriterStats()
    for w in writers:
        stats.add(w.stats)
    assert stats.committed > 0 and stats.large > 0, stats

    # The final sweep, recorded like the others; the oracle around it.
    ts = store.sweep_timestamps.all()
    fresh = store.timestamps.fresh_timestamp()
    readers = [Reader(fresh), Reader(fresh, read_only=True)]
    before = observe(store, readers)
    for strategy in STRATEGIES:
        for shard in range(store.number_of_shards()):
            for _ in range(100_000):
                r = recorder.iterate(store, shard, strategy, "final", batch_limit=500)
                assert r is not None and r.status != "skipped_locked", r
                if r.new_progress >= ts[strategy] - 1:
                    break
    assert compare(before, observe(store, readers), ts) == []
    assert obsolete_versions(store, ts) == []
    assert backlog_below(store, ts) == {}
    assert leaked_queue_rows(store) == []
    model.resolve(store)
    assert model_mismatches(store, model, store.timestamps.fresh_timestamp(), TABLES) == []

    twice = {k: n for k, n in recorder.consumed.items() if n > 1}
    assert twice == {}, f"{len(twice)} entries consumed more than once, e.g. {list(twice)[:3]}"
    phantom = set(recorder.consumed) - set(recorder.enqueued)
    assert phantom == set(), f"consumed entries nobody enqueued: {list(phantom)[:3]}"
    final_count = store.number_of_shards()
    assert final_count == history[-1]
    skipped, wrong_shard, bad_route = [], [], []
    for key, shard in recorder.enqueued.items():
        strategy, start, table, c = key
        if shard >= final_count or shard not in {shard_for(table, c, n) for n in history}:
            bad_route.append((key, shard))
        if start >= ts[strategy]:
            continue
        if key not in recorder.consumed:
            if key not in recorder.uncertain:
                skipped.append(key)
        elif recorder.consumed_shard[key] != shard:
            wrong_shard.append(key)
    assert bad_route == [], bad_route[:3]
    assert skipped == [], f"{len(skipped)} queued entries were never swept, e.g. {skipped[:3]}"
    assert wrong_shard == [], wrong_shard[:3]
    used = Counter(shard for shard in recorder.enqueued.values())
    assert len(used) > 1, "the raised count was never used by the writers"
    assert not any(t == "grow_n" for _, _, t, _ in recorder.enqueued), "NOTHING tables are never queued"
    print(
        f"shard counts {history}; {len(recorder.enqueued)} entries enqueued over {len(used)} shards, "
        f"{sum(recorder.consumed.values())} consumed, {len(recorder.uncertain)} uncertain; writers {stats.to_json()}"
    )


def test_shard_count_raised_while_sweeping_short(shared_stores):
    _grow_while_sweeping(shared_stores, seconds=8, counts=[4, 16])


@pytest.mark.reliability
def test_shard_count_raised_while_sweeping(shared_stores):
    _grow_while_sweeping(shared_stores, seconds=90, counts=[2, 4, 8, 16, 32, 64])
