"""Property-based histories (issue 4 section 7): interleaved writes, overwrites, deletes, aborts, dead
writers, open transactions, late commits, large transactions, read-only readers, shard-count increases,
timestamps on fine and coarse partition boundaries, and sweep iterations with small batch limits (so
batches end in the middle of a partition).

Before and after every sweep the oracle holds for the open transactions, a transaction starting now and
the read-only readers; progress never decreases; and once nothing is open and sweep has caught up, no
obsolete version and no queue row below progress is left.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from airflow_atlas.kvs.api import Cell
from airflow_atlas.sweep.queue import queue_tables as qt

from .helpers import COARSE, CONS, FINE, THOR, cell

SMALL_CELLS = 8
LARGE_BASE = 100

writes = st.lists(
    st.tuples(st.integers(0, 1), st.integers(0, SMALL_CELLS - 1), st.booleans()), min_size=1, max_size=6
)
op = st.one_of(
    st.tuples(st.just("commit"), writes),
    st.tuples(st.just("commit"), writes),
    st.tuples(st.just("commit"), writes),
    st.tuples(st.just("abort"), writes),
    st.tuples(st.just("dead"), writes),
    st.tuples(st.just("open"), writes),
    st.tuples(st.just("open"), writes),
    st.tuples(st.just("close"), st.integers(0, 7), st.booleans()),
    st.tuples(st.just("close"), st.integers(0, 7), st.just(True)),
    st.tuples(st.just("late"), writes, writes, st.booleans()),
    st.tuples(st.just("late"), writes, writes, st.just(True)),
    st.tuples(st.just("read_only")),
    st.tuples(st.just("shards"), st.integers(1, 2)),
    st.tuples(st.just("sweep"), st.sampled_from([1, 2, 3, 7, 100]), st.integers(1, 3)),
    st.tuples(st.just("sweep"), st.sampled_from([1, 2, 3, 7, 100]), st.integers(1, 3)),
    st.tuples(st.just("settle")),
    st.tuples(st.just("large"), st.integers(51, 90), st.integers(0, 1), st.booleans()),
    st.tuples(st.just("boundary"), st.sampled_from([FINE, FINE, COARSE]), st.integers(0, 3)),
)
history = st.lists(op, min_size=4, max_size=30)


def _values(spec, tables, seq: int) -> dict[str, dict]:
    """Writes of one step; every value is unique in the history (an oracle comparing values must not
    mistake an older version for the newer one)."""
    out: dict[str, dict] = {}
    for t, i, is_delete in spec:
        out.setdefault(tables[t], {})[cell(i)] = b"" if is_delete else f"v{i}-{t}#{seq}".encode()
    return out


def run_history(
    h, ops, final_batch_limit: int, commit_at_end: bool, max_shards: int, max_sweep_iterations: int = 3
) -> None:
    tables = [h.table(CONS, "hc"), h.table(THOR, "ht")]
    last_progress = h.progress()
    seq = 0

    def progress_never_decreases():
        nonlocal last_progress
        now = h.progress()
        for key, value in last_progress.items():
            assert now[key] >= value, f"progress of {key} went back from {value} to {now[key]}"
        last_progress = now

    def sweep(limit: int, iterations: int) -> None:
        before = h.observe(tables)
        used, results = h.iterate_all(batch_limit=limit, iterations=min(iterations, max_sweep_iterations))
        h.check(before, used)
        _events(results)
        progress_never_decreases()

    for step in ops:
        kind = step[0]
        seq += 1
        if kind in ("commit", "abort", "open"):
            txn = h.begin()
            for table, values in _values(step[1], tables, seq).items():
                h.stage(txn, table, values)
            if kind == "commit":
                h.try_commit(txn)
            elif kind == "abort":
                h.abort(txn)
        elif kind == "late":
            # A commits after B started and while B is open: sweep must stop at A (progress = A - 1).
            a = h.begin()
            for table, values in _values(step[1], tables, seq).items():
                h.stage(a, table, values)
            b = h.begin()
            for table, values in _values(step[2], tables, -seq).items():
                h.stage(b, table, values)
            h.try_commit(a)
            if step[3]:
                sweep(100, 2)  # while B is open: A committed after the sweep timestamp (B's start)
        elif kind == "dead":
            h.dead_writer(_values(step[1], tables, seq))
        elif kind == "close":
            if h.open:
                txn = h.open[step[1] % len(h.open)]
                if step[2]:
                    h.try_commit(txn)  # may commit after later transactions began: a late commit
                else:
                    h.abort(txn)
        elif kind == "read_only":
            h.read_only_reader()
        elif kind == "shards":
            wanted = min(h.shards + step[1], max_shards)
            if wanted > h.shards:
                # Through the progress table directly: the queue writer keeps its cached (smaller) count
                # for a while, as writers in other processes would.
                h.store.queue.progress.update_number_of_shards(wanted)
        elif kind == "settle":
            h.settle()
        elif kind == "large":
            _, n, t, dead = step
            values = {cell(LARGE_BASE + (seq * 7 + i) % 150): b"L%d" % seq for i in range(n)}
            if dead:
                h.dead_writer({tables[t]: values})
            else:
                txn = h.begin()
                h.stage(txn, tables[t], values)
                h.try_commit(txn)
        elif kind == "boundary":
            _, width, before = step
            h.jump_to(h.next_boundary(width) - before)
        elif kind == "sweep":
            sweep(step[1], step[2])

    # Nothing open any more; sweep catches up completely.
    for txn in list(h.open):
        if commit_at_end:
            h.try_commit(txn)
        else:
            h.abort(txn)
    h.settle()
    before = h.observe(tables)
    ts, results = h.sweep_all(batch_limit=final_batch_limit)
    assert all(r.status == "caught_up" for r in results), results
    _events(results)
    h.check(before, ts)
    progress_never_decreases()
    h.assert_no_obsolete(ts, tables)
    h.assert_no_leaks()


def _events(results) -> None:
    """Statistics (``--hypothesis-show-statistics``): which situations the histories reached."""
    for r in results:
        if r.status == "blocked":
            event("sweep blocked by a late commit")
        if r.counts.transactions_aborted:
            event("sweep aborted a dead writer")
        if r.counts.queue_rows_cleaned:
            event("queue rows cleaned")
        if getattr(r, "iterations", 1) > 1:
            event("several iterations per shard")
        if r.counts.entries_read > 50:
            event("batch of more than 50 entries (dedicated rows)")


def _settings(examples: int):
    # ATLAS_SWEEP_EXAMPLES=500 runs a longer search (the default keeps the suite fast).
    examples = int(os.environ.get("ATLAS_SWEEP_EXAMPLES", examples))
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
        derandomize=False,
        print_blob=True,
    )


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@_settings(25)
@given(ops=history, final_batch_limit=st.sampled_from([1, 3, 10, 10_000]), commit_at_end=st.booleans())
def test_random_histories_sqlite(new_harness, ops, final_batch_limit, commit_at_end):
    run_history(new_harness(replace=True), ops, final_batch_limit, commit_at_end, max_shards=6)


@pytest.mark.cassandra
@pytest.mark.parametrize("backend", ["cassandra"], indirect=True)
@_settings(5)
@given(
    ops=st.lists(op, min_size=4, max_size=14),
    final_batch_limit=st.sampled_from([3, 10, 10_000]),
    commit_at_end=st.booleans(),
)
def test_random_histories_cassandra(new_harness, ops, final_batch_limit, commit_at_end):
    # Each iteration costs about ten lightweight transactions on Cassandra: fewer shards and iterations.
    run_history(new_harness(replace=True), ops, final_batch_limit, commit_at_end, max_shards=2, max_sweep_iterations=1)


def test_the_oracle_detects_what_a_wrong_sweep_would_do(harness):
    """The checks are not vacuous: deleting a version a reader needs, or leaving an obsolete one, or a
    queue row below progress, is reported."""
    from airflow_atlas import oracle

    h = harness
    tc, tt = h.table(CONS), h.table(THOR)
    h.write_many({tc: {cell(0): b"a1"}, tt: {cell(0): b"t1"}})
    s2, _ = h.write_many({tc: {cell(0): b"a2"}, tt: {cell(0): b""}})
    reader = h.begin()  # open: sweep may not change what it sees
    h.settle()
    ts = {CONS.value: reader.start_timestamp, THOR.value: reader.start_timestamp}
    assert oracle.obsolete_versions(h.store, ts, [tc, tt]), "the older versions are obsolete"

    before = h.observe([tc, tt])
    h.store.kvs.delete(tc, [(cell(0), s2)])  # a wrong sweep: removes the version the reader reads
    with pytest.raises(AssertionError, match="before b'a2', after b'a1'"):
        h.check(before, ts)

    h.close_all()
    h.jump_to(h.next_boundary(FINE) + 1)
    h.settle()
    ts, _ = h.sweep_all()
    h.assert_no_obsolete(ts, [tc, tt])
    h.assert_no_leaks()
    # A queue row far below progress, as a cleanup that forgot a partition would leave it (written at a
    # fresh write time: on Cassandra the partition tombstone of an earlier cleanup would hide it).
    fresh = h.store.timestamps.fresh_timestamp()
    kvs = h.store.kvs
    kvs.put(qt.SWEEPABLE_TIMESTAMPS, {qt.timestamps_cell(0, 0, True): qt.TIMESTAMPS_VALUE}, fresh)
    kvs.put(qt.SWEEPABLE_CELLS, {Cell(qt.non_dedicated_row(0, 0, True), qt.cells_column(1, 0)): b"x"}, fresh)
    with pytest.raises(AssertionError, match="queue rows left below progress"):
        h.assert_no_leaks()
    progress = h.store.queue.progress
    for shard in range(h.shards):
        h.store.queue.cleaner.reconcile(shard, CONS, progress.get_progress(shard, CONS))
    h.assert_no_leaks()
