"""The sweep dashboard inside Airflow's real API server app (in-process, Starlette TestClient): the plugin
is mounted under /atlas, every route needs an authenticated user (401 without a credential, 403 with a
forged token, 200 with a token or the UI's session cookie), the page and the JSON show what the store
holds, bad parameters give 400, and a broken store gives 503 with the reason.

The page rendering itself (links under a base_url, warnings, the chart) is checked from constructed
status dicts in tests/unit/airflow/web/test_render.py; the browser test drives the whole UI."""
from __future__ import annotations

import re
import time

import pytest

from tests.airflow.conftest import CONN_ID, set_connection

pytestmark = pytest.mark.airflow


@pytest.fixture(scope="module")
def api_app(airflow_home):
    """Airflow's API server app ("core": UI, public API, auth, plugins), started (lifespan run)."""
    from airflow.api_fastapi.app import create_app, get_auth_manager, purge_cached_app
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    app = create_app(apps="core")
    with TestClient(app) as client:
        token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
        yield client, token
    purge_cached_app()


@pytest.fixture
def dashboard(api_app, embedded_store):
    """(client, token, store) with a workload: committed, aborted and dead writers, one open transaction."""
    from airflow_atlas.workload import WorkloadSpec, run_workload

    client, token = api_app
    store, _ = embedded_store
    report = run_workload(store, WorkloadSpec(transactions=40, rows=20, open_transactions=1, seed=3))
    time.sleep(1.2)  # past the 1 s read-only window of the test settings
    yield client, token, store
    for txn in report.open:
        txn.abort()


def _auth(token):
    return {"Authorization": f"Bearer {token}"}


def test_the_plugin_mounts_the_dashboard_and_the_ui_lists_it(api_app):
    client, token = api_app
    mounts = [r.path for r in client.app.routes if type(r).__name__ == "Mount"]
    assert "/atlas" in mounts, f"the airflow_atlas plugin is not mounted (is the package installed? run scripts/bootstrap.sh): {mounts}"
    plugins = client.get("/api/v2/plugins", headers=_auth(token)).json()["plugins"]
    (ours,) = [p for p in plugins if p["name"] == "airflow_atlas"]
    assert ours["external_views"][0]["url_route"] == "atlas" and ours["external_views"][0]["href"] == "/atlas/"


@pytest.mark.parametrize("path", ["/atlas/", "/atlas/api/status", "/atlas/?shards=0", "/atlas/api/status?strategy=THOROUGH",
                                  "/atlas/metrics"])
def test_every_route_needs_an_authenticated_user(api_app, path):
    client, _ = api_app
    assert client.get(path).status_code == 401
    assert client.get(path, headers={"Authorization": "Bearer not-a-token"}).status_code == 403
    assert client.get(path, headers={"Cookie": "_token=forged"}).status_code == 403


def test_status_json_matches_the_store(dashboard):
    from airflow_atlas.status import compute_status

    client, token, store = dashboard
    response = client.get("/atlas/api/status", headers=_auth(token))
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    got = response.json()
    want = compute_status(store)
    assert got["schema_version"] == 1 and got["number_of_shards"] == want["number_of_shards"] == 2
    assert got["tables"] == want["tables"]

    def figures(status):
        return {
            (r["shard"], r["strategy"]): (r["progress"], r["backlog_entries"], r["tombstones_written"], r["lock_holder"])
            for r in status["shards"]
        }

    assert figures(got) == figures(want)
    assert sum(r["backlog_entries"] for r in got["shards"]) > 0
    why = got["why_not_advancing"]["THOROUGH"]
    assert why["limited_by"] == "open_transaction"
    assert why["held_by"]["start_ts"] == want["why_not_advancing"]["THOROUGH"]["held_by"]["start_ts"]
    assert set(got["shards"][0]["forecast"]) >= {"ingest_rate_per_second", "sweep_rate_per_second", "time_to_drain_seconds", "state"}


