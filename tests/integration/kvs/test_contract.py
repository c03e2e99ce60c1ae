"""The KeyValueService contract, run unchanged against the embedded SQLite store and a real Cassandra 5.0.

Nothing is mocked: the ``kvs`` fixture (conftest.py next to this file) yields a SqliteKeyValueService on a
temporary file or a CassandraKeyValueService on the session's keyspace. Backend-only behaviour (Cassandra
table options, SQLite multi-process safety) is tested at the end.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
import uuid
from itertools import pairwise

import pytest

from airflow_atlas.errors import (
    InvalidInputError,
    KeyAlreadyExistsError,
    StoreUnavailableError,
    TableNotFoundError,
)
from airflow_atlas.kvs import (
    MAX_CELL_NAME_BYTES,
    MAX_TIMESTAMP,
    MAX_VALUE_BYTES,
    Cell,
    ScanRange,
    SweepStrategy,
    TableMetadata,
    Value,
    WriteMode,
)

LOGICAL, LWT, WALLCLOCK = WriteMode.LOGICAL, WriteMode.LWT, WriteMode.WALLCLOCK


def cell(row: str | bytes, col: str | bytes) -> Cell:
    as_bytes = lambda x: x if isinstance(x, bytes) else x.encode()  # noqa: E731
    return Cell(as_bytes(row), as_bytes(col))


def page_size_of(kvs) -> int:
    return getattr(kvs, "page_size", 50)


# ================================================================================================
# tables
# ================================================================================================
def test_create_list_metadata_drop(kvs, make_table):
    name = make_table(strategy=SweepStrategy.THOROUGH)
    assert kvs.table_exists(name)
    assert name in kvs.list_tables()
    meta = kvs.get_metadata(name)
    assert meta.strategy is SweepStrategy.THOROUGH
    assert meta.write_mode is LOGICAL
    kvs.put(name, {cell("r", "c"): b"v"}, 10)
    used = kvs.space_used_bytes(name)  # best effort: dbstat on SQLite, None on Cassandra (nodetool knows)
    assert used is None or (isinstance(used, int) and used >= 0)
    assert kvs.describe().startswith(kvs.backend)

    kvs.drop_table(name)
    assert not kvs.table_exists(name)
    assert name not in kvs.list_tables()
    with pytest.raises(TableNotFoundError, match=name):
        kvs.get_metadata(name)
    with pytest.raises(TableNotFoundError):
        kvs.get(name, {cell("r", "c"): 11})
    kvs.drop_table(name)  # dropping a missing table is a no-op


def test_create_is_idempotent_updates_strategy_and_keeps_write_mode(kvs, make_table):
    name = make_table(strategy=SweepStrategy.CONSERVATIVE)
    kvs.put(name, {cell("r", "c"): b"v"}, 10)
    kvs.create_table(name, TableMetadata(strategy=SweepStrategy.NOTHING))
    assert kvs.get_metadata(name).strategy is SweepStrategy.NOTHING
    assert kvs.get(name, {cell("r", "c"): 11}) == {cell("r", "c"): Value(10, b"v")}  # data survives
    with pytest.raises(InvalidInputError, match="write mode"):
        kvs.create_table(name, TableMetadata(write_mode=LWT))
    assert kvs.get_metadata(name).write_mode is LOGICAL
    assert kvs.list_tables().count(name) == 1


def test_drop_and_recreate_with_the_same_name(kvs, make_table):
    name = make_table()
    kvs.put(name, {cell("r", "c"): b"old"}, 10)
    assert kvs.get_latest(name, [cell("r", "c")])  # statements for the table are prepared and cached
    kvs.drop_table(name)
    kvs.create_table(name, TableMetadata(write_mode=LWT))  # a new table: the write mode may differ
    assert kvs.get_metadata(name).write_mode is LWT
    assert kvs.get_latest(name, [cell("r", "c")]) == {}
    kvs.put_unless_exists(name, {cell("r", "c"): b"new"})
    assert kvs.get_lwt(name, [cell("r", "c")]) == {cell("r", "c"): b"new"}
    with pytest.raises(InvalidInputError, match="write mode"):
        kvs.put(name, {cell("r", "c"): b"x"}, 11)


def test_set_sweep_strategy(kvs, make_table):
    name = make_table(strategy=SweepStrategy.CONSERVATIVE)
    kvs.set_sweep_strategy(name, SweepStrategy.THOROUGH)
    assert kvs.get_metadata(name).strategy is SweepStrategy.THOROUGH
    kvs.set_sweep_strategy(name, "conservative")
    meta = kvs.get_metadata(name)
    assert meta.strategy is SweepStrategy.CONSERVATIVE and meta.write_mode is LOGICAL
    with pytest.raises(InvalidInputError, match="sweep strategy"):
        kvs.set_sweep_strategy(name, "sometimes")
    with pytest.raises(TableNotFoundError):
        kvs.set_sweep_strategy(f"missing{uuid.uuid4().hex[:8]}", SweepStrategy.THOROUGH)


def test_internal_table_names(kvs, make_table):
    name = make_table(mode=LWT, prefix="_internal")
    assert name.startswith("_")
    assert kvs.table_exists(name) and name in kvs.list_tables()
    kvs.put_unless_exists(name, {cell("r", "c"): b"1"})
    assert kvs.get_lwt(name, [cell("r", "c")]) == {cell("r", "c"): b"1"}


def test_truncate(kvs, make_table):
    name = make_table()
    kvs.put(name, {cell(f"r{i}", "c"): b"v" for i in range(10)}, 5)
    kvs.truncate_table(name)
    assert list(kvs.scan(name)) == []
    assert kvs.table_exists(name)
    kvs.put(name, {cell("r1", "c"): b"after"}, 6)  # a low Atlas timestamp is visible after truncate
    assert kvs.get_latest(name, [cell("r1", "c")]) == {cell("r1", "c"): Value(6, b"after")}


UNKNOWN_TABLE_OPERATIONS = {
    "get_metadata": lambda k, t: k.get_metadata(t),
    "truncate_table": lambda k, t: k.truncate_table(t),
    "set_sweep_strategy": lambda k, t: k.set_sweep_strategy(t, SweepStrategy.NOTHING),
    "put": lambda k, t: k.put(t, {cell("r", "c"): b"v"}, 1),
    "multi_put": lambda k, t: k.multi_put({t: {cell("r", "c"): b"v"}}, 1),
    "delete": lambda k, t: k.delete(t, [(cell("r", "c"), 1)]),
    "delete_all_timestamps": lambda k, t: k.delete_all_timestamps(t, {cell("r", "c"): (0, 1)}),
    "add_gc_sentinels": lambda k, t: k.add_gc_sentinels(t, [cell("r", "c")]),
    "add_gc_sentinels_and_delete_all_timestamps": lambda k, t: k.add_gc_sentinels_and_delete_all_timestamps(
        t, [cell("r", "c")], {cell("r", "c"): (0, 1)}
    ),
    "delete_rows": lambda k, t: k.delete_rows(t, [b"r"]),
    "get": lambda k, t: k.get(t, {cell("r", "c"): 5}),
    "get_all_timestamps": lambda k, t: k.get_all_timestamps(t, [cell("r", "c")]),
    "get_row_columns": lambda k, t: k.get_row_columns(t, b"r"),
    "get_rows_columns": lambda k, t: k.get_rows_columns(t, [b"r"]),
    "full_range": lambda k, t: k.full_range(t),
    "split_ranges": lambda k, t: k.split_ranges(t, 4),
    "scan": lambda k, t: list(k.scan(t)),
    "put_unless_exists": lambda k, t: k.put_unless_exists(t, {cell("r", "c"): b"v"}),
    "check_and_set": lambda k, t: k.check_and_set(t, cell("r", "c"), None, b"v"),
    "get_lwt": lambda k, t: k.get_lwt(t, [cell("r", "c")]),
    "get_lwt_row": lambda k, t: k.get_lwt_row(t, b"r"),
    "put_wallclock": lambda k, t: k.put_wallclock(t, {cell("r", "c"): b"v"}),
    "delete_wallclock": lambda k, t: k.delete_wallclock(t, [cell("r", "c")]),
    "get_wallclock_row": lambda k, t: k.get_wallclock_row(t, b"r"),
}


def test_unknown_table_raises_table_not_found(kvs):
    missing = f"missing{uuid.uuid4().hex[:12]}"
    for op in UNKNOWN_TABLE_OPERATIONS.values():
        with pytest.raises(TableNotFoundError, match=missing):
            op(kvs, missing)
    assert kvs.table_exists(missing) is False


HOSTILE_NAMES = [
    "x; DROP KEYSPACE atlas",
    'x"; DROP TABLE y; --',
    "x' OR '1'='1",
    "Upper",
    "1abc",
    "",
    " ",
    "a-b",
    "a.b",
    "__double",
    "a" * 48,
    "_",
    "é",
    None,
    42,
    b"bytes",
    "atlas_metadata",  # reserved: Cassandra stores _metadata / _x as atlas_metadata / atlas_x
    "atlas_transactions2",
    "_metadata",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=repr)
def test_invalid_table_names_are_refused(kvs, name):
    with pytest.raises(InvalidInputError):
        kvs.create_table(name)
    with pytest.raises(InvalidInputError):
        kvs.table_exists(name)
    with pytest.raises(InvalidInputError):
        kvs.put(name, {cell("r", "c"): b"v"}, 1)
    with pytest.raises(InvalidInputError):
        kvs.drop_table(name)
    with pytest.raises(InvalidInputError):
        list(kvs.scan(name))


def test_longest_valid_names(kvs):
    unique = uuid.uuid4().hex[:16]
    for name in ("a" * 31 + unique, "_" + "b" * 31 + unique):
        assert len(name) in (47, 48)
        kvs.create_table(name)
        kvs.put(name, {cell("r", "c"): b"v"}, 3)
        assert kvs.get_latest(name, [cell("r", "c")]) == {cell("r", "c"): Value(3, b"v")}


def test_invalid_input_is_refused(kvs, make_table):
    name = make_table()
    lwt = make_table(mode=LWT)
    big_name = b"x" * (MAX_CELL_NAME_BYTES + 1)
    bad_calls = [
        lambda: kvs.put(name, {cell("", "c"): b"v"}, 1),
        lambda: kvs.put(name, {cell("r", ""): b"v"}, 1),
        lambda: kvs.put(name, {("r", "c"): b"v"}, 1),  # str, not bytes
        lambda: kvs.put(name, {(b"r",): b"v"}, 1),
        lambda: kvs.put(name, {Cell(big_name, b"c"): b"v"}, 1),
        lambda: kvs.put(name, {Cell(b"r", big_name): b"v"}, 1),
        lambda: kvs.put(name, {cell("r", "c"): "text"}, 1),
        lambda: kvs.put(name, {cell("r", "c"): None}, 1),
        lambda: kvs.put(name, {cell("r", "c"): b"v"}, -1),
        lambda: kvs.put(name, {cell("r", "c"): b"v"}, MAX_TIMESTAMP),
        lambda: kvs.put(name, {cell("r", "c"): b"v"}, True),
        lambda: kvs.put(name, {cell("r", "c"): b"v"}, 1.5),
        lambda: kvs.put(name, [cell("r", "c")], 1),
        lambda: kvs.get(name, {cell("r", "c"): "5"}),
        lambda: kvs.get(name, [cell("r", "c")]),
        lambda: kvs.delete(name, [(cell("r", "c"), "1")]),
        lambda: kvs.delete(name, [cell("r", "c")]),
        lambda: kvs.delete_all_timestamps(name, {cell("r", "c"): (5, 1)}),
        lambda: kvs.delete_all_timestamps(name, {cell("r", "c"): 5}),
        lambda: kvs.delete_rows(name, b"r"),
        lambda: kvs.delete_rows(name, [b""]),
        lambda: kvs.get_row_columns(name, b"r", limit=-1),
        lambda: kvs.get_row_columns(name, "r"),
        lambda: kvs.get_row_columns(name, b"r", start_col="a"),
        lambda: list(kvs.scan(name, page_size=0)),
        lambda: list(kvs.scan(name, scan_range=ScanRange("nonsense", None, None))),
        lambda: list(kvs.scan(name, start_after_row="r")),
        lambda: kvs.split_ranges(name, 0),
        lambda: kvs.create_table(f"t{uuid.uuid4().hex[:8]}", "CONSERVATIVE"),
        lambda: kvs.check_and_set(lwt, cell("r", "c"), "x", b"y"),
        lambda: kvs.put_unless_exists(lwt, {cell("r", "c"): 5}),
    ]
    for i, call in enumerate(bad_calls):
        with pytest.raises(InvalidInputError):
            call()
            pytest.fail(f"bad call #{i} was accepted")
    assert list(kvs.scan(name)) == []
    assert kvs.get_lwt_row(lwt, b"r") == {}


def test_oversize_value_is_refused_and_largest_value_round_trips(kvs, make_table):
    name = make_table()
    with pytest.raises(InvalidInputError, match="exceeds"):
        kvs.put(name, {cell("r", "c"): b"\0" * (MAX_VALUE_BYTES + 1)}, 1)
    lwt = make_table(mode=LWT)
    with pytest.raises(InvalidInputError, match="exceeds"):
        kvs.put_unless_exists(lwt, {cell("r", "c"): b"\0" * (MAX_VALUE_BYTES + 1)})
    big = os.urandom(1024) * 1024  # 1 MiB: well inside the limit on both backends
    kvs.put(name, {cell("r", "big"): big}, 2)
    assert kvs.get(name, {cell("r", "big"): 3})[cell("r", "big")].contents == big


# ================================================================================================
# LOGICAL writes and versioned reads
# ================================================================================================
def test_put_and_get_latest_below_timestamp(kvs, make_table):
    name = make_table()
    a, b = cell("row", "a"), cell("row", "b")
    kvs.put(name, {a: b"a10", b: b"b10"}, 10)
    kvs.put(name, {a: b"a20"}, 20)
    kvs.put(name, {a: b"a30"}, 30)
    assert kvs.get(name, {a: 10, b: 10}) == {}  # strictly below
    assert kvs.get(name, {a: 11, b: 11}) == {a: Value(10, b"a10"), b: Value(10, b"b10")}
    assert kvs.get(name, {a: 30}) == {a: Value(20, b"a20")}
    assert kvs.get(name, {a: 31, b: 1000}) == {a: Value(30, b"a30"), b: Value(10, b"b10")}
    assert kvs.get_latest(name, [a, b]) == {a: Value(30, b"a30"), b: Value(10, b"b10")}
    assert kvs.get(name, {}) == {}
    # an empty value is a value
    kvs.put(name, {b: b""}, 40)
    assert kvs.get_latest(name, [b]) == {b: Value(40, b"")}


def test_get_many_cells_concurrently_and_absent_cells_are_omitted(kvs, make_table):
    name = make_table()
    values = {cell(f"r{i % 37}", f"c{i}"): f"v{i}".encode() for i in range(500)}
    kvs.put(name, values, 100)
    query = {c: 101 for c in values}
    query.update({cell(f"absent{i}", "c"): 101 for i in range(20)})
    got = kvs.get(name, query)
    assert got == {c: Value(100, v) for c, v in values.items()}


def test_get_returns_sentinels_like_any_version(kvs, make_table):
    name = make_table()
    c = cell("r", "c")
    kvs.add_gc_sentinels(name, [c])
    assert kvs.get(name, {c: 5}) == {c: Value(-1, b"")}
    assert kvs.get(name, {c: -1}) == {}
    kvs.put(name, {c: b"v"}, 7)
    assert kvs.get(name, {c: 7}) == {c: Value(-1, b"")}
    assert kvs.get(name, {c: 8}) == {c: Value(7, b"v")}


def test_multi_put(kvs, make_table):
    t1, t2 = make_table(), make_table()
    kvs.multi_put({t1: {cell("r", "a"): b"1"}, t2: {cell("r", "b"): b"2", cell("s", "b"): b"3"}}, 50)
    assert kvs.get_latest(t1, [cell("r", "a")]) == {cell("r", "a"): Value(50, b"1")}
    assert kvs.get_latest(t2, [cell("r", "b"), cell("s", "b")]) == {
        cell("r", "b"): Value(50, b"2"),
        cell("s", "b"): Value(50, b"3"),
    }
    kvs.multi_put({}, 51)
    kvs.multi_put({t1: {}}, 51)


def test_get_all_timestamps(kvs, make_table):
    name = make_table()
    a, b = cell("r", "a"), cell("r", "b")
    for ts in (30, 10, 20):
        kvs.put(name, {a: b"x"}, ts)
    kvs.put(name, {b: b"y"}, 25)
    kvs.add_gc_sentinels(name, [a])
    assert kvs.get_all_timestamps(name, [a, b, cell("r", "none")]) == {a: [-1, 10, 20, 30], b: [25]}
    assert kvs.get_all_timestamps(name, [a, b], 20) == {a: [-1, 10]}
    assert kvs.get_all_timestamps(name, [a, b], -1) == {}


# Many cells of one column are read many rows per request on Cassandra (reads.IN_READ_PARTITIONS); these
# cases pin that the answers are those of one read per cell.
MANY_ROWS = 257  # more than two multi-row reads' worth, with a remainder


def test_get_all_timestamps_many_rows_of_one_column(kvs, make_table):
    name = make_table()
    cells = [cell(b"row%04d" % i, "c") for i in range(MANY_ROWS)]
    kvs.put(name, {c: b"x" for c in cells}, 10)
    kvs.put(name, {c: b"y" for c in cells[::2]}, 20)
    kvs.add_gc_sentinels(name, cells[::5])
    expected = {c: ([-1] if i % 5 == 0 else []) + [10] + ([20] if i % 2 == 0 else []) for i, c in enumerate(cells)}
    got = kvs.get_all_timestamps(name, cells)
    assert got == expected and list(got) == cells  # in the order asked
    assert kvs.get_all_timestamps(name, cells, 20) == {c: v[:-1] if v[-1] == 20 else v for c, v in expected.items()}
    assert kvs.get_all_timestamps(name, cells, 10) == {c: [-1] for c in cells[::5]}
    assert kvs.get_all_timestamps(name, list(reversed(cells)) + cells[:3]) == expected  # duplicates read once


def test_get_all_timestamps_mixed_columns_and_absent_cells(kvs, make_table):
    name = make_table()
    written = {cell(b"r%03d" % i, b"c%d" % (i % 3)): b"v" for i in range(60)}
    written[cell("r000", "lonely")] = b"v"  # a column asked for one row alone
    written[cell("r001", "c0")] = b"v"  # a row with several of the asked columns
    kvs.put(name, written, 10)
    absent = [cell(b"r%03d" % i, b"c%d" % ((i + 1) % 3)) for i in range(60)]  # the rows exist, the cells not
    absent += [cell(b"nobody%03d" % i, "c0") for i in range(40)] + [cell("nobody", "alone")]
    asked = [c for pair in zip(written, absent, strict=False) for c in pair] + absent[len(written):]
    assert kvs.get_all_timestamps(name, asked) == {c: [10] for c in written}
    assert kvs.get_all_timestamps(name, absent) == {}


def test_get_all_timestamps_pages_through_many_versions_of_many_rows(kvs, make_table):
    name = make_table()
    versions = page_size_of(kvs) + 11  # every cell alone needs more than a page; a multi-row read many pages
    cells = [cell(b"deep%02d" % i, "c") for i in range(12)]
    for ts in range(1, versions + 1):
        kvs.put(name, {c: b"v" for c in cells}, ts * 10)
    shallow = cell("shallow", "c")
    kvs.put(name, {shallow: b"v"}, 5)
    got = kvs.get_all_timestamps(name, cells + [shallow, cell("none", "c")])
    assert got == {**{c: [ts * 10 for ts in range(1, versions + 1)] for c in cells}, shallow: [5]}
    bound = (versions // 2) * 10
    assert kvs.get_all_timestamps(name, cells, bound) == {c: [ts * 10 for ts in range(1, versions // 2)] for c in cells}


def test_get_row_columns_ranges_limit_and_timestamp(kvs, make_table):
    name = make_table()
    row = b"row"
    for i in range(10):
        kvs.put(name, {Cell(row, b"c%d" % i): b"old%d" % i}, 10)
    for i in range(0, 10, 2):
        kvs.put(name, {Cell(row, b"c%d" % i): b"new%d" % i}, 20)
    kvs.put(name, {Cell(b"other", b"c0"): b"x"}, 10)

    full = kvs.get_row_columns(name, row)
    assert [c for c, _ in full] == [b"c%d" % i for i in range(10)]
    assert dict(full)[b"c0"] == Value(20, b"new0") and dict(full)[b"c1"] == Value(10, b"old1")
    older = dict(kvs.get_row_columns(name, row, timestamp=20))
    assert all(v.timestamp == 10 for v in older.values()) and len(older) == 10
    assert kvs.get_row_columns(name, row, timestamp=10) == []
    assert [c for c, _ in kvs.get_row_columns(name, row, start_col=b"c3", end_col=b"c6")] == [b"c3", b"c4", b"c5"]
    assert [c for c, _ in kvs.get_row_columns(name, row, start_col=b"c7")] == [b"c7", b"c8", b"c9"]
    assert [c for c, _ in kvs.get_row_columns(name, row, end_col=b"c2")] == [b"c0", b"c1"]
    assert [c for c, _ in kvs.get_row_columns(name, row, limit=3)] == [b"c0", b"c1", b"c2"]
    assert kvs.get_row_columns(name, row, start_col=b"c8", limit=5) == [
        (b"c8", Value(20, b"new8")),
        (b"c9", Value(10, b"old9")),
    ]
    assert kvs.get_row_columns(name, row, limit=0) == []
    assert kvs.get_row_columns(name, row, start_col=b"c5", end_col=b"c5") == []
    assert kvs.get_row_columns(name, b"missing") == []


def test_get_row_columns_pages_through_a_wide_row(kvs, make_table):
    name = make_table()
    row = b"wide"
    n = page_size_of(kvs) * 3 + 7
    cols = [b"col%05d" % i for i in range(n)]
    kvs.put(name, {Cell(row, c): b"a" for c in cols}, 10)
    kvs.put(name, {Cell(row, c): b"b" for c in cols[::3]}, 20)  # several versions per column
    got = kvs.get_row_columns(name, row)
    assert [c for c, _ in got] == cols
    assert all(v == (Value(20, b"b") if i % 3 == 0 else Value(10, b"a")) for i, (_, v) in enumerate(got))
    limit = page_size_of(kvs) + 5  # a limit that ends on the second page
    assert [c for c, _ in kvs.get_row_columns(name, row, limit=limit)] == cols[:limit]
    mid = kvs.get_row_columns(name, row, start_col=cols[60], end_col=cols[140], timestamp=20)
    assert [c for c, _ in mid] == cols[60:140] and {v for _, v in mid} == {Value(10, b"a")}


def test_get_rows_columns(kvs, make_table):
    name = make_table()
    n = page_size_of(kvs) + 10
    kvs.put(name, {cell("wide", b"c%04d" % i): b"w" for i in range(n)}, 10)
    kvs.put(name, {cell("r1", "a"): b"1", cell("r1", "b"): b"2", cell("r2", "b"): b"3"}, 10)
    kvs.put(name, {cell("r1", "a"): b"1new"}, 12)
    got = kvs.get_rows_columns(name, [b"r1", b"r2", b"empty", b"wide"])
    assert set(got) == {b"r1", b"r2", b"wide"}
    assert got[b"r1"] == [(b"a", Value(12, b"1new")), (b"b", Value(10, b"2"))]
    assert got[b"r2"] == [(b"b", Value(10, b"3"))]
    assert len(got[b"wide"]) == n
    ranged = kvs.get_rows_columns(name, [b"r1", b"r2"], start_col=b"b", end_col=b"c", timestamp=11)
    assert ranged == {b"r1": [(b"b", Value(10, b"2"))], b"r2": [(b"b", Value(10, b"3"))]}
    assert kvs.get_rows_columns(name, [b"r1"], timestamp=10) == {}
    assert kvs.get_rows_columns(name, []) == {}


# ================================================================================================
# scans
# ================================================================================================
def _fill_for_scan(kvs, name, rows=60):
    expected = []
    for r in range(rows):
        row = b"row%03d" % r
        for c in range(3):
            col = b"col%d" % c
            for ts in ((5, 15) if (r + c) % 4 == 0 else (5,)):
                expected.append((Cell(row, col), ts, b"%s/%s/%d" % (row, col, ts)))
    by_ts: dict[int, dict] = {}
    for c, ts, v in expected:
        by_ts.setdefault(ts, {})[c] = v
    for ts, values in by_ts.items():
        kvs.put(name, values, ts)
    return expected


def _check_scan_order(items):
    """Rows contiguous (backend order), then column ascending, then timestamp ascending."""
    seen_rows = []
    for (c, ts, _), (c2, ts2, _) in pairwise(items):
        if c.row == c2.row:
            assert (c.col, ts) < (c2.col, ts2)
        else:
            assert c2.row not in seen_rows
            seen_rows.append(c.row)


def test_scan_full_range_in_order_with_timestamp_filter_and_paging(kvs, make_table):
    name = make_table()
    expected = _fill_for_scan(kvs, name)
    items = list(kvs.scan(name, page_size=7))
    assert sorted(items) == sorted(expected)
    assert len(items) == len(expected)
    _check_scan_order(items)
    assert list(kvs.scan(name, kvs.full_range(name), page_size=1000)) == items
    below = list(kvs.scan(name, page_size=11, timestamp=15))
    assert sorted(below) == sorted(e for e in expected if e[1] < 15)
    assert list(kvs.scan(name, timestamp=5)) == []
    if kvs.backend == "sqlite":
        assert [c.row for c, _, _ in items] == sorted(c.row for c, _, _ in items)  # key order


def test_split_ranges_are_disjoint_and_cover_the_table(kvs, make_table):
    name = make_table()
    expected = _fill_for_scan(kvs, name, rows=40)
    for parts in (1, 3, 8):
        _check_split(kvs, name, parts, expected)


def _check_split(kvs, name, parts, expected):
    full = list(kvs.scan(name))
    ranges = kvs.split_ranges(name, parts)
    assert 1 <= len(ranges) <= parts
    per_range = [list(kvs.scan(name, r, page_size=5)) for r in ranges]
    rows_per_range = [{c.row for c, _, _ in items} for items in per_range]
    for i in range(len(ranges)):
        for j in range(i + 1, len(ranges)):
            assert not rows_per_range[i] & rows_per_range[j], "ranges overlap"
    union = [item for items in per_range for item in items]
    assert sorted(union) == sorted(full) == sorted(expected)
    assert len(union) == len(full)
    if parts > 1:
        assert sum(1 for items in per_range if items) > 1  # the split actually splits


def test_split_ranges_of_empty_table(kvs, make_table):
    name = make_table()
    for r in kvs.split_ranges(name, 4):
        assert list(kvs.scan(name, r)) == []


def test_scan_resumes_after_row(kvs, make_table):
    name = make_table()
    _fill_for_scan(kvs, name, rows=30)
    for scan_range in [kvs.full_range(name), *kvs.split_ranges(name, 3)]:
        items = list(kvs.scan(name, scan_range))
        rows = list(dict.fromkeys(c.row for c, _, _ in items))
        for k in (0, len(rows) // 2, len(rows) - 1) if rows else ():
            resumed = list(kvs.scan(name, scan_range, start_after_row=rows[k], page_size=4))
            cut = next(i for i, (c, _, _) in enumerate(items) if c.row == rows[k])
            expected_rest = [it for it in items[cut:] if it[0].row != rows[k]]
            assert resumed == expected_rest


# ================================================================================================
# LWT tables
# ================================================================================================
def test_put_unless_exists(kvs, make_table):
    name = make_table(mode=LWT)
    a, b, c = cell("r1", "a"), cell("r2", "b"), cell("r3", "c")
    kvs.put_unless_exists(name, {a: b"A", b: b""})
    assert kvs.get_lwt(name, [a, b, c]) == {a: b"A", b: b""}
    with pytest.raises(KeyAlreadyExistsError) as info:
        kvs.put_unless_exists(name, {a: b"A2", c: b"C"})
    assert info.value.existing == {a: b"A"}
    assert "r1" in str(info.value) and name in str(info.value)
    # cells of other rows may have been written (per-row atomicity): r3 was
    assert kvs.get_lwt(name, [a, c]) == {a: b"A", c: b"C"}
    kvs.put_unless_exists(name, {})


def test_put_unless_exists_is_all_or_nothing_per_row(kvs, make_table):
    name = make_table(mode=LWT)
    x, y, z = cell("row", "x"), cell("row", "y"), cell("row", "z")
    kvs.put_unless_exists(name, {x: b"1", y: b"2"})  # one conditional batch
    assert kvs.get_lwt_row(name, b"row") == {b"x": b"1", b"y": b"2"}
    with pytest.raises(KeyAlreadyExistsError) as info:
        kvs.put_unless_exists(name, {y: b"new", z: b"3"})
    assert info.value.existing == {y: b"2"}
    assert kvs.get_lwt_row(name, b"row") == {b"x": b"1", b"y": b"2"}  # z was not written


def test_put_unless_exists_many_rows_concurrently(kvs, make_table):
    name = make_table(mode=LWT)
    values = {cell(f"r{i}", "c"): b"%d" % i for i in range(200)}
    kvs.put_unless_exists(name, values)
    assert kvs.get_lwt(name, values) == values
    with pytest.raises(KeyAlreadyExistsError) as info:
        kvs.put_unless_exists(name, {**{cell(f"new{i}", "c"): b"n" for i in range(50)}, cell("r7", "c"): b"x"})
    assert info.value.existing == {cell("r7", "c"): b"7"}
    assert len(kvs.get_lwt(name, [cell(f"new{i}", "c") for i in range(50)])) == 50


def test_check_and_set(kvs, make_table):
    name = make_table(mode=LWT)
    c = cell("r", "c")
    assert kvs.check_and_set(name, c, None, None) is True  # absent as expected, nothing to do
    assert kvs.check_and_set(name, c, b"x", b"y") is False  # absent: no match
    assert kvs.get_lwt(name, [c]) == {}
    assert kvs.check_and_set(name, c, None, b"") is True  # insert if absent (empty value)
    assert kvs.check_and_set(name, c, None, b"other") is False  # present now
    assert kvs.check_and_set(name, c, None, None) is False
    assert kvs.get_lwt(name, [c], serial=True) == {c: b""}
    assert kvs.check_and_set(name, c, b"", b"one") is True  # b"" and None differ
    assert kvs.check_and_set(name, c, b"wrong", b"two") is False
    assert kvs.get_lwt(name, [c]) == {c: b"one"}
    assert kvs.check_and_set(name, c, b"one", b"two") is True
    assert kvs.check_and_set(name, c, b"one", None) is False  # delete needs a match
    assert kvs.check_and_set(name, c, b"two", None) is True  # delete
    assert kvs.get_lwt(name, [c], serial=True) == {}
    assert kvs.check_and_set(name, c, None, b"back") is True  # insert again after delete
    assert kvs.get_lwt(name, [c]) == {c: b"back"}


def test_check_and_set_race_has_one_winner(kvs, make_table):
    name = make_table(mode=LWT)
    c = cell("counter", "c")
    kvs.put_unless_exists(name, {c: b"0"})
    wins = []

    def worker(tag):
        if kvs.check_and_set(name, c, b"0", tag):
            wins.append(tag)

    threads = [threading.Thread(target=worker, args=(b"t%d" % i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert kvs.get_lwt(name, [c], serial=True) == {c: wins[0]}


def test_get_lwt_and_get_lwt_row(kvs, make_table):
    name = make_table(mode=LWT)
    kvs.put_unless_exists(name, {cell("r", "b"): b"2", cell("r", "a"): b"1", cell("s", "a"): b"3"})
    for serial in (False, True):
        assert kvs.get_lwt(name, [cell("r", "a"), cell("r", "zz")], serial=serial) == {cell("r", "a"): b"1"}
        assert kvs.get_lwt_row(name, b"r", serial=serial) == {b"a": b"1", b"b": b"2"}
        assert kvs.get_lwt_row(name, b"none", serial=serial) == {}
    assert list(kvs.get_lwt_row(name, b"r")) == [b"a", b"b"]
    assert kvs.get_wallclock_row(name, b"r") == [(b"a", b"1"), (b"b", b"2")]
    # LWT cells are versions at LWT_TIMESTAMP (-1) for the generic reads too
    assert kvs.get_latest(name, [cell("s", "a")]) == {cell("s", "a"): Value(-1, b"3")}


# ================================================================================================
# deletes and sentinels (LOGICAL)
# ================================================================================================
def test_delete_exact_versions(kvs, make_table):
    name = make_table()
    a, b = cell("r", "a"), cell("r", "b")
    for ts in (10, 20, 30):
        kvs.put(name, {a: b"a%d" % ts, b: b"b%d" % ts}, ts)
    kvs.delete(name, [(a, 20), (b, 30), (b, 10), (cell("r", "absent"), 5)])
    assert kvs.get_all_timestamps(name, [a, b]) == {a: [10, 30], b: [20]}
    assert kvs.get(name, {a: 30, b: 1000}) == {a: Value(10, b"a10"), b: Value(20, b"b20")}
    kvs.delete(name, [])
    kvs.delete(name, {a: 10})  # a mapping cell -> ts is accepted too
    assert kvs.get_all_timestamps(name, [a]) == {a: [30]}


def test_delete_all_timestamps_removes_exactly_the_inclusive_range(kvs, make_table):
    name = make_table()
    a, b, c = cell("r", "a"), cell("r", "b"), cell("s", "c")
    for ts in (10, 20, 30, 40):
        kvs.put(name, {a: b"x", b: b"y", c: b"z"}, ts)
    kvs.add_gc_sentinels(name, [a, b, c])
    kvs.delete_all_timestamps(name, {a: (20, 30), b: (-1, 10), c: (0, 39)})
    assert kvs.get_all_timestamps(name, [a, b, c]) == {a: [-1, 10, 40], b: [20, 30, 40], c: [-1, 40]}
    kvs.delete_all_timestamps(name, {a: (-1, MAX_TIMESTAMP)})
    assert kvs.get_all_timestamps(name, [a]) == {}
    kvs.delete_all_timestamps(name, {})


def test_many_range_deletes_in_one_call(kvs, make_table):
    name = make_table()
    cells = [cell(f"r{i % 50}", f"c{i}") for i in range(300)]
    for ts in (1, 2, 3):
        kvs.put(name, {c: b"v" for c in cells}, ts)
    kvs.delete_all_timestamps(name, {c: (1, 2) for c in cells})
    assert kvs.get_all_timestamps(name, cells) == {c: [3] for c in cells}


def test_add_gc_sentinels(kvs, make_table):
    name = make_table()
    a, b = cell("r", "a"), cell("r", "b")
    kvs.put(name, {a: b"v"}, 10)
    kvs.add_gc_sentinels(name, [a, b, a])
    assert kvs.get_all_timestamps(name, [a, b]) == {a: [-1, 10], b: [-1]}
    assert kvs.get(name, {a: 10, b: 10}) == {a: Value(-1, b""), b: Value(-1, b"")}
    kvs.add_gc_sentinels(name, [a])  # idempotent
    assert kvs.get_all_timestamps(name, [a]) == {a: [-1, 10]}
    kvs.add_gc_sentinels(name, [])


def test_sentinels_and_ranged_tombstones_in_one_call(kvs, make_table):
    """The CONSERVATIVE sweep write: every cell gets its sentinel, the cells with a range lose [lo, hi]."""
    name = make_table()
    cells = [cell(f"r{i % 7}", f"c{i}") for i in range(60)]
    for ts in (10, 20, 30):
        kvs.put(name, {c: b"v%d" % ts for c in cells}, ts)
    ranged = {c: (0, 29) for c in cells[:50]}
    kvs.add_gc_sentinels_and_delete_all_timestamps(name, cells, ranged)
    got = kvs.get_all_timestamps(name, cells)
    assert {c: got[c] for c in cells[:50]} == {c: [-1, 30] for c in cells[:50]}
    assert {c: got[c] for c in cells[50:]} == {c: [-1, 10, 20, 30] for c in cells[50:]}  # sentinel only
    assert kvs.get(name, {cells[0]: 30}) == {cells[0]: Value(-1, b"")}  # an old reader meets the sentinel
    kvs.add_gc_sentinels_and_delete_all_timestamps(name, cells, ranged)  # idempotent
    assert kvs.get_all_timestamps(name, cells) == got
    kvs.add_gc_sentinels_and_delete_all_timestamps(name, [], {})


def test_sentinels_and_ranged_tombstones_refuse_a_range_without_its_sentinel(kvs, make_table):
    name = make_table()
    a, b = cell("r", "a"), cell("r", "b")
    kvs.put(name, {a: b"x", b: b"y"}, 10)
    for cells, ranges in (([a], {a: (0, 9), b: (0, 9)}), ([], {b: (0, 9)})):
        with pytest.raises(InvalidInputError, match="sentinel"):
            kvs.add_gc_sentinels_and_delete_all_timestamps(name, cells, ranges)
    with pytest.raises(InvalidInputError, match="range"):
        kvs.add_gc_sentinels_and_delete_all_timestamps(name, [a], {a: (9, 0)})
    with pytest.raises(InvalidInputError, match="ranges"):
        kvs.add_gc_sentinels_and_delete_all_timestamps(name, [a], [a])
    assert kvs.get_all_timestamps(name, [a, b]) == {a: [10], b: [10]}, "nothing may be half-written"


@pytest.mark.cassandra
def test_cassandra_sentinel_and_tombstone_write_times(cassandra_kvs, cassandra_session, kvs_keyspace, fresh):
    """Spec 002 for the combined call: two fresh timestamps, the sentinels' first; the cell's own write
    keeps its Atlas timestamp, and the range tombstone (not readable) does not shadow the sentinel."""
    name = f"wt{uuid.uuid4().hex[:12]}"
    cassandra_kvs.create_table(name)
    c = cell("r", "c")
    cassandra_kvs.put(name, {c: b"old"}, 1000)
    cassandra_kvs.put(name, {c: b"new"}, 2000)
    before = fresh()  # the stores' supplier: the call's fresh timestamps come after this one
    cassandra_kvs.add_gc_sentinels_and_delete_all_timestamps(name, [c], {c: (0, 1999)})
    rows = {
        r.column2: r.wt
        for r in cassandra_session.execute(
            f'SELECT column2, writetime(value) AS wt FROM "{kvs_keyspace}"."{name}" WHERE key = %s', (b"r",)
        )
    }
    assert set(rows) == {-1, 2000}
    assert rows[2000] == 2000 and rows[-1] > before


def test_delete_rows(kvs, make_table):
    name = make_table()
    kvs.put(name, {cell(r, c): b"v" for r in ("r1", "r2", "r3") for c in ("a", "b")}, 10)
    kvs.add_gc_sentinels(name, [cell("r1", "a")])
    kvs.delete_rows(name, [b"r1", b"r3", b"absent"])
    assert {c.row for c, _, _ in kvs.scan(name)} == {b"r2"}
    assert kvs.get_row_columns(name, b"r1") == []
    kvs.delete_rows(name, [])
    # (On Cassandra the partition tombstone carries a fresh timestamp, so re-writing r1 needs an Atlas
    # timestamp above it - as real transactions have. Not asserted here: the embedded store has no shadow.)


def test_spec_002_sentinel_rewritten_after_thorough_range_delete_is_visible(kvs, make_table):
    """CONSERVATIVE -> THOROUGH -> CONSERVATIVE (spec 002, invariant 3).

    Cassandra: the cell is written at write time 100, the first sentinel at fresh F1, the range tombstone
    over [-1, 100] at fresh F2 > F1, the second sentinel at fresh F3 > F2 - so it is not shadowed. With
    the legacy scheme (sentinel at write time -1) the re-written sentinel would stay invisible.
    """
    name = make_table(strategy=SweepStrategy.CONSERVATIVE)
    c = cell("row", "col")
    kvs.put(name, {c: b"value"}, 100)
    kvs.add_gc_sentinels(name, [c])
    assert kvs.get_all_timestamps(name, [c]) == {c: [-1, 100]}

    kvs.set_sweep_strategy(name, SweepStrategy.THOROUGH)
    kvs.delete_all_timestamps(name, {c: (-1, 100)})
    assert kvs.get_all_timestamps(name, [c]) == {}

    kvs.set_sweep_strategy(name, SweepStrategy.CONSERVATIVE)
    kvs.add_gc_sentinels(name, [c])
    assert kvs.get(name, {c: 200}) == {c: Value(-1, b"")}
    assert kvs.get_all_timestamps(name, [c]) == {c: [-1]}
    assert list(kvs.scan(name)) == [(c, -1, b"")]


# ================================================================================================
# WALLCLOCK tables
# ================================================================================================
def test_wallclock_put_get_delete(kvs, make_table):
    name = make_table(mode=WALLCLOCK)
    kvs.put_wallclock(name, {cell("r", "b"): b"2", cell("r", "a"): b"1", cell("r", "c"): b"3"})
    assert kvs.get_wallclock_row(name, b"r") == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    assert kvs.get_wallclock_row(name, b"r", start_col=b"b") == [(b"b", b"2"), (b"c", b"3")]
    assert kvs.get_wallclock_row(name, b"r", limit=2) == [(b"a", b"1"), (b"b", b"2")]
    assert kvs.get_wallclock_row(name, b"r", limit=0) == []
    kvs.put_wallclock(name, {cell("r", "a"): b"1b"})  # overwrite
    assert kvs.get_lwt(name, [cell("r", "a")]) == {cell("r", "a"): b"1b"}
    assert kvs.get_lwt_row(name, b"r") == {b"a": b"1b", b"b": b"2", b"c": b"3"}
    kvs.delete_wallclock(name, [cell("r", "b"), cell("r", "zz")])
    assert kvs.get_wallclock_row(name, b"r") == [(b"a", b"1b"), (b"c", b"3")]
    assert kvs.get_wallclock_row(name, b"nothing") == []


def test_wallclock_ttl_expires(kvs, make_table):
    """A TTL of 4 s: Cassandra counts a cell's expiry in whole seconds from the second it was written in, so a
    1 s TTL can expire within a millisecond of the write (and did, under a busy CI run): the read right after
    the writes sees the short-lived cell at any load."""
    name = make_table(mode=WALLCLOCK)
    kvs.put_wallclock(name, {cell("r", "short"): b"s"}, ttl_seconds=4)
    kvs.put_wallclock(name, {cell("r", "long"): b"l"}, ttl_seconds=3600)
    kvs.put_wallclock(name, {cell("r", "forever"): b"f"})
    assert len(kvs.get_wallclock_row(name, b"r")) == 3
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(kvs.get_wallclock_row(name, b"r")) == 3:
        time.sleep(0.1)
    assert kvs.get_wallclock_row(name, b"r") == [(b"forever", b"f"), (b"long", b"l")]
    assert kvs.get_lwt(name, [cell("r", "short")]) == {}
    with pytest.raises(InvalidInputError):
        kvs.put_wallclock(name, {cell("r", "x"): b"x"}, ttl_seconds=0)


# ================================================================================================
# write-mode refusals
# ================================================================================================
WRITES = {
    "put": (LOGICAL, lambda k, t: k.put(t, {cell("r", "c"): b"v"}, 1)),
    "multi_put": (LOGICAL, lambda k, t: k.multi_put({t: {cell("r", "c"): b"v"}}, 1)),
    "delete": (LOGICAL, lambda k, t: k.delete(t, [(cell("r", "c"), 1)])),
    "delete_all_timestamps": (LOGICAL, lambda k, t: k.delete_all_timestamps(t, {cell("r", "c"): (0, 1)})),
    "add_gc_sentinels": (LOGICAL, lambda k, t: k.add_gc_sentinels(t, [cell("r", "c")])),
    "add_gc_sentinels_and_delete_all_timestamps": (
        LOGICAL,
        lambda k, t: k.add_gc_sentinels_and_delete_all_timestamps(t, [cell("r", "c")], {cell("r", "c"): (0, 1)}),
    ),
    "delete_rows": (LOGICAL, lambda k, t: k.delete_rows(t, [b"r"])),
    "put_unless_exists": (LWT, lambda k, t: k.put_unless_exists(t, {cell("r", "c"): b"v"})),
    "check_and_set": (LWT, lambda k, t: k.check_and_set(t, cell("r", "c"), None, b"v")),
    "put_wallclock": (WALLCLOCK, lambda k, t: k.put_wallclock(t, {cell("r", "c"): b"v"})),
    "delete_wallclock": (WALLCLOCK, lambda k, t: k.delete_wallclock(t, [cell("r", "c")])),
}


def test_write_mode_refusals(kvs, make_table):
    tables = {mode: make_table(mode=mode) for mode in (LOGICAL, LWT, WALLCLOCK)}
    for op_name, (allowed_mode, op) in WRITES.items():
        for mode, table in tables.items():
            if mode is allowed_mode:
                op(kvs, table)
            else:
                with pytest.raises(InvalidInputError, match=op_name):
                    op(kvs, table)
    with pytest.raises(InvalidInputError, match="get_lwt"):
        kvs.get_lwt(tables[LOGICAL], [cell("r", "c")])
    with pytest.raises(InvalidInputError, match="get_lwt_row"):
        kvs.get_lwt_row(tables[LOGICAL], b"r")
    with pytest.raises(InvalidInputError, match="get_wallclock_row"):
        kvs.get_wallclock_row(tables[LOGICAL], b"r")


# ================================================================================================
# Cassandra table options (validated on both backends, applied on Cassandra)
# ================================================================================================
BAD_OPTIONS = [
    {"read_repair": "BLOCKING"},
    {"comment": "'; DROP KEYSPACE x; --"},
    {"bloom_filter_fp_chance": "0.01"},
    {"bloom_filter_fp_chance": 0},
    {"bloom_filter_fp_chance": float("nan")},
    {"min_index_interval": 0},
    {"min_index_interval": 1.5},
    {"min_index_interval": True},
    {"min_index_interval": 64, "max_index_interval": 32},
    {"gc_grace_seconds": -1},
    {"compression": {"class": "SnappyCompressor"}},
    {"compression": {"class": "LZ4Compressor", "chunk_length_in_kb": 3}},
    {"compression": {"class": "LZ4Compressor", "crc_check_chance": 0.5}},
    {"compression": "LZ4Compressor"},
    {"compaction": {"class": "com.evil.Strategy"}},
    {"compaction": {"class": "LeveledCompactionStrategy", "sstable_size_in_mb": 1}},
]


@pytest.mark.parametrize("options", BAD_OPTIONS, ids=repr)
def test_cassandra_options_outside_the_allow_list_are_refused(kvs, options):
    name = f"t{uuid.uuid4().hex[:12]}"
    with pytest.raises(InvalidInputError):
        kvs.create_table(name, TableMetadata(cassandra_options=options))
    assert not kvs.table_exists(name)


def test_cassandra_options_are_recorded_in_metadata(kvs, make_table):
    name = make_table(mode=LWT, bloom_filter_fp_chance=0.0001, gc_grace_seconds=3600, chunk_length_in_kb=64)
    assert dict(kvs.get_metadata(name).cassandra_options) == {
        "bloom_filter_fp_chance": 0.0001,
        "gc_grace_seconds": 3600,
        "compression": {"class": "LZ4Compressor", "chunk_length_in_kb": 64},
    }


# ================================================================================================
# Cassandra only
# ================================================================================================
@pytest.mark.cassandra
def test_cassandra_options_are_applied_to_the_cql_table(cassandra_kvs, cassandra_session, kvs_keyspace):
    name = f"_tx{uuid.uuid4().hex[:12]}"
    options = {
        "bloom_filter_fp_chance": 0.0001,
        "min_index_interval": 1,
        "max_index_interval": 1,
        "compression": {"class": "LZ4Compressor", "chunk_length_in_kb": 64},
        "gc_grace_seconds": 3600,
        "compaction": "LeveledCompactionStrategy",
    }
    cassandra_kvs.create_table(name, TableMetadata(write_mode=LWT, cassandra_options=options))
    physical = "atlas" + name  # engine-internal _x is stored as atlas_x
    row = cassandra_session.execute(
        "SELECT bloom_filter_fp_chance, min_index_interval, max_index_interval, compression, compaction,"
        " gc_grace_seconds FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (kvs_keyspace, physical),
    ).one()
    assert row is not None, f"{physical} missing from system_schema.tables"
    assert row.bloom_filter_fp_chance == pytest.approx(0.0001)
    assert row.min_index_interval == 1 and row.max_index_interval == 1
    assert dict(row.compression) == {
        "class": "org.apache.cassandra.io.compress.LZ4Compressor",
        "chunk_length_in_kb": "64",
    }
    assert row.compaction["class"].endswith("LeveledCompactionStrategy")
    assert row.gc_grace_seconds == 3600

    columns = {
        r.column_name: (r.kind, r.type, r.clustering_order)
        for r in cassandra_session.execute(
            "SELECT column_name, kind, type, clustering_order FROM system_schema.columns"
            " WHERE keyspace_name = %s AND table_name = %s",
            (kvs_keyspace, physical),
        )
    }
    assert columns == {
        "key": ("partition_key", "blob", "none"),
        "column1": ("clustering", "blob", "asc"),
        "column2": ("clustering", "bigint", "asc"),
        "value": ("regular", "blob", "none"),
    }

    # re-creating with other options alters the table
    cassandra_kvs.create_table(
        name, TableMetadata(write_mode=LWT, cassandra_options={**options, "gc_grace_seconds": 0})
    )
    row = cassandra_session.execute(
        "SELECT gc_grace_seconds FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (kvs_keyspace, physical),
    ).one()
    assert row.gc_grace_seconds == 0


@pytest.mark.cassandra
def test_cassandra_physical_names_and_registry(cassandra_kvs, cassandra_session, kvs_keyspace):
    user, internal = f"user{uuid.uuid4().hex[:8]}", f"_int{uuid.uuid4().hex[:8]}"
    cassandra_kvs.create_table(user)
    cassandra_kvs.create_table(internal, TableMetadata(write_mode=WALLCLOCK))
    tables = {
        r.table_name
        for r in cassandra_session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (kvs_keyspace,)
        )
    }
    assert {user, "atlas" + internal, "atlas_metadata"} <= tables
    assert internal not in tables
    registry = {
        r.key.decode(): r.value
        for r in cassandra_session.execute(f'SELECT key, value FROM "{kvs_keyspace}".atlas_metadata')
    }
    assert TableMetadata.from_json(json.loads(registry[internal])).write_mode is WALLCLOCK


@pytest.mark.cassandra
def test_cassandra_logical_write_times(cassandra_kvs, cassandra_session, kvs_keyspace):
    """LOGICAL puts carry write time = Atlas timestamp; sentinels a fresh one (spec 002)."""
    name = f"wt{uuid.uuid4().hex[:12]}"
    cassandra_kvs.create_table(name)
    cassandra_kvs.put(name, {cell("r", "c"): b"v"}, 1234)
    cassandra_kvs.add_gc_sentinels(name, [cell("r", "c")])
    rows = {
        r.column2: r.wt
        for r in cassandra_session.execute(
            f'SELECT column2, writetime(value) AS wt FROM "{kvs_keyspace}"."{name}" WHERE key = %s',
            (b"r",),
        )
    }
    assert rows[1234] == 1234
    assert rows[-1] >= 10**12


@pytest.mark.cassandra
def test_cassandra_fresh_timestamp_supplier_is_required(cassandra_session, kvs_keyspace):
    from airflow_atlas.kvs.cassandra import CassandraKeyValueService

    kvs = CassandraKeyValueService(cassandra_session, kvs_keyspace)
    name = f"nosup{uuid.uuid4().hex[:8]}"
    kvs.create_table(name)
    kvs.put(name, {cell("r", "c"): b"v"}, 5)  # puts need no fresh timestamp
    for op in (
        lambda: kvs.delete(name, [(cell("r", "c"), 5)]),
        lambda: kvs.delete_all_timestamps(name, {cell("r", "c"): (0, 5)}),
        lambda: kvs.add_gc_sentinels(name, [cell("r", "c")]),
        lambda: kvs.add_gc_sentinels_and_delete_all_timestamps(name, [cell("r", "c")], {cell("r", "c"): (0, 5)}),
        lambda: kvs.delete_rows(name, [b"r"]),
    ):
        with pytest.raises(InvalidInputError, match="fresh timestamp"):
            op()
    calls = []
    kvs.set_fresh_timestamp_supplier(lambda: calls.append(1) or 10**13 + len(calls))
    kvs.delete_all_timestamps(name, {cell(f"r{i}", "c"): (0, 5) for i in range(20)})
    assert len(calls) == 1  # one fresh timestamp per call, not per cell
    kvs.close()  # does not shut down the caller's session
    assert cassandra_session.execute("SELECT release_version FROM system.local").one()


@pytest.mark.cassandra
def test_cassandra_connect_owns_its_cluster(cassandra_node, kvs_keyspace):
    from airflow_atlas.kvs.cassandra import CassandraKeyValueService

    host, port = cassandra_node
    # create_keyspace=True (the default) issues CREATE KEYSPACE IF NOT EXISTS: a no-op on the session's keyspace
    kvs = CassandraKeyValueService.connect([host], port=port, keyspace=kvs_keyspace, replication_factor=1)
    name = f"own{uuid.uuid4().hex[:12]}"
    try:
        kvs.set_fresh_timestamp_supplier(lambda: 10**14)
        kvs.create_table(name)
        assert name in kvs.list_tables()
        kvs.put(name, {cell("r", "c"): b"v"}, 3)
        assert kvs.get_latest(name, [cell("r", "c")]) == {cell("r", "c"): Value(3, b"v")}
        kvs.delete_rows(name, [b"r"])
        assert kvs.get_latest(name, [cell("r", "c")]) == {}
        assert kvs_keyspace in kvs.describe() and host in kvs.describe()
        with_secret = CassandraKeyValueService.connect(
            [host], port=port, keyspace=kvs_keyspace, username="atlas", password="pa55-secret"
        )  # the node accepts anyone; the credentials must still never show up
        assert "pa55-secret" not in with_secret.describe() and "pa55-secret" not in repr(with_secret)
        with_secret.close()
        cluster = kvs.cluster
        assert cluster is not None
    finally:
        kvs.close()
    assert cluster.is_shutdown
    with pytest.raises(StoreUnavailableError, match="closed"):
        kvs.list_tables()


def test_cassandra_unreachable_node_is_store_unavailable_without_password():
    from airflow_atlas.kvs.cassandra import CassandraKeyValueService

    secret = "pa55-w0rd-secret"
    with pytest.raises(StoreUnavailableError) as info:
        CassandraKeyValueService.connect(
            ["127.0.0.1"], port=1, keyspace="atlas", username="atlas", password=secret, connect_timeout=2
        )
    assert secret not in str(info.value) and secret not in repr(info.value)
    assert "connect" in str(info.value)


@pytest.mark.cassandra
def test_cassandra_keyspace_validation(cassandra_session):
    from airflow_atlas.kvs.cassandra import CassandraKeyValueService

    for bad in ("Upper", "1ks", "ks; DROP", "a" * 49, "", "_ks"):
        with pytest.raises(InvalidInputError, match="keyspace"):
            CassandraKeyValueService(cassandra_session, bad)
    missing = f"nope_{uuid.uuid4().hex[:8]}"
    with pytest.raises(InvalidInputError, match="does not exist"):
        CassandraKeyValueService(cassandra_session, missing)
    created = CassandraKeyValueService(cassandra_session, missing, create_keyspace=True, replication_factor=1)
    try:
        row = cassandra_session.execute(
            "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (missing,)
        ).one()
        assert row is not None and row.replication["replication_factor"] == "1"
        assert created.list_tables() == []
    finally:
        created.close()
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {missing}", timeout=120)


# ================================================================================================
# SQLite only
# ================================================================================================
def _race_worker(path: str, table: str, cells: list, tag: bytes, ready, go, out) -> None:
    """Runs in a spawned process: try to claim every cell; report the ones this process won."""
    from airflow_atlas.kvs.sqlite import SqliteKeyValueService

    kvs = SqliteKeyValueService(path)
    kvs.get_metadata(table)  # connection open, metadata cached: ready to race
    ready.put(tag)
    go.wait(30)
    won = []
    for row, col in cells:
        try:
            kvs.put_unless_exists(table, {Cell(row, col): tag})
            won.append((row, col))
        except KeyAlreadyExistsError as exc:
            assert list(exc.existing) == [Cell(row, col)]
    kvs.close()
    out.put((tag, won))


def test_sqlite_put_unless_exists_race_between_processes(tmp_path):
    from airflow_atlas.kvs.sqlite import SqliteKeyValueService

    path = str(tmp_path / "race.db")
    kvs = SqliteKeyValueService(path)
    kvs.create_table("_claims", TableMetadata(write_mode=LWT))
    cells = [(b"row%d" % (i % 10), b"col%d" % i) for i in range(120)]
    ctx = multiprocessing.get_context("spawn")
    ready, go, out = ctx.Queue(), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(
            target=_race_worker,
            args=(path, "_claims", cells[::-1] if i % 2 else cells, b"p%d" % i, ready, go, out),
        )
        for i in range(4)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=60)
    go.set()  # every process is imported and connected: start the race together
    results = dict(out.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    winners: dict = {}
    for tag, won in results.items():
        for c in won:
            assert c not in winners, f"cell {c} won twice"
            winners[c] = tag
    assert set(winners) == set(cells)  # exactly one winner per cell
    stored = kvs.get_lwt("_claims", [Cell(*c) for c in cells])
    assert {(c.row, c.col): v for c, v in stored.items()} == winners
    kvs.close()


def test_sqlite_threads_share_one_store(tmp_path):
    from airflow_atlas.kvs.sqlite import SqliteKeyValueService

    kvs = SqliteKeyValueService(str(tmp_path / "threads.db"))
    kvs.create_table("data")
    errors = []

    def writer(n):
        try:
            for i in range(50):
                kvs.put("data", {Cell(b"t%d" % n, b"c%d" % i): b"v"}, 10 + i)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(list(kvs.scan("data"))) == 400
    kvs.close()


def test_sqlite_vacuum_and_space_used(tmp_path):
    from airflow_atlas.kvs.sqlite import SqliteKeyValueService

    kvs = SqliteKeyValueService(str(tmp_path / "vac.db"))
    kvs.create_table("data")
    kvs.put("data", {Cell(b"r%d" % i, b"c"): os.urandom(2000) for i in range(500)}, 1)
    used = kvs.space_used_bytes("data")
    assert used is None or used > 500 * 2000
    kvs.delete_rows("data", [b"r%d" % i for i in range(500)])
    before, after = kvs.vacuum()
    assert before > after
    assert kvs.space_used_bytes("data") in (None,) or kvs.space_used_bytes("data") < used
    kvs.put("data", {Cell(b"again", b"c"): b"v"}, 2)  # still usable
    assert kvs.get_latest("data", [Cell(b"again", b"c")]) == {Cell(b"again", b"c"): Value(2, b"v")}
    kvs.close()


def test_sqlite_refuses_in_memory_paths(tmp_path):
    from airflow_atlas.kvs.sqlite import SqliteKeyValueService

    for bad in (":memory:", "", "file::memory:?cache=shared"):
        with pytest.raises(InvalidInputError):
            SqliteKeyValueService(bad)


def _fork_child(kvs, table: str, out) -> None:
    try:
        kvs.put(table, {Cell(b"child", b"c"): str(os.getpid()).encode()}, 7)
        out.put(("ok", kvs.get_latest(table, [Cell(b"parent", b"c")])[Cell(b"parent", b"c")].contents))
    except Exception as exc:  # reported to the parent
        out.put(("error", repr(exc)))


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("cassandra", marks=pytest.mark.cassandra)])
def test_store_is_usable_in_a_forked_child(backend, tmp_path, request):
    """SQLite reopens its connection after fork; a Cassandra service that owns its cluster rebuilds it."""
    if backend == "sqlite":
        from airflow_atlas.kvs.sqlite import SqliteKeyValueService

        kvs = SqliteKeyValueService(str(tmp_path / "fork.db"))
    else:
        from airflow_atlas.kvs.cassandra import CassandraKeyValueService

        host, port = request.getfixturevalue("cassandra_node")
        keyspace = request.getfixturevalue("kvs_keyspace")
        kvs = CassandraKeyValueService.connect([host], port=port, keyspace=keyspace)
    table = f"fork{uuid.uuid4().hex[:12]}"
    try:
        kvs.create_table(table)
        kvs.put(table, {Cell(b"parent", b"c"): b"from-parent"}, 5)
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        child = ctx.Process(target=_fork_child, args=(kvs, table, out))
        child.start()
        status, detail = out.get(timeout=60)
        child.join(timeout=30)
        assert (status, detail) == ("ok", b"from-parent")
        got = kvs.get_latest(table, [Cell(b"child", b"c")])  # the parent's own connection still works
        assert got[Cell(b"child", b"c")].contents == str(child.pid).encode()
    finally:
        kvs.close()


@pytest.mark.cassandra
def test_cassandra_service_on_a_callers_session_refuses_to_run_after_fork(cassandra_session, kvs_keyspace):
    from airflow_atlas.kvs.cassandra import CassandraKeyValueService

    kvs = CassandraKeyValueService(cassandra_session, kvs_keyspace)
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_fork_child, args=(kvs, "whatever", out))
    child.start()
    status, detail = out.get(timeout=60)
    child.join(timeout=30)
    assert status == "error" and "StoreUnavailableError" in detail and "fork" in detail


@pytest.mark.cassandra
def test_cassandra_pre_serialized_batch_values_equal_the_drivers_binding(cassandra_kvs):
    """Batches add our blob/bigint statements pre-serialized (skipping the driver's bind): byte for byte
    what ``PreparedStatement.bind`` produces, for every write statement the batches carry; a value of the
    wrong type is refused like bind refuses it."""
    from cassandra import ConsistencyLevel
    from cassandra.query import BatchStatement

    from airflow_atlas.kvs.cassandra.batching import Statement, single
    from airflow_atlas.kvs.cassandra.requests import RequestBuilder

    name = f"ser{uuid.uuid4().hex[:10]}"
    cassandra_kvs.create_table(name)
    r, c = b"row\x00\xff", b"col"
    cases = {
        "put": (r, c, 7, b"value", 7),
        "delete": (10**13, r, c, 7),
        "delete_range": (10**13, r, c, -1, 2**63 - 1),
        "sentinel": (r, c, b"", 10**13),
        "delete_row": (10**13, r),
    }
    build = RequestBuilder(ConsistencyLevel.ALL, {}, pre_serialize=True)
    for kind, params in cases.items():
        ps = cassandra_kvs.cql.prepare(name, kind)
        bound = build.bound(Statement(ps, params))
        assert bound.prepared_statement is ps
        assert bound.values == ps.bind(params).values, kind
        assert bound.routing_key == r  # a blob partition key routes as itself
    with pytest.raises(TypeError, match="bigint"):
        build.bound(Statement(cassandra_kvs.cql.prepare(name, "delete_row"), ("not an int", r)))
    # A planned batch: one UNLOGGED batch at the builder's level, routed to its first partition.
    ps = cassandra_kvs.cql.prepare(name, "delete_row")
    batch, params = build([single(ps, (10**13, b"a"), name, b"a", 30), single(ps, (10**13, b"b"), name, b"b", 30)])
    assert isinstance(batch, BatchStatement) and params is None and len(batch) == 2
    assert batch.consistency_level == ConsistencyLevel.ALL and batch.routing_key == b"a" and batch.is_idempotent
    lone = single(ps, (10**13, b"a"), name, b"a", 30)
    assert build([lone]) == (ps, (10**13, b"a"))  # one statement goes as itself
    binding = RequestBuilder(ConsistencyLevel.ONE, {}, pre_serialize=False)  # e.g. a column-encryption policy
    assert binding.bound(Statement(ps, (10**13, b"a"))).values == ps.bind((10**13, b"a")).values