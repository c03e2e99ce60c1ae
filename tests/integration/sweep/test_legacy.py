"""Legacy sweep (issue 4 section 5): on a workload of overwrites, deletes, aborts and dead writers,
scan-based sweep of every table keeps what every protected reader sees, leaves no obsolete version, and
leaves exactly the versions targeted sweep leaves on an identical workload."""
from __future__ import annotations

from airflow_atlas.kvs.api import SENTINEL_TIMESTAMP
from airflow_atlas.workload import WorkloadSpec, run_workload

from .helpers import CONS, THOR


def _workload(h, prefix: str, seed: int = 11):
    tables = {h.table(CONS, prefix): "CONSERVATIVE", h.table(THOR, prefix): "THOROUGH"}
    spec = WorkloadSpec(
        transactions=60,
        writes_per_transaction=(1, 6),
        tables=tables,
        rows=15,
        columns=2,
        delete_ratio=0.25,
        dead_writer_ratio=0.1,
        abort_ratio=0.1,
        seed=seed,
    )
    report = run_workload(h.store, spec)
    assert report.dead_writers > 0 and report.deletes > 0
    return list(tables)


def _legacy_sweep_all(h, tables, batch_size: int = 7) -> dict[str, int]:
    used = {CONS.value: 0, THOR.value: 0}
    for table in tables:
        r = h.store.legacy_sweeper.sweep_table(table, batch_size=batch_size)
        assert r.finished
        used[r.strategy] = max(used[r.strategy], r.sweep_ts)
    return used


def _structure(h, tables) -> dict:
    """Per (table position, cell): the remaining versions in timestamp order, as (sentinel?, value)."""
    out = {}
    for position, table in enumerate(tables):
        for c, ts, value in h.store.kvs.scan(table):
            out.setdefault((position, c), []).append((ts, value))
    return {key: [(ts == SENTINEL_TIMESTAMP, v) for ts, v in sorted(vs)] for key, vs in out.items()}


def test_legacy_sweep_keeps_visible_data_and_leaves_nothing_obsolete(harness):
    h = harness
    tables = _workload(h, "lg")
    h.read_only_reader()
    h.settle()
    before = h.observe(tables)
    used = _legacy_sweep_all(h, tables)
    h.check(before, used)
    h.assert_no_obsolete(used, tables)
    # Sweeping again finds nothing more to delete.
    again = [h.store.legacy_sweeper.sweep_table(t, batch_size=5) for t in tables]
    assert sum(r.counts.versions_deleted for r in again) == 0


def test_targeted_and_legacy_leave_the_same_versions(new_harness):
    legacy = new_harness()
    legacy_tables = _workload(legacy, "lg", seed=23)
    legacy.settle()
    used = _legacy_sweep_all(legacy, legacy_tables, batch_size=3)
    legacy.assert_no_obsolete(used, legacy_tables)
    legacy_left = _structure(legacy, legacy_tables)

    targeted = new_harness()
    targeted_tables = _workload(targeted, "tg", seed=23)
    targeted.settle()
    ts, _ = targeted.sweep_all(batch_limit=5)
    targeted.assert_no_obsolete(ts, targeted_tables)
    targeted_left = _structure(targeted, targeted_tables)

    assert len(legacy_left) > 20
    assert any(v[0] == (True, b"") for (position, _), v in legacy_left.items() if position == 0)
    assert any(v == [(True, b""), (False, b"")] for (position, _), v in legacy_left.items() if position == 0)
    assert legacy_left.keys() == targeted_left.keys()
    differ = {k: (legacy_left[k], targeted_left[k]) for k in legacy_left if legacy_left[k] != targeted_left[k]}
    assert not differ, f"{len(differ)} cells differ (legacy, targeted): {list(differ.items())[:5]}"