def test_the_page_shows_the_stores_figures_with_the_session_cookie(dashboard):
    from airflow_atlas.status import compute_status

    client, token, store = dashboard
    response = client.get("/atlas/", headers={"Cookie": f"_token={token}"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    want = compute_status(store)
    for r in want["shards"]:
        row = re.search(rf'<tr data-shard="{r["shard"]}" data-strategy="{r["strategy"]}"[^>]*>(.*?)</tr>', page, re.S)
        assert row, (r["shard"], r["strategy"])
        cells = dict(re.findall(r'data-field="([a-z_]+)" data-value="([^"]*)"', row.group(1)))
        assert int(cells["progress"]) == r["progress"]
        assert int(cells["backlog"]) == r["backlog_entries"]
        assert int(cells["tombstones_written"]) == r["tombstones_written"]
    assert "Why is the sweep timestamp not advancing?" in page and "Backlog drain forecast" in page
    held = want["why_not_advancing"]["THOROUGH"]["held_by"]
    assert f'data-field="held_start_ts" data-value="{held["start_ts"]}"' in page
    assert page.count('<svg class="lag-chart"') == 2
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert 'href="/atlas/api/status"' in page and 'href="/dags/atlas_manual_sweep"' in page


def test_filters_and_bad_parameters(dashboard):
    client, token, _ = dashboard
    got = client.get("/atlas/api/status?shards=1&strategy=thorough", headers=_auth(token)).json()
    assert [(r["shard"], r["strategy"]) for r in got["shards"]] == [(1, "THOROUGH")]
    page = client.get("/atlas/?shards=1&strategy=THOROUGH&refresh=30", headers=_auth(token)).text
    assert '<meta http-equiv="refresh" content="30">' in page and 'href="/atlas/api/status?shards=1&amp;strategy=THOROUGH"' in page
    for query in ("shards=7", "shards=x", "strategy=NOTHING", "window=-1"):
        response = client.get(f"/atlas/api/status?{query}", headers=_auth(token))
        assert response.status_code == 400, (query, response.text)
        assert response.json()["detail"]
    response = client.get("/atlas/?shards=9", headers=_auth(token))
    assert response.status_code == 400 and "out of range" in response.text
    assert client.get("/atlas/?refresh=1", headers=_auth(token)).status_code == 400


def test_a_store_that_cannot_be_opened_gives_503_with_the_reason(api_app, embedded_store, monkeypatch, tmp_path):
    client, token = api_app
    set_connection(monkeypatch, CONN_ID, {"conn_type": "atlas_embedded", "host": "relative/path.db"})
    response = client.get("/atlas/api/status", headers=_auth(token))
    assert response.status_code == 503 and "must be absolute" in response.json()["detail"]
    response = client.get("/atlas/", headers=_auth(token))
    assert response.status_code == 503 and "must be absolute" in response.text


def _scrape(client, token) -> dict:
    """The /atlas/metrics samples as {(name, labels): value}, parsed by prometheus_client's own parser."""
    from prometheus_client.parser import text_string_to_metric_families

    response = client.get("/atlas/metrics", headers=_auth(token))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert response.headers["cache-control"] == "no-store"
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text) for s in family.samples
    }


def test_metrics_show_the_stores_status_as_gauges(dashboard):
    from airflow_atlas.status import compute_status

    client, token, store = dashboard
    time.sleep(1.1)  # past the collector's reuse of a read (SCRAPE_MAX_AGE_SECONDS): this store, read now
    got = _scrape(client, token)
    want = compute_status(store)
    assert got[("atlas_status_up", ())] == 1
    assert got[("atlas_store_shards", ())] == want["number_of_shards"] == 2
    for r in want["shards"]:
        labels = (("shard", str(r["shard"])), ("strategy", r["strategy"]))
        assert got[("atlas_sweep_progress_ts", labels)] == r["progress"]
        assert got[("atlas_sweep_backlog_entries", labels)] == r["backlog_entries"]
        assert got[("atlas_sweep_failing_runs", labels)] == 0
        assert got[("atlas_sweep_lock_held", labels)] == 0
    assert sum(v for (name, _), v in got.items() if name == "atlas_sweep_backlog_entries") > 0
    for strategy, totals in want["totals"].items():
        assert got[("atlas_sweep_backlog_total_entries", (("strategy", strategy),))] == totals["backlog_entries"]


def test_metrics_of_a_store_that_cannot_be_opened_say_status_up_0(api_app, embedded_store, monkeypatch):
    client, token = api_app
    time.sleep(1.1)  # past the collector's reuse of the previous test's read
    set_connection(monkeypatch, CONN_ID, {"conn_type": "atlas_embedded", "host": "relative/path.db"})
    got = _scrape(client, token)
    assert got[("atlas_status_up", ())] == 0
    assert not any(name.startswith("atlas_sweep_") for name, _ in got)


