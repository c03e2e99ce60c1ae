"""Compaction counts from the store (issue 21 item 3), on the embedded store and the real Cassandra node:
every sweep step records the tombstones it wrote per table in the sweep history, every compaction records
itself there, and "tombstones since the last compaction" is derived from those records - never from what
Airflow was told. Nothing here involves Airflow: these are the sweeps whose task results never reached it.

The compactor is the engine's own ``Compactor`` protocol: VACUUM on the embedded store; on Cassandra (no
nodetool here: that path is tests/airflow/dags/test_atlas_compaction.py) :class:`Recording`, which
compacts nothing physically and records which tables it was asked to compact and when."""
from __future__ import annotations

import threading

from airflow_atlas.compaction import TableCompaction, VacuumCompactor, compact_due_tables, tombstones_since_compaction
from airflow_atlas.serialisation import to_json
from airflow_atlas.sweep.history import SweepHistory

from .helpers import THOR, cell


class Recording:
    """A Compactor: records the tables it compacts; ``during`` runs inside compact() (e.g. a sweep or a
    second compaction at once)."""

    method = "recording"

    def __init__(self, store, during=None):
        self._vacuum = VacuumCompactor(store.kvs) if store.kvs.backend == "sqlite" else None
        self.during = during
        self.compacted: list[str] = []
        self._lock = threading.Lock()

    def guard(self, table):
        from airflow_atlas.compaction import GuardVerdict

        return GuardVerdict(True, "test")

    def compact(self, tables):
        with self._lock:
            self.compacted.extend(tables)
        if self.during is not None:
            self.during()
        if self._vacuum is not None:
            return self._vacuum.compact(tables)
        return {t: TableCompaction(None, None, 0, 0.0, "recording") for t in tables}


def _count(store, table) -> int:
    return tombstones_since_compaction(store, [table])[table].count


def _overwrite_and_sweep(h, table, rows=20) -> int:
    """Write ``rows`` cells twice, sweep every pair (the engine directly); returns the tombstones written."""
    for round_ in range(2):
        h.write(table, {cell(i): f"v{round_}".encode() for i in range(rows)})
    h.settle()
    _, results = h.sweep_all()
    return sum(r.tables.get(table, 0) for r in results)


def test_every_sweep_is_counted_and_a_compaction_restarts_the_count(harness):
    h = harness
    t = h.table(THOR)
    assert _count(h.store, t) == 0
    first = _overwrite_and_sweep(h, t)
    assert first >= 20
    assert _count(h.store, t) == first
    second = _overwrite_and_sweep(h, t)
    assert _count(h.store, t) == first + second  # a second sweep adds, nothing was lost between runs

    compactor = Recording(h.store)
    below = compact_due_tables(h.store, compactor, threshold=10 * (first + second), tables=[t])
    assert below.compacted == {} and below.pending == {t: first + second} and compactor.compacted == []
    result = compact_due_tables(h.store, compactor, threshold=first + second, tables=[t], store_conn_id="s")
    assert set(result.compacted) == {t} and result.pending == {t: 0}
    assert _count(h.store, t) == 0
    last = tombstones_since_compaction(h.store, [t])[t].last_compaction
    assert last is not None and last["method"] == "recording" and last["store_conn_id"] == "s"
    third = _overwrite_and_sweep(h, t)
    assert _count(h.store, t) == third  # restarts from zero, counts what came after


def test_a_run_that_crashed_after_its_deletes_is_counted_when_redone(harness):
    """A run that dies between its deletes and their record (here: the record fails) persists no progress:
    the next run writes those tombstones again and counts them. Over-count possible, under-count never."""
    h = harness
    t = h.table(THOR)
    for round_ in range(2):
        h.write(t, {cell(i): f"v{round_}".encode() for i in range(20)})
    h.settle()

    class LostRecord(SweepHistory):
        def record_tombstones(self, tables, ts, source):
            raise ConnectionError("the worker died here")

    real = h.store.history
    h.store.__dict__["history"] = LostRecord(h.store.kvs)
    crashed = 0
    try:
        for shard in range(h.shards):
            try:
                h.store.sweeper.sweep_shard(shard, THOR)
            except ConnectionError:
                crashed += 1
    finally:
        h.store.__dict__["history"] = real
    assert crashed >= 1
    assert _count(h.store, t) == 0
    _, results = h.sweep_all()
    redone = sum(r.tables.get(t, 0) for r in results)
    assert redone >= 20 and _count(h.store, t) == redone


def test_a_full_sweep_and_a_scrub_are_counted(harness):
    h = harness
    t = h.table(THOR)
    for round_ in range(3):
        h.write(t, {cell(i): f"v{round_}".encode() for i in range(10)})
    h.settle()
    full = h.store.legacy_sweeper.sweep_table(t)
    assert full.counts.versions_deleted >= 20
    assert _count(h.store, t) == full.counts.versions_deleted

    hard = h.store.transactions.begin(hard_delete=True)
    hard.delete(t, [cell(0), cell(1)])
    hard.commit()
    h.settle()
    scrubbed = h.store.scrubber.scrub()
    assert scrubbed.tables.get(t, 0) >= 2
    assert _count(h.store, t) == full.counts.versions_deleted + scrubbed.tables[t]


