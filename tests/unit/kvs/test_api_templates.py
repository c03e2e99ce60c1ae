"""kvs/api.py's template methods, on a backend made of recording parts (no store): every public method checks
the table's write mode, the operation and its arguments before any part is called, a call with nothing to do
reaches no part, and a part gets the checked arguments. The real backends are tested against the same
contract in tests/integration/kvs."""
from __future__ import annotations

import pytest

from airflow_atlas.errors import InvalidInputError, TableNotFoundError
from airflow_atlas.kvs.api import (
    Cell,
    KeyValueService,
    LogicalWrites,
    LwtTables,
    Reads,
    ScanRange,
    Tables,
    WallclockTables,
)
from airflow_atlas.kvs.consistency import Operation
from airflow_atlas.kvs.tables import SweepStrategy, TableMetadata, WriteMode

C1, C2 = Cell(b"r1", b"c"), Cell(b"r2", b"c")
MODES = {"data": WriteMode.LOGICAL, "locks": WriteMode.LWT, "registry": WriteMode.WALLCLOCK}


class Recorder:
    """Every method call of a part, as (part, method, args)."""

    def __init__(self, name: str, calls: list):
        self._name, self._calls = name, calls

    def __getattr__(self, method):
        def record(*args):
            self._calls.append((self._name, method, args))
            return {} if method in ("get", "all_timestamps", "rows_columns", "row") else None

        return record


class FakeTables(Tables):
    def __init__(self, calls):
        self.calls = calls

    def meta(self, table, op):
        if table not in MODES:
            raise TableNotFoundError(table)
        return TableMetadata(SweepStrategy.CONSERVATIVE, MODES[table])

    def create(self, table, metadata):
        self.calls.append(("tables", "create", (table, metadata)))

    def drop(self, table): ...
    def truncate(self, table): ...
    def exists(self, table):
        return table in MODES

    def metadata(self, table):
        return self.meta(table, "get_metadata")

    def set_strategy(self, table, strategy):
        self.calls.append(("tables", "set_strategy", (table, strategy)))

    def names(self):
        return sorted(MODES)


class FakeKvs(KeyValueService):
    backend = "fake"

    def __init__(self):
        self.calls: list = []
        self._tables = FakeTables(self.calls)
        # The recorders stand in for the abstract parts (their methods are looked up by name).
        self._reads = Recorder("reads", self.calls)
        self._writes = Recorder("writes", self.calls)
        self._lwt = Recorder("lwt", self.calls)
        self._wallclock = Recorder("wallclock", self.calls)

    def close(self):
        pass


@pytest.fixture
def kvs():
    return FakeKvs()


@pytest.mark.parametrize(
    "call",
    [
        lambda k: k.put("locks", {C1: b"v"}, 5),
        lambda k: k.multi_put({"data": {C1: b"v"}, "registry": {C1: b"v"}}, 5),
        lambda k: k.delete("registry", [(C1, 5)]),
        lambda k: k.delete_all_timestamps("locks", {C1: (0, 5)}),
        lambda k: k.add_gc_sentinels("locks", [C1]),
        lambda k: k.add_gc_sentinels_and_delete_all_timestamps("registry", [C1], {}),
        lambda k: k.delete_rows("locks", [b"r1"]),
        lambda k: k.put_unless_exists("data", {C1: b"v"}),
        lambda k: k.check_and_set("registry", C1, None, b"v"),
        lambda k: k.get_lwt("data", [C1]),
        lambda k: k.get_lwt_row("data", b"r1"),
        lambda k: k.put_wallclock("locks", {C1: b"v"}),
        lambda k: k.delete_wallclock("data", [C1]),
        lambda k: k.get_wallclock_row("data", b"r1"),
    ],
)
def test_a_method_on_a_table_of_the_wrong_write_mode_is_refused_before_any_part_runs(kvs, call):
    with pytest.raises(InvalidInputError, match="is not allowed on table"):
        call(kvs)
    assert kvs.calls == []


@pytest.mark.parametrize(
    "call",
    [
        lambda k: k.put("data", {}, 5),
        lambda k: k.multi_put({"data": {}}, 5),
        lambda k: k.delete("data", []),
        lambda k: k.delete_all_timestamps("data", {}),
        lambda k: k.add_gc_sentinels("data", []),
        lambda k: k.add_gc_sentinels_and_delete_all_timestamps("data", [], {}),
        lambda k: k.delete_rows("data", []),
        lambda k: k.get("data", {}),
        lambda k: k.get_all_timestamps("data", []),
        lambda k: k.get_row_columns("data", b"r1", limit=0),
        lambda k: k.get_row_columns("data", b"r1", start_col=b"b", end_col=b"a"),
        lambda k: k.get_rows_columns("data", []),
        lambda k: k.put_unless_exists("locks", {}),
        lambda k: k.get_lwt("locks", []),
        lambda k: k.put_wallclock("registry", {}),
        lambda k: k.delete_wallclock("registry", []),
        lambda k: k.get_wallclock_row("registry", b"r1", limit=0),
    ],
)
def test_a_call_with_nothing_to_do_reaches_no_part(kvs, call):
    call(kvs)
    assert kvs.calls == []


