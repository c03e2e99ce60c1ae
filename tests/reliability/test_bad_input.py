"""Bad input: operator arguments, store URLs and connection extras, corrupted sweep-queue cells, and a
transactions table holding garbage - on the real Cassandra node.

* Operator arguments (the real operators, their real connection and settings Variable, ``execute()``):
  out-of-range or hostile shards, unknown strategies and tables, malformed targets and timestamps, bad
  engine settings fail WITHOUT retries (``AirflowFailException``) with a message naming the problem, and
  leave the store untouched (no lock, no progress, keyspace intact). Malformed numbers (a non-numeric ``sweep_ts``,
  ``shards`` or ``sweep_timestamps``, a non-numeric ``protocol_version`` extra) also fail at once with InvalidInputError naming the argument, never a bare ValueError Airflow retries.
* URLs and connection extras: values that would end up in CQL (keyspace, datacenter, options) are refused
  before any connection is opened.
* Corrupted queue cells written straight into ``_sweep_cells`` / ``_sweep_timestamps``: undecodable
  columns and values, a reference with an undecodable count, garbage in a dedicated row, an undecodable
  timestamps column: each is quarantined (record in the sweep history, ``ALERT`` in the log, counted in
  ``atlas-sweep status``), the good entries around it are swept, the other shard is swept, and the next
  run does not meet it again (no crash loop). A reference whose dedicated rows are missing is, by the
  engine's design, a benign crash state (logged as a warning, not quarantined): the test checks it is
  logged and harmless.
* A transactions table with garbage: the sweep of the affected shard fails with
  CorruptTransactionDataError naming the table and start timestamp (CLI: exit 1, the message), the other
  shard is swept, transactions reading the cell fail with the same clear error.
* A small hypothesis corpus of garbage cells in a real (embedded) store: the reader never raises,
  reports every garbage cell, and still returns every good entry.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_atlas.encoding import var_long
from airflow_atlas.errors import CorruptTransactionDataError, InvalidInputError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.oracle import Reader, compare, observe, obsolete_versions
from airflow_atlas.sweep.queue.constants import FINE_PARTITION
from airflow_atlas.sweep.queue.partitions import fine
from airflow_atlas.sweep.queue.queue_tables import (
    SWEEPABLE_CELLS,
    SWEEPABLE_TIMESTAMPS,
    cells_column,
    dedicated_row,
    encode_dedicated_reference,
    non_dedicated_row,
    timestamps_row,
)
from airflow_atlas.sweep.queue.shards import shard_for
from airflow_atlas.sweep.queue.write_reference import encode_write_reference
from airflow_atlas.transactions import encoding as txn_encoding
from airflow_atlas.workload import dead_writer
from tests.conftest import REPO_ROOT

from .helpers import CONFIG, backlog_below, cell, leaked_queue_rows, open_store, progress_of, sweep_all

pytestmark = pytest.mark.cassandra

CONN_ID = "atlas_bad_input"


# ----- operator arguments ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def operator_store(module_stores, cassandra_node, airflow_home):
    store, _ = module_stores(shards=2)
    store.create_table("bad_t", "THOROUGH")
    host, port = cassandra_node
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}",
                  json.dumps({"conn_type": "cassandra", "host": host, "port": port, "schema": store.kvs.keyspace}))
        mp.setenv("AIRFLOW_VAR_ATLAS_SETTINGS", json.dumps({"store_conn_id": CONN_ID, "store_config": {"unreadable_window_seconds": 0}}))
        yield store


def _sweep(**kw):
    from airflow_atlas.airflow.operators.sweep import SweepShardOperator

    return SweepShardOperator(task_id=f"sweep_{uuid.uuid4().hex[:6]}", **kw)


def _plan(**kw):
    from airflow_atlas.airflow.operators.sweep_timestamps import PlanTargetedSweepOperator

    return PlanTargetedSweepOperator(task_id=f"plan_{uuid.uuid4().hex[:6]}", **kw)


BAD_OPERATOR_ARGS = [
    (lambda: _sweep(shard=300, strategy="THOROUGH"), "shard must be an integer in 0..255, got 300"),
    (lambda: _sweep(shard=-1, strategy="THOROUGH"), "got -1"),
    (lambda: _sweep(shard="0; DROP KEYSPACE x", strategy="THOROUGH"), "shard must be an integer"),
    (lambda: _sweep(shard=True, strategy="THOROUGH"), "shard must be an integer"),
    (lambda: _sweep(shard=0, strategy="SIDEWAYS"), "SIDEWAYS"),
    (lambda: _sweep(shard=0, strategy="NOTHING"), "never swept"),
    (lambda: _sweep(targets="0:THOROUGH"), "targets must be a list"),
    (lambda: _sweep(targets=[{"shard": 0}]), "needs 'shard' and 'strategy'"),
    (lambda: _sweep(targets=[{"shard": 0, "strategy": "THOROUGH", "sweep_ts": "1e3"}]), "sweep_ts must be an integer"),
    (lambda: _sweep(shard=0, strategy="THOROUGH", execution_mode="warp"), "execution_mode must be one of"),
    (lambda: _sweep(shard=0, strategy="THOROUGH", store_config={"batch_limit": 0}), "batch_limit must be between"),
    (lambda: _sweep(shard=0, strategy="THOROUGH", store_config={"no_such_setting": 1}), "unknown setting(s): no_such_setting"),
    (lambda: _sweep(shard=999, strategy="THOROUGH"), "shard must be an integer in 0..255"),
    (lambda: _plan(shards=[7]), "shard(s) [7] out of range: the store has 2 shard(s)"),
    (lambda: _plan(strategies=["SIDEWAYS"]), "SIDEWAYS"),
]


@pytest.mark.parametrize("make, message", BAD_OPERATOR_ARGS, ids=range(len(BAD_OPERATOR_ARGS)))
def test_bad_operator_arguments_fail_without_retry_naming_the_problem(operator_store, make, message):
    from airflow.sdk.exceptions import AirflowFailException

    store = operator_store
    progress = progress_of(store)
    with pytest.raises(AirflowFailException) as failure:
        make().execute({})
    assert message in str(failure.value)
    assert progress_of(store) == progress and store.locks.list_locks() == []
    assert store.kvs.table_exists("bad_t")  # hostile names never reached CQL


MALFORMED_NUMBERS = [
    (lambda: _sweep(shard=0, strategy="THOROUGH", sweep_ts="yesterday"), "sweep_ts"),
    (lambda: _plan(shards=["x"]), "shard"),
    (lambda: _plan(sweep_timestamps={"CONSERVATIVE": "soon", "THOROUGH": "soon"}), "sweep"),
    (lambda: _plan(sweep_timestamps={"THOROUGH": 5}), "CONSERVATIVE"),
]


@pytest.mark.parametrize("make, word", MALFORMED_NUMBERS, ids=range(len(MALFORMED_NUMBERS)))
def test_malformed_timestamps_and_shards_fail_without_retry(operator_store, make, word):
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowFailException) as failure:
        make().execute({})
    assert word in str(failure.value)


def test_the_good_arguments_of_the_same_operators_work(operator_store):
    """Control: the same operators and connection do work (the failures above are the arguments')."""
    groups = _plan(shards=[0, 1], skip_idle=False).execute({})
    assert [[(t["shard"], t["strategy"]) for t in g] for g in groups] == [
        [(s, strategy)] for strategy in ("CONSERVATIVE", "THOROUGH") for s in (0, 1)
    ]


# ----- store URLs and connection extras ---------------------------------------------------------------------
HOSTILE_URLS = [
    ("cassandra://127.0.0.1:1/ks;DROP", "invalid keyspace"),
    ("cassandra://127.0.0.1:1/ks%3BDROP%20KEYSPACE%20x", "invalid keyspace"),
    ("cassandra://127.0.0.1:1/ks?datacenter=dc1'}%3B%20DROP%20KEYSPACE%20x%3B--", "invalid datacenter"),
    ("cassandra://127.0.0.1:1/ks?replication_factor=1;DROP", "replication_factor"),
    ("cassandra://127.0.0.1:1/ks?protocol_version=5%20OR%201", "protocol_version"),
    ("cassandra://127.0.0.1%0a:1/ks", "not a valid host"),
    ("cassandra://127.0.0.1:1/ks?page_size=-1", "page_size"),
    ("cassandra://127.0.0.1:1/ks?concurrency=0", "concurrency"),
]


@pytest.mark.parametrize("url, message", HOSTILE_URLS)
def test_hostile_store_urls_are_refused_before_connecting(url, message):
    from airflow_atlas.store import AtlasStore

    with pytest.raises(InvalidInputError) as failure:
        AtlasStore.open(url)
    assert message in str(failure.value)


BAD_EXTRAS = [
    ({"replication_factor": "three"}, "replication_factor must be an integer"),
    ({"create_keyspace": "sometimes"}, "create_keyspace must be true or false"),
    ({"create_keyspace": True, "datacenter": "dc1'}; DROP KEYSPACE x; --"}, "invalid datacenter"),
    ({"create_keyspace": True, "replication_factor": 0}, "replication_factor"),
]


@pytest.mark.parametrize("extra, message", BAD_EXTRAS)
def test_bad_connection_extras_are_refused_naming_the_extra(extra, message, cassandra_node, monkeypatch, airflow_home):
    from airflow_atlas.airflow.hooks.atlas import AtlasHook

    host, port = cassandra_node
    keyspace = f"atlas_x_{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("AIRFLOW_CONN_ATLAS_EXTRAS", json.dumps(
        {"conn_type": "cassandra", "host": host, "port": port, "schema": keyspace, "extra": extra}))
    with AtlasHook("atlas_extras") as hook, pytest.raises(InvalidInputError) as failure:
        hook.get_store()
    assert message in str(failure.value)


