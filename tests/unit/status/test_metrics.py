"""StatusCollector (airflow_atlas/status/metrics.py) on a real embedded store: the gauges are the status
document's figures, every name is documented, a scrape is bounded in time and never raises, reads are
shared; and the ``metrics`` command's arguments. The real Prometheus scraping ``atlas-sweep metrics`` is
tests/integration/cli/test_metrics_prometheus.py; the dashboard's /atlas/metrics is in
tests/airflow/test_dashboard_app.py."""
from __future__ import annotations

import re
import threading
import time

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from airflow_atlas.cli import build_parser
from airflow_atlas.cli.metrics import DEFAULT_LISTEN, parse_listen
from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.status import build_status
from airflow_atlas.status.metrics import METRIC_NAMES, PAIR_GAUGES, StatusCollector, status_registry
from airflow_atlas.store import AtlasStore
from airflow_atlas.sweep.targeted import TargetedSweeper
from airflow_atlas.workload import WorkloadSpec, run_workload
from tests.conftest import REPO_ROOT


@pytest.fixture
def store(tmp_path):
    with AtlasStore.open(f"sqlite:///{tmp_path / 'm.db'}", StoreConfig(unreadable_window_seconds=0)) as s:
        s.initialize(shards=2)
        run_workload(s, WorkloadSpec(transactions=30, rows=20, seed=4))
        yield s


def scrape(collector: StatusCollector) -> dict:
    text = generate_latest(status_registry(collector)).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text) for s in family.samples
    }


def test_the_gauges_are_the_status_documents_figures(store):
    lease = store.locks.acquire(TargetedSweeper.lock_name(1, "THOROUGH"), "holder-on-host:1", 600)
    assert lease is not None
    collector = StatusCollector(lambda: store, max_age_seconds=0)
    got = scrape(collector)
    want = build_status(store, backlog_cap=collector.backlog_cap)
    collector.close()
    assert got[("atlas_status_up", ())] == 1
    assert got[("atlas_store_shards", ())] == 2
    assert {name for name, _ in got} <= set(METRIC_NAMES)
    for row in want.shards:
        labels = (("shard", str(row.shard)), ("strategy", row.strategy))
        assert got[("atlas_sweep_progress_ts", labels)] == row.progress
        assert got[("atlas_sweep_backlog_entries", labels)] == row.backlog_entries
        assert got[("atlas_sweep_failing_runs", labels)] == 0
        held = (row.shard, row.strategy) == (1, "THOROUGH")
        assert got[("atlas_sweep_lock_held", labels)] == int(held)
        holder = tuple(sorted(labels + (("holder", "holder-on-host:1"),)))
        assert (("atlas_sweep_lock_holder_info", holder) in got) == held
        assert (("atlas_sweep_lock_expires_in_seconds", labels) in got) == held
    assert sum(r.backlog_entries for r in want.shards) > 0
    assert 590 < got[("atlas_sweep_lock_expires_in_seconds", (("shard", "1"), ("strategy", "THOROUGH")))] <= 600
    for strategy in ("CONSERVATIVE", "THOROUGH"):
        assert got[("atlas_sweep_backlog_total_entries", (("strategy", strategy),))] == want.totals[strategy]["backlog_entries"]
        assert got[("atlas_sweep_failing_pairs", (("strategy", strategy),))] == 0


