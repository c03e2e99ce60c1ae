"""The suite's backlog check (``backlog_below``) against a writer that spans the sweep timestamp.

A writer that started below a sweep timestamp and committed at or after it must not be swept yet, and the
sweeper may not move past it (spec 000, step 3): its entries, and every entry queued after it, wait. The
check must accept that (the soak run hits it for CONSERVATIVE, whose sweep timestamp trails by the
unreadable window) and still report entries the sweep should have reached. Embedded store: no services.
"""
from __future__ import annotations

from .helpers import CONFIG, backlog_below, cell, first_blocking_start, open_store, progress_of, sweep_all

TABLE = "spanning_t"
THOR = "THOROUGH"


def _commit(store, i):
    txn = store.transactions.begin()
    txn.put(TABLE, {cell(i): b"v%d" % i})
    txn.commit()
    return txn


def _scenario(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'kvs.db'}", config=CONFIG, shards=1)
    store.create_table(TABLE, THOR)
    _commit(store, 0)
    _commit(store, 0)  # an obsolete version below everything
    spanning = store.transactions.begin()
    spanning.put(TABLE, {cell(1): b"spanning"})
    after = _commit(store, 2)  # starts after the spanning writer, commits before it
    ts = {THOR: store.timestamps.fresh_timestamp(), "CONSERVATIVE": store.timestamps.fresh_timestamp()}
    spanning.commit()  # commits after the sweep timestamp
    return store, ts, spanning, after


def test_a_writer_committed_after_the_sweep_timestamp_blocks_and_is_not_backlog(tmp_path):
    store, ts, spanning, after = _scenario(tmp_path)
    assert spanning.start_timestamp < after.start_timestamp < ts[THOR] <= spanning.commit_timestamp

    _, results = sweep_all(store, ts)
    thorough = [r for r in results if r.strategy == THOR]
    assert [r.status for r in thorough] == ["blocked"]
    assert progress_of(store)[(0, THOR)] == spanning.start_timestamp - 1
    assert first_blocking_start(store, 0, THOR, progress_of(store)[(0, THOR)], ts[THOR]) == spanning.start_timestamp
    # Two writers wait (the spanning one and the one after it); neither is backlog the sweep should have reached.
    assert store.queue.reader.count_entries(0, THOR, progress_of(store)[(0, THOR)], ts[THOR]) == 2
    assert backlog_below(store, ts) == {}


def test_entries_below_the_blocking_writer_that_were_not_swept_are_reported(tmp_path):
    store, ts, spanning, _ = _scenario(tmp_path)
    # No sweep at all: the two writes of cell 0 sit below the blocking writer and must be reported.
    assert first_blocking_start(store, 0, THOR, progress_of(store)[(0, THOR)], ts[THOR]) == spanning.start_timestamp
    assert backlog_below(store, ts) == {f"{THOR}/0": 2}