def test_non_numeric_protocol_version_extra_is_refused_naming_it(monkeypatch, airflow_home):
    from airflow_atlas.airflow.hooks.atlas import AtlasHook

    monkeypatch.setenv("AIRFLOW_CONN_ATLAS_EXTRAS", json.dumps(
        {"conn_type": "cassandra", "host": "127.0.0.1", "port": 1, "schema": "ks", "extra": {"protocol_version": "five"}}))
    with AtlasHook("atlas_extras") as hook, pytest.raises(InvalidInputError, match="protocol_version"):
        hook.get_store()


# ----- corrupted queue cells ----------------------------------------------------------------------------------
def _commit(store, table, values) -> int:
    txn = store.transactions.begin()
    txn.put(table, values)
    txn.commit()
    return txn.start_timestamp


def _cells_in_shard(table: str, shard: int, n: int, shards: int = 2, offset: int = 0) -> list[Cell]:
    out, i = [], offset
    while len(out) < n:
        c = cell(i)
        if shard_for(table, c, shards) == shard:
            out.append(c)
        i += 1
    return out


def test_corrupted_queue_cells_are_quarantined_and_alerted_without_a_crash_loop(shared_stores, caplog):
    store, _ = shared_stores(shards=2)
    table = "corrupt_t"
    store.create_table(table, "THOROUGH")
    good0 = _cells_in_shard(table, 0, 6)
    good1 = _cells_in_shard(table, 1, 4)
    # Good history in both shards: two versions of every cell (the older one must be swept).
    for v in (b"v1", b"v2"):
        _commit(store, table, {c: v + c.row for c in good0 + good1})
    # Corruption in shard 0, THOROUGH, written straight into the queue tables (as a disk or a bug might).
    ts = store.timestamps.fresh_timestamp()
    partition, modulus = fine(ts), ts % FINE_PARTITION
    row = non_dedicated_row(partition, 0, False)
    garbage = {
        Cell(row, var_long(modulus + 4)): encode_write_reference(table, good0[0], False),  # column without write_index
        Cell(row, cells_column(modulus, 0)): b"\x07garbage-write-reference",  # undecodable value
        Cell(row, cells_column(modulus + 1, -1)): b"\x09\x09",  # a reference with an undecodable count
        Cell(row, cells_column(modulus + 2, -1)): encode_dedicated_reference(3),  # its dedicated row is missing
        Cell(row, cells_column(modulus + 3, -1)): encode_dedicated_reference(2),  # dedicated row with garbage
    }
    store.kvs.put(SWEEPABLE_CELLS, garbage, ts)
    store.kvs.put(SWEEPABLE_CELLS, {
        Cell(dedicated_row(ts + 3, 0, False, 0), cells_column(modulus + 3, 0)): encode_write_reference(table, good0[1], False),
        Cell(dedicated_row(ts + 3, 0, False, 0), b"\x00"): b"not a column of this row",
    }, ts)
    store.kvs.put(SWEEPABLE_TIMESTAMPS, {
        Cell(timestamps_row(0, partition // 200, False), var_long(partition)): b"",
        Cell(timestamps_row(0, partition // 200, False), b"\xff"): b"",  # an undecodable fine partition
    }, ts)
    store.timestamps.fresh_timestamps(10)  # the garbage's start timestamps are below the sweep timestamp
    for v in (b"v3",):
        _commit(store, table, {c: v + c.row for c in good0 + good1})

    caplog.set_level(logging.WARNING, logger="airflow_atlas")
    sweep_ts = store.sweep_timestamps.all()
    fresh = store.timestamps.fresh_timestamp()
    readers = [Reader(fresh)]
    before = observe(store, readers, [table])
    ts_used, results = sweep_all(store, sweep_ts)
    by_shard = {r.shard: r for r in results if r.strategy == "THOROUGH"}
    assert by_shard[0].status == by_shard[1].status == "caught_up"
    assert by_shard[0].counts.corrupt_entries >= 4 and by_shard[1].counts.corrupt_entries == 0
    # Quarantine: a record per corrupt cell, with the reasons; ALERT in the log; counted by status.
    records = store.history.quarantined()
    reasons = " | ".join(r["reason"] for r in records)
    assert {r["shard"] for r in records} == {0} and len(records) >= 4
    for fragment in ("sweepableCells column", "write reference", "dedicated reference", "sweepableTimestamps column"):
        assert fragment in reasons, (fragment, reasons)
    assert any("dedicated row column does not belong" in r["reason"] or "bad write_index" in r["reason"] for r in records)
    alerts = [r.getMessage() for r in caplog.records if "ALERT" in r.getMessage()]
    assert alerts and "quarantined" in alerts[0]
    warnings = [r.getMessage() for r in caplog.records if "missing or short dedicated rows" in r.getMessage()]
    assert warnings, "a reference to a missing dedicated row must at least be logged"
    assert "missing_dedicated_row" not in {r.get("kind") for r in records}  # benign by design: not quarantined
    from airflow_atlas.status import compute_status

    assert compute_status(store)["quarantined_cells"] == len(records)
    # Everything good was swept, in both shards; nothing visible changed; nothing left behind.
    assert compare(before, observe(store, readers, [table]), sweep_ts) == []
    assert obsolete_versions(store, ts_used, [table]) == []
    assert backlog_below(store, sweep_ts) == {}
    assert leaked_queue_rows(store) == []
    # No crash loop, no alert loop: the next runs sweep on; the one corrupt cell still in the queue (the
    # undecodable _sweep_timestamps column stays until progress leaves its coarse partition) is skipped
    # with a warning, not quarantined and alerted again.
    for _ in range(2):
        caplog.clear()
        _commit(store, table, {c: b"later" for c in good0})
        _, again = sweep_all(store)
        assert {r.status for r in again} == {"caught_up"}
        assert sum(r.counts.corrupt_entries for r in again) <= 1
        assert not [r for r in caplog.records if "ALERT" in r.getMessage()]
        assert len(store.history.quarantined()) == len(records)
    assert [r for r in caplog.records if "quarantined earlier are still in the queue" in r.getMessage()]


# ----- a transactions table with garbage ----------------------------------------------------------------------
def test_garbage_in_the_transactions_table_is_named_and_other_shards_are_swept(shared_stores, tmp_path):
    store, url = shared_stores(shards=2)
    table = "txn_garbage_t"
    store.create_table(table, "THOROUGH")
    c0, c1 = _cells_in_shard(table, 0, 2), _cells_in_shard(table, 1, 2)
    for v in (b"a", b"b"):
        _commit(store, table, {c: v for c in c0 + c1})
    dead = dead_writer(store, {table: {c0[0]: b"dead"}})  # its fate is for sweep to decide...
    service = store.transaction_service
    store.kvs.put_unless_exists(service.table, {txn_encoding.v2_cell(dead): b"\xff\xff\xff"})  # ...but garbage is there
    _commit(store, table, {c: b"c" for c in c0[1:] + c1})  # (a write to c0[0] would meet the garbage: see below)
    sweep_ts = store.sweep_timestamps.all()

    with pytest.raises(CorruptTransactionDataError) as failure:
        store.sweeper.sweep_shard(0, "THOROUGH", sweep_ts=sweep_ts["THOROUGH"])
    message = str(failure.value)
    assert f"start timestamp {dead}" in message and "_transactions2" in message and "ffffff" in message
    other = store.sweeper.sweep_shard(1, "THOROUGH", sweep_ts=sweep_ts["THOROUGH"])
    assert other.status == "caught_up" and other.counts.cells_tombstoned > 0
    assert store.locks.describe(store.sweeper.lock_name(0, "THOROUGH")).expired  # released after the failure
    # A reader meeting the dead writer's version gets the same clear error, never its value.
    fresh_store = open_store(url, shards=2)
    with pytest.raises(CorruptTransactionDataError, match=f"start timestamp {dead}"):
        fresh_store.transactions.run(lambda txn: txn.get(table, [c0[0]]))
    fresh_store.close()
    # The CLI: exit 1, the message on stderr, the other shard reported swept.
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "airflow_atlas.cli", "sweep", "--store", url, "--strategy", "THOROUGH", "--json",
         "--no-progress", "--set", "unreadable_window_seconds=0"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert done.returncode == 1, done.stderr
    assert f"start timestamp {dead}" in done.stdout + done.stderr
    report = json.loads(done.stdout)
    statuses = {(r["shard"], r["strategy"]): r["status"] for r in report["results"]}
    assert statuses[(0, "THOROUGH")] == "failed" and statuses[(1, "THOROUGH")] == "caught_up"


# ----- the reader against garbage (hypothesis, small corpus, embedded store) ---------------------------------
@pytest.fixture(scope="module")
def reader_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("reader-fuzz") / "fuzz.db"
    store = open_store(f"sqlite:///{path}", config=CONFIG, shards=1)
    store.create_table("fuzz_t", "THOROUGH")
    yield store
    store.close()


@settings(max_examples=int(os.environ.get("ATLAS_FUZZ_EXAMPLES", "30")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    garbage=st.lists(st.tuples(st.binary(min_size=1, max_size=12), st.binary(max_size=40)), min_size=1, max_size=6),
    good=st.integers(1, 5),
)
def test_reader_reports_garbage_cells_and_returns_every_good_entry(reader_store, garbage, good):
    from airflow_atlas.errors import CorruptQueueDataError
    from airflow_atlas.sweep.queue.queue_tables import cells_column_start, decode_cells_column

    store = reader_store
    start = store.timestamps.fresh_timestamp()
    modulus = start % FINE_PARTITION
    good_cells = [cell(i) for i in range(good)]
    store.queue.writer.enqueue([_info("fuzz_t", c, start) for c in good_cells])
    row = non_dedicated_row(fine(start), 0, False)
    ours = {cells_column(modulus, i) for i in range(good)}
    junk = {Cell(row, col): value for col, value in garbage if col not in ours}
    if junk:
        store.kvs.put(SWEEPABLE_CELLS, junk, start)
    batch = store.queue.reader.read_batch(0, "THOROUGH", start - 1, start + 1, 10_000)  # must not raise
    assert set(good_cells) <= {e.cell for e in batch.entries if e.start_ts == start}
    lo, hi = cells_column_start(modulus), cells_column_start(modulus + 1)
    reported = {c.col_hex for c in batch.corrupt}
    for c in junk:
        if lo <= c.col < hi:  # in the range the reader reads
            try:
                decode_cells_column(c.col)
            except CorruptQueueDataError:
                assert c.col.hex() in reported, (c.col.hex(), batch.corrupt)
    store.kvs.delete_rows(SWEEPABLE_CELLS, [row])


def _info(table, c, start):
    from airflow_atlas.sweep.queue.write_info import WriteInfo

    return WriteInfo(table, c, start, False)


@pytest.mark.parametrize("bad", ["yesterday", 1.5, True, -5, 2**63])
def test_the_engine_refuses_malformed_sweep_timestamps(reader_store, bad):
    """A sweep timestamp handed over from XCom or by hand: refused before the iteration does anything."""
    for call in (reader_store.sweeper.sweep_shard, reader_store.sweeper.run_iteration):
        with pytest.raises(InvalidInputError, match="sweep_ts must be an integer"):
            call(0, "THOROUGH", sweep_ts=bad)
    assert reader_store.locks.list_locks() == []


def test_bad_limits_and_future_sweep_ts_are_refused(operator_store):
    """Negative or non-numeric limits name the problem (0 or empty means "the setting": that is what the
    manual sweep form pushes for an empty field), and a sweep timestamp above every issued timestamp (it
    would sweep versions open readers still need) is refused by the operator and by the engine."""
    from airflow.sdk.exceptions import AirflowFailException

    store = operator_store
    progress = progress_of(store)
    for kwargs, word in (
        ({"batch_limit": -5}, "batch_limit"),
        ({"batch_limit": 200_000}, "batch_limit"),
        ({"max_iterations": -1}, "max_iterations"),
        ({"max_iterations": "many"}, "max_iterations"),
    ):
        with pytest.raises(AirflowFailException) as failure:
            _sweep(shard=0, strategy="THOROUGH", **kwargs).execute({})
        assert word in str(failure.value)
    future = store.timestamps.current_bound() + 1_000_000
    with pytest.raises(AirflowFailException) as failure:
        _sweep(shard=0, strategy="THOROUGH", sweep_ts=future).execute({})
    assert "above every timestamp issued" in str(failure.value)
    with pytest.raises(InvalidInputError, match="above every timestamp issued"):
        store.sweeper.sweep_shard(0, "THOROUGH", sweep_ts=future)
    with pytest.raises(InvalidInputError, match="max_iterations"):
        store.sweeper.sweep_shard(0, "THOROUGH", max_iterations=0)
    with pytest.raises(InvalidInputError, match="batch_limit"):
        store.sweeper.run_iteration(0, "THOROUGH", batch_limit=0)
    assert progress_of(store) == progress