def test_every_metric_name_is_documented_and_every_documented_name_exists():
    doc = (REPO_ROOT / "docs" / "METRICS.md").read_text()
    section = doc.split("## Prometheus gauges", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(atlas_[a-z_]+)` \|", section, re.M)  # the tables' first column
    assert sorted(documented) == sorted(METRIC_NAMES)
    mentioned = set(re.findall(r"\b(atlas_(?:sweep|status|store|compaction)_[a-z_]+)", section))
    assert mentioned <= set(METRIC_NAMES), mentioned - set(METRIC_NAMES)
    assert len(set(METRIC_NAMES)) == len(METRIC_NAMES)
    for name in METRIC_NAMES:  # the unit (or what is counted) is in the name
        assert re.search(r"_(seconds|entries|ts|per_second|up|held|capped|gone|bound|runs|pairs|shards|cells|info|"
                         r"outpaces_sweep|tombstones|due)$", name), name
    assert all(g.help.endswith(".") for g in PAIR_GAUGES)


def test_a_slow_read_is_bounded_and_shared_and_serves_a_later_scrape(store):
    release = threading.Event()
    opened = []

    def slow_store():
        opened.append(1)
        release.wait(30)
        return store

    collector = StatusCollector(slow_store, timeout_seconds=0.3, max_age_seconds=60)
    try:
        started = time.monotonic()
        results = []
        scrapes = [threading.Thread(target=lambda: results.append(scrape(collector))) for _ in range(3)]
        for t in scrapes:
            t.start()
        for t in scrapes:
            t.join(10)
        assert time.monotonic() - started < 5
        assert [r[("atlas_status_up", ())] for r in results] == [0, 0, 0]
        assert len(opened) == 1  # one read at a time: the waiting scrapes joined it
        release.set()
        deadline = time.monotonic() + 20
        while scrape(collector)[("atlas_status_up", ())] != 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert len(opened) == 1  # the slow read, finished, served the later scrape
    finally:
        release.set()
        collector.close()


def test_a_failing_read_says_status_up_0_and_names_the_store_to_reopen(store):
    bad = object()  # not a store: build_status fails on it
    discarded = []
    collector = StatusCollector(lambda: bad, on_error=discarded.append, max_age_seconds=0)
    got = scrape(collector)
    collector.close()
    assert got[("atlas_status_up", ())] == 0 and discarded == [bad]
    assert not any(name.startswith("atlas_sweep_") for name, _ in got)

    def unopenable():
        raise OSError("no route to host")

    collector = StatusCollector(unopenable, on_error=discarded.append)
    assert scrape(collector)[("atlas_status_up", ())] == 0 and discarded == [bad]
    collector.close()


@pytest.mark.parametrize("options, message", [
    ({"backlog_cap": 0}, "backlog_cap"),
    ({"history_limit": 0}, "history_limit"),
    ({"timeout_seconds": 0}, "timeout_seconds"),
    ({"window_seconds": float("inf")}, "window_seconds"),
    ({"max_age_seconds": -1}, "max_age_seconds"),
])
def test_bad_options_are_refused_early(options, message):
    with pytest.raises(InvalidInputError, match=message):
        StatusCollector(lambda: None, **options)


def test_listen_addresses():
    assert parse_listen(DEFAULT_LISTEN) == ("127.0.0.1", 9464)
    assert parse_listen("[::1]:0") == ("::1", 0)
    assert parse_listen("0.0.0.0:9100") == ("0.0.0.0", 9100)
    for bad in ("9100", ":9100", "host:port", "127.0.0.1:70000"):
        with pytest.raises(ValueError):
            parse_listen(bad)
    args = build_parser().parse_args(["metrics", "--store", "sqlite:////x.db"])
    assert args.listen == ("127.0.0.1", 9464) and not args.once


def test_a_bad_listen_address_is_a_usage_error(capsys):
    from airflow_atlas.cli import main

    assert main(["metrics", "--store", "sqlite:////nonexistent.db", "--listen", "nowhere"]) == 2
    err = capsys.readouterr().err
    assert "--listen" in err and "HOST:PORT" in err and len(err.strip().splitlines()) == 1


def test_the_compaction_gauges_are_the_documents_and_the_threshold_only_when_known(store):
    for shard in range(2):
        for strategy in ("CONSERVATIVE", "THOROUGH"):
            store.sweeper.sweep_shard(shard, strategy)
    want = {t.table: t for t in build_status(store, compaction_threshold=1).compaction}
    assert want and any(t.tombstones_since_compaction for t in want.values())
    collector = StatusCollector(lambda: store, max_age_seconds=0, compaction_threshold=lambda: 1)
    got = scrape(collector)
    collector.close()
    assert got[("atlas_compaction_threshold_tombstones", ())] == 1
    for table, t in want.items():
        labels = (("table", table),)
        assert got[("atlas_compaction_pending_tombstones", labels)] == t.tombstones_since_compaction
        assert got[("atlas_compaction_pending_capped", labels)] == 0
        assert got[("atlas_compaction_due", labels)] == int(t.tombstones_since_compaction >= 1)
        assert ("atlas_compaction_last_timestamp_seconds", labels) not in got  # never compacted
    collector = StatusCollector(lambda: store, max_age_seconds=0)  # `atlas-sweep metrics --store`: not known
    got = scrape(collector)
    collector.close()
    assert ("atlas_compaction_threshold_tombstones", ()) not in got
    assert not [k for k in got if k[0] == "atlas_compaction_due"]
    assert {k[1] for k in got if k[0] == "atlas_compaction_pending_tombstones"} == {(("table", t),) for t in want}
