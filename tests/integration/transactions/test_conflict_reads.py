"""The faster conflict checks of large commits (issue 16, item 3) find exactly what the per-cell reads found.

``VersionWalk`` reads dense rows as row slices and sparse cells' whole histories once; these tests compare
it with the store's own ``get`` on random histories, and run the commit protocol's conflict cases on dense
rows (the slice path) and on sparse cells (the history path)."""
from __future__ import annotations

import random

import pytest

from airflow_atlas.errors import TransactionConflictError
from airflow_atlas.kvs.api import MAX_TIMESTAMP, Cell
from airflow_atlas.transactions.conflicts import ROW_SLICE_MIN_CELLS, VersionWalk

DENSE = ROW_SLICE_MIN_CELLS + 4


def dense_cells(row: bytes = b"dense") -> list[Cell]:
    return [Cell(row, b"c%03d" % i) for i in range(DENSE)]


def sparse_cells() -> list[Cell]:
    return [Cell(b"sparse%03d" % i, b"c") for i in range(5)]


def test_version_walk_answers_like_point_reads(kvs, make_manager, make_table):
    make_manager()  # installs the fresh-timestamp supplier sentinels need
    table = make_table()
    rng = random.Random(16)
    cells = dense_cells() + sparse_cells() + [Cell(b"mixed", b"m%02d" % i) for i in range(3)]
    # Versions at random timestamps (sentinels included), and other columns inside the dense row's span.
    for ts in sorted(rng.sample(range(10, 10_000), 40)):
        kvs.put(table, {c: b"v%d" % ts for c in cells if rng.random() < 0.4}, ts)
    kvs.put(table, {Cell(b"dense", b"c005x"): b"other", Cell(b"dense", b"c000"): b"x"}, 20_000)
    kvs.add_gc_sentinels(table, cells[:3] + cells[-2:])
    walk = VersionWalk(kvs, table)
    bounds = {c: MAX_TIMESTAMP for c in cells}
    for _ in range(12):
        expected = {c: v.timestamp for c, v in kvs.get(table, bounds).items()}
        assert walk.latest(bounds) == expected
        # next step: every cell below its current answer (same bound for many, as the checks do), or random
        if rng.random() < 0.5:
            bounds = {c: expected[c] for c in expected if expected[c] >= 0}
        else:
            bounds = {c: rng.randrange(0, 21_000) for c in cells}
        if not bounds:
            break


@pytest.mark.parametrize("shape", ["dense", "sparse"])
def test_a_write_committed_after_our_start_conflicts(make_manager, make_table, shape):
    manager = make_manager()
    table = make_table()
    cells = dense_cells() if shape == "dense" else sparse_cells()
    ours = manager.begin()
    ours.put(table, {c: b"ours" for c in cells})
    theirs = manager.begin()
    theirs.put(table, {cells[len(cells) // 2]: b"theirs"})
    theirs.commit()
    with pytest.raises(TransactionConflictError, match="after our start"):
        ours.commit()


@pytest.mark.parametrize("shape", ["dense", "sparse"])
def test_other_columns_in_a_slice_do_not_conflict(make_manager, make_table, shape):
    manager = make_manager()
    table = make_table()
    cells = dense_cells() if shape == "dense" else sparse_cells()
    ours = manager.begin()
    ours.put(table, {c: b"ours" for c in cells})
    theirs = manager.begin()  # writes a column between two of ours, not one of ours
    theirs.put(table, {Cell(cells[3].row, cells[3].col + b"x"): b"theirs"})
    theirs.commit()
    assert ours.commit() is not None


@pytest.mark.parametrize("shape", ["dense", "sparse"])
def test_a_pending_older_writer_is_rolled_back_after_our_write(kvs, make_manager, make_table, shape):
    manager = make_manager()
    table = make_table()
    cells = dense_cells() if shape == "dense" else sparse_cells()
    dead = manager.timestamps.fresh_timestamp()  # started before us, writes after our begin, never commits
    ours = manager.begin()
    kvs.put(table, {cells[1]: b"dead"}, dead)
    ours.put(table, {c: b"ours" for c in cells})
    assert ours.commit() is not None
    assert manager.transaction_service.get(dead) == -1


@pytest.mark.parametrize("shape", ["dense", "sparse"])
def test_the_walk_goes_below_aborted_versions_to_find_a_conflict(kvs, make_manager, make_table, shape):
    """Every cell: a committed write after our start, then an aborted version on top (same writer for all,
    so the second step shares one bound and takes the slice path again)."""
    manager = make_manager()
    table = make_table()
    cells = dense_cells() if shape == "dense" else sparse_cells()
    ours = manager.begin()
    ours.put(table, {c: b"ours" for c in cells})
    theirs = manager.begin()
    theirs.put(table, {c: b"theirs" for c in cells})
    theirs.commit()
    aborted = manager.timestamps.fresh_timestamp()
    kvs.put(table, {c: b"aborted" for c in cells}, aborted)
    manager.transaction_service.put_unless_exists(aborted, -1)
    with pytest.raises(TransactionConflictError, match=f"transaction {theirs.start_timestamp} committed"):
        ours.commit()
