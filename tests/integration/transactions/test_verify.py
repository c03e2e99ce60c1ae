"""``run_verify`` catches what went wrong (issue 16, item 2), on the embedded store and the local node."""
from __future__ import annotations

import pytest

from airflow_atlas.cli import main
from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import CorruptTransactionDataError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.kvs.tables import SweepStrategy
from airflow_atlas.serialisation import to_json
from airflow_atlas.store import AtlasStore
from airflow_atlas.transactions.encoding import v2_cell
from airflow_atlas.transactions.service import TRANSACTIONS2_TABLE, TransactionServiceV1
from airflow_atlas.verify import run_verify
from tests.conftest import CASSANDRA_HOST, CASSANDRA_PORT

CONFIG = StoreConfig(unreadable_window_seconds=0)


@pytest.fixture(params=["sqlite", pytest.param("cassandra", marks=pytest.mark.cassandra)])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'atlas.db'}"
    return f"cassandra://{CASSANDRA_HOST}:{CASSANDRA_PORT}/{request.getfixturevalue('fresh_keyspace')}"


@pytest.fixture
def store(url):
    with AtlasStore.open(url, CONFIG) as s:
        s.initialize(shards=1)
        s.create_table("c", SweepStrategy.CONSERVATIVE)
        s.create_table("t", SweepStrategy.THOROUGH)
        yield s


def _put(store, table, cell, value) -> int:
    txn = store.transactions.begin()
    txn.put(table, {cell: value})
    txn.commit()
    return txn.start_timestamp


def _sweep_all(store):
    for strategy in ("CONSERVATIVE", "THOROUGH"):
        assert store.sweeper.sweep_shard(0, strategy).status == "caught_up"


def _resurrect(store, table, cell, timestamp, value):
    """Bring a swept version back as a replica that missed the tombstone does after it was purged. On
    Cassandra the tombstone on this node shadows any write older than it, so the version is written with a
    write time above the tombstone's (what the reader then sees is the same: the old version, visible)."""
    if store.kvs.describe().startswith("cassandra"):
        from airflow_atlas.kvs.cassandra import physical_table_name

        store.kvs.session.execute(
            f'INSERT INTO "{store.kvs.keyspace}"."{physical_table_name(table)}" (key, column1, column2, value) VALUES (%s, %s, %s, %s) '
            "USING TIMESTAMP %s",
            (cell.row, cell.col, timestamp, value, store.timestamps.fresh_timestamp() * 1_000_000),
        )
    else:
        store.kvs.put(table, {cell: value}, timestamp)


def _kinds(report):
    return sorted({f.kind for f in report.findings})


def test_a_clean_store_verifies(store):
    cell = Cell(b"r", b"c")
    for i in range(3):
        _put(store, "c", cell, b"v%d" % i)
        _put(store, "t", cell, b"v%d" % i)
    _sweep_all(store)
    report = run_verify(store)
    assert report.ok and report.findings == [], report.findings
    assert report.transactions_schema_version == 2
    assert set(to_json(report)["checks"]) >= {"transactions_schema", "resurrected_versions", "quarantined_queue_entries"}


def test_the_issue_16_loss_is_caught(store, url, capsys):
    """What the old code did with transactions_schema_version=1 on a v2 store: roll every committed
    transaction back in ``_transactions`` and delete its writes."""
    cells = [Cell(b"r%d" % i, b"c") for i in range(4)]
    starts = [_put(store, "t", c, b"value") for c in cells]
    wrong = TransactionServiceV1(store.kvs)
    wrong.ensure_tables()
    for start in starts:
        wrong.put_unless_exists(start, -1)
    store.kvs.delete("t", list(zip(cells, starts, strict=True)))

    report = run_verify(store)
    assert not report.ok
    lost = [f for f in report.findings if f.kind == "rolled_back_but_committed"]
    assert len(lost) == 4 and report.checks["transactions_schema"].count == 4
    assert str(starts[0]) in lost[0].detail and "_transactions" in lost[0].detail and "restore" in lost[0].action
    capsys.readouterr()
    assert main(["--store", url, "verify"]) == 1
    captured = capsys.readouterr()
    assert "rolled_back_but_committed" in captured.out and "verification failed" in captured.err


def test_a_commit_entry_only_in_the_other_table_is_reported(store):
    dead = store.timestamps.fresh_timestamp()
    store.kvs.put("t", {Cell(b"x", b"y"): b"v"}, dead)
    wrong = TransactionServiceV1(store.kvs)
    wrong.ensure_tables()
    wrong.put_unless_exists(dead, dead + 1)
    report = run_verify(store)
    assert not report.ok and _kinds(report) == ["committed_in_other_table"]


def test_a_resurrected_version_is_caught(store):
    cell = Cell(b"r", b"c")
    old = _put(store, "c", cell, b"old")
    _put(store, "c", cell, b"new")
    _sweep_all(store)
    assert run_verify(store).ok
    # The range tombstone is lost (a replica restored from before it, repair missed): the old version is back.
    _resurrect(store, "c", cell, old, b"old")
    report = run_verify(store)
    assert not report.ok and _kinds(report) == ["resurrected_version"]
    assert f"version {old}" in report.findings[0].detail and "repair" in report.findings[0].action


def test_a_corrupt_transaction_entry_is_a_finding_not_a_crash(store):
    cell = Cell(b"r", b"c")
    start = _put(store, "t", cell, b"v")
    tcell = v2_cell(start)
    raw = store.kvs.get_lwt(TRANSACTIONS2_TABLE, [tcell])[tcell]
    assert store.kvs.check_and_set(TRANSACTIONS2_TABLE, tcell, raw, b"\xff\xff\xff")
    fresh = AtlasStore(store.kvs, CONFIG)  # no cached outcome
    report = run_verify(fresh)
    assert not report.ok and _kinds(report) == ["corrupt_transaction_entry"]
    detail = report.findings[0].detail
    assert f"start timestamp {start}" in detail and tcell.row.hex() in detail and "rewrite" in detail
    assert "it wrote t row 72 column 63" in detail  # the user cell
    # item 9: the sweeper's error names the transaction, its cell, and what to do
    with pytest.raises(CorruptTransactionDataError) as failure:
        fresh.sweeper.sweep_shard(0, "THOROUGH")
    assert failure.value.start_ts == start and failure.value.row_hex == tcell.row.hex()
    assert failure.value.col_hex == tcell.col.hex() and "What to do" in str(failure.value)
    assert (failure.value.user_table, failure.value.user_row_hex) == ("t", b"r".hex())
    assert "the transaction wrote t row 72 column 63" in str(failure.value)


def test_quarantined_queue_cells_are_reported_with_what_they_pin(store):
    from airflow_atlas.sweep.queue.queue_tables import SWEEPABLE_CELLS, non_dedicated_row

    _put(store, "t", Cell(b"r", b"c"), b"v")
    row = non_dedicated_row(0, 0, False)
    store.history.quarantine(0, "THOROUGH", [{"table": SWEEPABLE_CELLS, "row_hex": row.hex(), "col_hex": "ff",
                                              "reason": "undecodable column", "kind": "undecodable"}])
    report = run_verify(store)
    assert report.ok, "a quarantined cell is a warning"
    (finding,) = [f for f in report.findings if f.kind == "quarantined_queue_entry"]
    assert finding.severity == "warning" and "0..49999" in finding.detail and "legacy full sweep" in finding.action