def test_tombstones_written_while_a_compaction_runs_are_counted_for_the_next(harness):
    h = harness
    t = h.table(THOR)
    before = _overwrite_and_sweep(h, t)
    during: list[int] = []
    compactor = Recording(h.store, during=lambda: during.append(_overwrite_and_sweep(h, t)))
    result = compact_due_tables(h.store, compactor, threshold=before, tables=[t])
    assert set(result.compacted) == {t} and during and during[0] >= 20
    assert _count(h.store, t) == during[0] == result.pending[t]


def test_two_compactions_at_once_compact_a_table_once_and_lose_nothing(harness):
    """The second compaction, started while the first compacts, skips the table (its lease is held); after
    both, the count is what was written since the first began - not doubled, not lost."""
    h = harness
    t = h.table(THOR)
    written = _overwrite_and_sweep(h, t)
    second: list = []
    second_compactor = Recording(h.store)

    def run_second():
        second.append(compact_due_tables(h.store, second_compactor, threshold=1, tables=[t], holder="second"))

    def during_first():
        thread = threading.Thread(target=run_second)
        thread.start()
        thread.join(timeout=60)

    first_compactor = Recording(h.store, during=during_first)
    first = compact_due_tables(h.store, first_compactor, threshold=written, tables=[t], holder="first")
    assert set(first.compacted) == {t} and first_compactor.compacted == [t]
    assert second and second[0].compacted == {} and second_compactor.compacted == []
    assert "another compaction holds compaction/" in second[0].skipped[t], second[0].skipped
    assert _count(h.store, t) == 0
    after = compact_due_tables(h.store, second_compactor, threshold=1, tables=[t])
    assert after.compacted == {}  # the first one's record holds: nothing left to compact

    # Many planners at once (threads racing, none blocked): each table is compacted exactly once.
    more = _overwrite_and_sweep(h, t)
    assert _count(h.store, t) == more
    shared = Recording(h.store)
    results: list = []
    threads = [threading.Thread(target=lambda i=i: results.append(
        compact_due_tables(h.store, shared, threshold=1, tables=[t], holder=f"planner{i}"))) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(results) == 4 and shared.compacted == [t], (shared.compacted, [r.skipped for r in results])
    assert _count(h.store, t) == 0


def test_an_older_compaction_recorded_late_changes_nothing(harness):
    """A compaction whose record arrives after a newer one's (its lease lapsed) neither brings counts back
    nor hides newer ones: the newest ``through_ts`` wins."""
    h = harness
    t = h.table(THOR)
    old_ts = h.store.timestamps.fresh_timestamp()
    first = _overwrite_and_sweep(h, t)
    new_ts = h.store.timestamps.fresh_timestamp()
    h.store.history.record_compaction(t, new_ts, {"method": "test"})
    assert _count(h.store, t) == 0
    h.store.history.record_compaction(t, old_ts, {"method": "test"})
    assert _count(h.store, t) == 0
    second = _overwrite_and_sweep(h, t)
    assert first > 0 and _count(h.store, t) == second


def test_the_status_document_shows_the_count_compaction_plans_from_and_its_restart(harness):
    """Issue 32 item 3: the status document (CLI status, dashboard, Prometheus) shows per table the
    tombstones since the last compaction - the number compact_due_tables plans from - when that compaction
    was and the threshold; after a compaction the count restarts at 0, while recent history still shows
    the tombstones already compacted."""
    import time

    from airflow_atlas.airflow.web.render import render_page
    from airflow_atlas.cli.status import render_status
    from airflow_atlas.status import build_status

    def state(threshold):
        doc = build_status(h.store, compaction_threshold=threshold)
        (row,) = [c for c in doc.compaction if c.table == t]
        return doc, row

    h = harness
    t = h.table(THOR)
    first = _overwrite_and_sweep(h, t)
    assert first >= 20
    doc, row = state(first)
    assert row.tombstones_since_compaction == first == _count(h.store, t)
    assert row.strategy == "THOROUGH" and row.capped is False and row.due is True and row.threshold_tombstones == first
    assert row.last_compaction_at is None and row.last_compaction_through_ts == 0
    assert doc.settings["compaction_threshold_tombstones"] == first
    assert state(first + 1)[1].due is False and state(None)[1].due is None

    started = time.time()
    result = compact_due_tables(h.store, Recording(h.store), threshold=first, tables=[t])
    assert set(result.compacted) == {t}
    doc, row = state(first)
    assert row.tombstones_since_compaction == 0 and row.due is False
    assert row.last_compaction_method == "recording" and row.last_compaction_through_ts > 0
    assert started - 1 <= row.last_compaction_at <= time.time() and row.last_compaction_age_seconds is not None
    assert sum(r.tombstones_written for r in doc.shards) >= first  # recent history still counts the compacted ones

    document = to_json(doc)
    (shown,) = [c for c in document["compaction"] if c["table"] == t]
    assert shown["tombstones_since_compaction"] == 0 and shown["last_compaction_method"] == "recording"
    text = render_status(document)
    assert "Compaction: tombstones since each table's last compaction" in text and f"threshold {first:,}" in text
    section = text.split("Compaction: tombstones since each table's last compaction", 1)[1]
    line = next(x for x in section.splitlines() if x.startswith(t + " "))
    assert line.split()[1:4] == ["THOROUGH", "0", "no"] and "recording" in line
    page = render_page(document)
    assert f'<tr data-table="{t}">' in page
    assert 'data-field="tombstones_since_compaction" data-value="0"' in page.split(f'<tr data-table="{t}">')[1]

    again = _overwrite_and_sweep(h, t)
    assert state(first)[1].tombstones_since_compaction == again == _count(h.store, t)