def test_loading_the_plugin_stays_light_for_task_processes():
    """Every task process loads plugins: the dashboard must not pull in the API server's code there."""
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    code = (
        "import sys\nfrom airflow_atlas.airflow.plugin import AtlasPlugin\n"
        "assert AtlasPlugin.fastapi_apps\n"
        "print(sorted(m for m in sys.modules if m.startswith('airflow.api_fastapi.core_api')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("base_url, root", [("http://airflow.example:8080/", ""), ("https://example.org/airflow/", "/airflow"), ("", "")])
def test_links_into_the_ui_follow_the_base_url(monkeypatch, base_url, root):
    from airflow_atlas.airflow.web.app import airflow_root

    monkeypatch.setenv("AIRFLOW__API__BASE_URL", base_url)
    assert airflow_root() == root


def test_the_intensity_setting_is_shown_and_follows_the_variable(dashboard, monkeypatch):
    from tests.airflow.conftest import FAST, set_settings

    client, token, _ = dashboard
    set_settings(monkeypatch, **FAST, sweep_max_entries_per_second=1234)
    got = client.get("/atlas/api/status", headers=_auth(token)).json()
    assert got["settings"]["sweep_max_entries_per_second"] == 1234
    page = client.get("/atlas/", headers={"Cookie": f"_token={token}"}).text
    assert 'data-field="sweep_max_entries_per_second" data-value="1234">1,234 entries/s' in page
    set_settings(monkeypatch, **FAST, sweep_max_entries_per_second=0)
    page = client.get("/atlas/", headers={"Cookie": f"_token={token}"}).text
    assert 'data-field="sweep_max_entries_per_second" data-value="0">unlimited<' in page


def test_the_compaction_state_and_an_unknown_forecast_are_shown(dashboard, monkeypatch):
    """Issue 32 items 3 and 12: per table the tombstones since the last compaction with the Variable's
    threshold (JSON, page, /atlas/metrics), 0 again after a compaction; before any sweep the forecast says
    it does not know the time to drain."""
    from airflow_atlas.compaction import VacuumCompactor, compact_due_tables, tombstones_since_compaction
    from tests.airflow.conftest import FAST, set_settings

    client, token, store = dashboard
    page = client.get("/atlas/", headers={"Cookie": f"_token={token}"}).text
    forecast = re.search(r'<table id="forecast">(.*?)</table>', page, re.S).group(1)
    assert 'data-field="unknown">no sweep run yet: no sweep rate measured, so no time to drain<' in forecast

    for shard in range(store.number_of_shards()):
        for strategy in ("CONSERVATIVE", "THOROUGH"):
            store.sweeper.sweep_shard(shard, strategy)
    counts = {t: c.count for t, c in tombstones_since_compaction(store, sorted(store.user_tables())).items()}
    assert sum(counts.values()) > 0
    threshold = max(counts.values())
    set_settings(monkeypatch, **FAST, compaction_threshold_tombstones=threshold)
    got = client.get("/atlas/api/status", headers=_auth(token)).json()
    assert got["settings"]["compaction_threshold_tombstones"] == threshold
    shown = {c["table"]: c for c in got["compaction"]}
    assert {t: c["tombstones_since_compaction"] for t, c in shown.items()} == counts
    assert {t: c["due"] for t, c in shown.items()} == {t: n >= max(threshold, 1) for t, n in counts.items()}
    page = client.get("/atlas/", headers={"Cookie": f"_token={token}"}).text
    for table, n in counts.items():
        row = re.search(rf'<tr data-table="{table}">(.*?)</tr>', page).group(1)
        assert f'data-field="tombstones_since_compaction" data-value="{n}"' in row
        assert f'data-field="threshold_tombstones" data-value="{threshold}"' in row
    time.sleep(1.1)  # past the collector's reuse of a read
    metrics = _scrape(client, token)
    assert metrics[("atlas_compaction_threshold_tombstones", ())] == threshold
    for table, n in counts.items():
        assert metrics[("atlas_compaction_pending_tombstones", (("table", table),))] == n

    compact_due_tables(store, VacuumCompactor(store.kvs), threshold=threshold)
    after = {c["table"]: c for c in client.get("/atlas/api/status", headers=_auth(token)).json()["compaction"]}
    for table, n in counts.items():
        if n >= threshold:
            assert after[table]["tombstones_since_compaction"] == 0 and after[table]["due"] is False
            assert after[table]["last_compaction_method"] == "vacuum" and after[table]["last_compaction_at"] > 0