def test_bad_arguments_are_refused_before_any_part_runs(kvs):
    for call in (
        lambda: kvs.put("data", {C1: "not bytes"}, 5),
        lambda: kvs.put("data", {C1: b"v"}, -1),
        lambda: kvs.delete("data", [(C1, "5")]),
        lambda: kvs.delete_all_timestamps("data", {C1: (5, 1)}),
        lambda: kvs.add_gc_sentinels_and_delete_all_timestamps("data", [C1], {C2: (0, 1)}),
        lambda: kvs.put("data", {C1: b"v"}, 5, operation=Operation.LWT_COMMIT),
        lambda: kvs.put_wallclock("registry", {C1: b"v"}, ttl_seconds=0),
        lambda: kvs.get_wallclock_row("registry", b""),
        lambda: kvs.split_ranges("data", 0),
        lambda: kvs.create_table("_metadata"),
        lambda: kvs.set_fresh_timestamp_supplier(5),  # not callable
    ):
        with pytest.raises(InvalidInputError):
            call()
    with pytest.raises(TableNotFoundError):
        kvs.get("missing", {C1: 5})
    assert kvs.calls == []


def test_a_part_gets_the_checked_arguments_and_the_resolved_operation(kvs):
    kvs.delete("data", [(C1, 5), (C1, 5), (C2, 6)])
    kvs.put("data", {C1: bytearray(b"v")}, 7)
    kvs.multi_put({"data": {C1: b"v"}}, 8)
    kvs.add_gc_sentinels_and_delete_all_timestamps("data", [C1, C1, C2], {C1: (0, 4)})
    kvs.delete_rows("data", [b"r1", b"r1"], operation=Operation.QUEUE_CLEANUP)
    kvs.set_fresh_timestamp_supplier(int)
    assert kvs.calls == [
        ("writes", "delete", ("data", [(C1, 5), (C2, 6)], Operation.ABORT_DELETE)),
        ("writes", "put", ({"data": {C1: b"v"}}, 7, "put", Operation.DATA_WRITE)),
        ("writes", "put", ({"data": {C1: b"v"}}, 8, "multi_put", Operation.DATA_WRITE)),
        ("writes", "sentinels_and_tombstones", ("data", [C1, C2], {C1: (0, 4)})),
        ("writes", "delete_rows", ("data", [b"r1"], Operation.QUEUE_CLEANUP)),
        ("writes", "use_fresh_timestamps", (int,)),
    ]
    assert type(kvs.calls[1][2][0]["data"][C1]) is bytes


def test_reads_and_scans_go_to_the_reads_part(kvs):
    kvs.get_row_columns("data", b"r1", start_col=b"a", limit=3, timestamp=9)
    kvs.scan("data", ScanRange("key", None, None), page_size=10)
    assert [(part, method) for part, method, _ in kvs.calls] == [
        ("reads", "row_columns"), ("reads", "scan_bounds"), ("reads", "scan")
    ]
    assert kvs.calls[0][2] == ("data", b"r1", b"a", None, 3, 9)


def test_the_default_conservative_write_is_the_two_separate_writes_sentinels_first():
    calls: list = []

    class Writes(LogicalWrites):
        def use_fresh_timestamps(self, supplier): ...
        def put(self, puts, timestamp, op, operation): ...
        def delete(self, table, versions, operation): ...
        def delete_rows(self, table, rows, operation): ...

        def sentinels(self, table, cells, operation):
            calls.append(("sentinels", cells, operation))

        def delete_ranges(self, table, ranges, operation):
            calls.append(("ranges", ranges, operation))

    Writes().sentinels_and_tombstones("t", [C1, C2], {C1: (0, 4)})
    assert calls == [("sentinels", [C1, C2], Operation.SENTINEL), ("ranges", {C1: (0, 4)}, Operation.SWEEP_DELETE)]
    calls.clear()
    Writes().sentinels_and_tombstones("t", [C1], {})
    assert calls == [("sentinels", [C1], Operation.SENTINEL)]


def test_the_parts_are_the_abstract_interfaces_both_backends_implement():
    from airflow_atlas.kvs.cassandra.lwt import CassandraLwt, CassandraWallclock
    from airflow_atlas.kvs.cassandra.reads import CassandraReads
    from airflow_atlas.kvs.cassandra.schema import CassandraTables
    from airflow_atlas.kvs.cassandra.writes import CassandraWrites
    from airflow_atlas.kvs.sqlite.lwt import SqliteLwt, SqliteWallclock
    from airflow_atlas.kvs.sqlite.reads import SqliteReads
    from airflow_atlas.kvs.sqlite.schema import SqliteTables
    from airflow_atlas.kvs.sqlite.writes import SqliteWrites

    for interface, parts in (
        (Tables, (CassandraTables, SqliteTables)),
        (Reads, (CassandraReads, SqliteReads)),
        (LogicalWrites, (CassandraWrites, SqliteWrites)),
        (LwtTables, (CassandraLwt, SqliteLwt)),
        (WallclockTables, (CassandraWallclock, SqliteWallclock)),
    ):
        for part in parts:
            assert issubclass(part, interface) and not part.__abstractmethods__, part
