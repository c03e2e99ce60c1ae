"""Scrub (spec 003, issue 4 section 6): a hard-delete transaction records its cells in ``_scrub``; the
scrubber removes their older versions as soon as the immutable timestamp has passed the transaction -
and not before, while an older transaction is still open and may read them."""
from __future__ import annotations

import pytest

from airflow_atlas.kvs.api import SENTINEL_TIMESTAMP

from .helpers import CONS, THOR, cell


@pytest.mark.parametrize("strategy", [CONS, THOR], ids=lambda s: s.value)
def test_hard_delete_is_scrubbed_once_the_immutable_timestamp_passed_it(harness, strategy):
    h = harness
    t = h.table(strategy)
    s1, _ = h.write(t, {cell(0): b"a1", cell(1): b"b1", cell(2): b"keep"})
    s2, _ = h.write(t, {cell(0): b"a2", cell(1): b"b2"})
    older = h.begin()  # started before the hard delete: it may still read a2 / b2
    assert older.get(t, [cell(0)]) == {cell(0): b"a2"}

    hard = h.store.transactions.begin(hard_delete=True)
    hard.delete(t, [cell(0), cell(1)])
    hard.put(t, {cell(3): b"new"})
    s_hard = hard.start_timestamp
    hard.commit()
    assert {w.start_ts for _, w in h.store.scrub_queue.pending()} == {s_hard}

    before = h.observe([t])
    waiting = h.store.scrubber.scrub()
    assert waiting.entries_scrubbed == 0 and waiting.entries_waiting == 3, waiting
    assert waiting.immutable_ts <= older.start_timestamp
    assert [v for v, _ in h.versions(t, cell(0))] == [s1, s2, s_hard], "scrubbed while an older reader is open"
    assert older.get(t, [cell(0), cell(1)]) == {cell(0): b"a2", cell(1): b"b2"}
    h.check(before, {strategy.value: waiting.immutable_ts})

    h.commit(older)
    done = h.store.scrubber.scrub()
    assert done.entries_scrubbed == 3 and done.entries_waiting == 0, done
    assert done.immutable_ts > s_hard
    if strategy is CONS:
        assert h.versions(t, cell(0)) == [(SENTINEL_TIMESTAMP, b""), (s_hard, b"")]
        assert h.versions(t, cell(3)) == [(SENTINEL_TIMESTAMP, b""), (s_hard, b"new")]
    else:
        assert h.versions(t, cell(0)) == [] and h.versions(t, cell(1)) == []
        assert h.versions(t, cell(3)) == [(s_hard, b"new")]
    assert h.versions(t, cell(2)) == [(s1, b"keep")], "cells the hard delete did not touch are left alone"
    assert h.store.scrub_queue.pending() == []
    assert h.store.transactions.run(lambda txn: txn.get(t, [cell(0), cell(1), cell(2), cell(3)])) == {
        cell(2): b"keep",
        cell(3): b"new",
    }

    # Targeted sweep afterwards agrees (its queue holds the same writes).
    h.settle()
    ts, _ = h.sweep_all()
    h.assert_no_obsolete(ts, [t])
    h.assert_no_leaks()


def test_scrub_of_a_hard_delete_that_never_committed(harness):
    h = harness
    t = h.table(CONS)
    s1, _ = h.write(t, {cell(0): b"v"})
    hard = h.store.transactions.begin(hard_delete=True)
    hard.delete(t, [cell(0)])
    # Dies after enqueueing and writing (the transaction's own commit steps, without the commit).
    from airflow_atlas.sweep.queue.write_info import WriteInfo

    infos = [WriteInfo(t, cell(0), hard.start_timestamp, True)]
    h.store.queue.writer.enqueue(infos)
    h.store.scrub_queue.enqueue(infos)
    h.store.kvs.put(t, {cell(0): b""}, hard.start_timestamp)
    h.store.registry.unregister(hard.start_timestamp)

    done = h.store.scrubber.scrub()
    assert done.aborted_writes_deleted == 1 and done.entries_scrubbed == 1
    assert h.is_aborted(hard.start_timestamp)
    assert h.versions(t, cell(0)) == [(s1, b"v")], "the undone delete is removed, the value is untouched"
    assert h.store.transactions.run(lambda txn: txn.get(t, [cell(0)])) == {cell(0): b"v"}
