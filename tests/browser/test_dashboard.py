"""The sweep dashboard in a real Airflow, driven by headless Chromium (see conftest.py for the setup).

1. Without logging in, the dashboard's routes answer 401 (no store data leaks through the plugin app).
2. Log in through the UI's login form (admin password from the generated password file), open the
   dashboard at /atlas/ and inside the UI at /plugin/atlas: the figures shown per shard and strategy match
   compute_status on the store; the open transaction of the workload is named as what holds the sweep
   timestamp back.
3. Commit that transaction, trigger atlas_manual_sweep from the UI's trigger form with parameters (shards
   [0, 2], strategy THOROUGH, maximum batches 50), wait for the run to succeed (REST API with a token),
   reload the dashboard: the chosen pairs advanced and have no backlog, every other pair is unchanged;
   the sweep's metrics reached the StatsD socket of the test (Airflow's [metrics] statsd_on).

Screenshots go to test-artifacts/browser/.
"""
from __future__ import annotations

import time
from urllib.parse import unquote

import pytest

from tests.browser.conftest import ARTIFACTS, SHARDS, STORE_CONFIG

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

CHOSEN_SHARDS = [0, 2]
CHOSEN_STRATEGY = "THOROUGH"
RUN_TIMEOUT = 240.0


@pytest.fixture(scope="module")
def store(airflow_server):
    from airflow_atlas.config import StoreConfig
    from airflow_atlas.kvs.sqlite import SqliteKeyValueService
    from airflow_atlas.store import AtlasStore

    s = AtlasStore(SqliteKeyValueService(str(airflow_server.store_path)), StoreConfig(**STORE_CONFIG, initial_shards=SHARDS))
    s.initialize(shards=SHARDS)
    yield s
    s.close()


@pytest.fixture(scope="module")
def workload(store):
    """Committed, aborted and dead-writer transactions on both strategies, and one transaction left open
    (it holds both sweep timestamps back)."""
    from airflow_atlas.workload import WorkloadSpec, run_workload

    report = run_workload(store, WorkloadSpec(transactions=120, rows=40, open_transactions=1, seed=11))
    time.sleep(STORE_CONFIG["unreadable_window_seconds"] + 0.5)
    yield report
    for txn in report.open:
        try:
            txn.abort()
        except Exception:
            pass


@pytest.fixture(scope="module")
def page(browser, airflow_server):
    """A page logged in through the UI's login form."""
    p = browser.new_page()
    p.goto(airflow_server.base_url + "/")
    p.wait_for_url("**/auth/login**")
    p.get_by_label("Username").fill("admin")
    p.get_by_label("Password").fill(airflow_server.admin_password)
    p.get_by_role("button", name="Sign in").click()
    p.wait_for_url(lambda url: "/auth/login" not in url)
    return p


# ----- helpers -----------------------------------------------------------------------------------------------
ROWS_JS = """rows => rows.map(r => {
    const out = {_shard: Number(r.dataset.shard), _strategy: r.dataset.strategy};
    r.querySelectorAll('td[data-field]').forEach(td => {
        out[td.dataset.field] = {value: td.dataset.value ?? null, text: td.innerText.trim()};
    });
    return out;
})"""


def shown_rows(frame) -> dict[tuple[int, str], dict]:
    """The dashboard's shard table as shown: {(shard, strategy): {field: {"value", "text"}}}."""
    frame.wait_for_selector("#shards tbody tr[data-shard]")
    return {(r["_shard"], r["_strategy"]): r for r in frame.eval_on_selector_all("#shards tbody tr[data-shard]", ROWS_JS)}


def assert_matches_store(rows: dict, status: dict) -> None:
    """Every pair of the store is shown with the store's progress, backlog, tombstones and lock holder."""
    want = {(r["shard"], r["strategy"]): r for r in status["shards"]}
    assert set(rows) == set(want)
    for key, r in want.items():
        got = rows[key]
        assert int(got["progress"]["value"]) == r["progress"], key
        assert got["progress"]["text"].replace(",", "") == str(r["progress"]), key
        assert int(got["backlog"]["value"]) == r["backlog_entries"], key
        assert got["backlog"]["text"] == f"{r['backlog_entries']:,}", key
        assert int(got["tombstones_written"]["value"]) == r["tombstones_written"], key
        assert (got["lock_holder"]["value"] or None) == r["lock_holder"], key
        assert (got["last_run"]["value"] or None) == (r["last_run"] or {}).get("status"), key


def screenshot(p, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    p.screenshot(path=str(ARTIFACTS / name), full_page=True)


# ----- tests -------------------------------------------------------------------------------------------------
def test_without_logging_in_the_dashboard_shows_nothing(browser, airflow_server):
    cookies = browser.cookies()
    browser.clear_cookies()
    p = browser.new_page()
    try:
        for path in ("/atlas/", "/atlas/api/status"):
            response = p.goto(airflow_server.base_url + path)
            assert response.status == 401, (path, response.status)
            assert "data-shard" not in p.content()
    finally:
        p.close()
        browser.add_cookies(cookies)


def test_the_dashboard_shows_what_the_store_holds(page, airflow_server, store, workload):
    from airflow_atlas.status import compute_status

    page.goto(airflow_server.base_url + "/atlas/")
    rows = shown_rows(page)
    status = compute_status(store)
    assert_matches_store(rows, status)
    assert sum(r["backlog_entries"] for r in status["shards"]) > 0
    assert all(int(r["progress"]["value"]) == -1 for r in rows.values())  # nothing swept yet
    # Why the sweep timestamp is not advancing: the workload's open transaction, named with its start.
    (open_txn,) = workload.open
    why = page.locator(f'.why[data-strategy="{CHOSEN_STRATEGY}"]')
    assert why.locator('[data-field="held_kind"]').inner_text() == "open transaction"
    assert why.locator('[data-field="held_start_ts"]').get_attribute("data-value") == str(open_txn.start_timestamp)
    assert "held back by open transaction" in why.locator('[data-field="message"]').inner_text()
    # The forecast has a row per pair; the lag charts one line per shard.
    assert page.locator("#forecast tbody tr[data-shard]").count() == 2 * SHARDS
    assert page.locator(f'svg.lag-chart[data-strategy="{CHOSEN_STRATEGY}"] polyline').count() == SHARDS
    screenshot(page, "01-dashboard-before-sweep.png")


def test_the_ui_embeds_the_dashboard(page, airflow_server, store, workload):
    from airflow_atlas.status import compute_status

    page.goto(airflow_server.base_url + "/plugin/atlas")
    page.frame_locator("iframe").locator("#shards tbody tr[data-shard]").first.wait_for()  # loaded
    frame = page.query_selector("iframe").content_frame()
    assert frame is not None and frame.url.endswith("/atlas/"), frame and frame.url
    rows = shown_rows(frame)
    assert_matches_store(rows, compute_status(store))
    assert page.get_by_role("button", name="Browse").count() >= 1  # inside the Airflow UI's frame
    screenshot(page, "02-dashboard-in-airflow-ui.png")


def test_trigger_manual_sweep_from_the_form_and_see_the_dashboard_change(page, airflow_server, store, workload):
    from airflow_atlas.status import compute_status

    page.goto(airflow_server.base_url + "/atlas/")
    before = shown_rows(page)
    for txn in workload.open:  # the transaction finishes: nothing holds the sweep timestamps back any more
        txn.commit()
    workload.open.clear()

    # The trigger form, filled in.
    page.goto(airflow_server.base_url + "/dags/atlas_manual_sweep")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    dialog.locator("#element_shards .view-line").first.click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Backspace")
    page.keyboard.insert_text(str(CHOSEN_SHARDS))  # one edit: the JSON field reformats on every valid change
    assert dialog.locator("#element_shards .view-lines").inner_text().replace("\xa0", " ").split() == ["[", "0,", "2", "]"]
    dialog.locator("#element_strategy").click()
    page.get_by_role("option", name=CHOSEN_STRATEGY, exact=True).click()
    dialog.get_by_label("Maximum batches").fill("50")
    screenshot(page, "03-trigger-form.png")
    dialog.get_by_role("button", name="Trigger").click()
    page.wait_for_url("**/dags/atlas_manual_sweep/runs/**")
    run_id = unquote(page.url.split("/runs/", 1)[1].split("/")[0].split("?")[0])

    # The run, through the REST API: created with the form's values, then successful.
    run = _wait_for_run(airflow_server, run_id)
    assert run["conf"]["shards"] == CHOSEN_SHARDS
    assert run["conf"]["strategy"] == CHOSEN_STRATEGY and run["conf"]["max_batches"] == 50

    # The dashboard changed: the chosen pairs advanced and drained, every other pair is as it was.
    page.goto(airflow_server.base_url + "/atlas/")
    after = shown_rows(page)
    status = compute_status(store)
    assert_matches_store(after, status)
    for key, row in after.items():
        shard, strategy = key
        if shard in CHOSEN_SHARDS and strategy == CHOSEN_STRATEGY:
            assert int(row["progress"]["value"]) > int(before[key]["progress"]["value"]), key
            assert int(row["backlog"]["value"]) == 0, key
            assert row["last_run"]["value"] == "caught_up", key
            assert page.locator(f'#shards tr[data-shard="{shard}"][data-strategy="{strategy}"] [data-field="outcome"]').inner_text() == "ok"
        else:
            assert row["progress"]["value"] == before[key]["progress"]["value"], key
            assert row["last_run"]["value"] is None, key
    assert sum(int(after[(s, CHOSEN_STRATEGY)]["tombstones_written"]["value"]) for s in CHOSEN_SHARDS) > 0
    why = page.locator(f'.why[data-strategy="{CHOSEN_STRATEGY}"]')
    assert why.locator('[data-field="limited_by"]').inner_text() == "none"
    for shard in CHOSEN_SHARDS:  # a recorded run: a point more on its line of the chart
        points = page.locator(f'svg.lag-chart[data-strategy="{CHOSEN_STRATEGY}"] polyline[data-shard="{shard}"]').get_attribute("points")
        assert len(points.split()) >= 2, points
    screenshot(page, "04-dashboard-after-sweep.png")

    # The sweep task processes sent their metrics through Airflow's StatsD client (docs/METRICS.md).
    lines = airflow_server.statsd_lines()
    for shard in CHOSEN_SHARDS:
        assert f"airflow.atlas.sweep.thorough.{shard}.shard_runs.caught_up:1|c" in lines, lines[:40]
        assert f"airflow.atlas.sweep.thorough.{shard}.backlog:0|g" in lines, lines[:40]
    assert not [line for line in lines if ".thorough.1." in line or ".thorough.3." in line or ".conservative." in line]


def _wait_for_run(server, run_id: str) -> dict:
    deadline = time.monotonic() + RUN_TIMEOUT
    run = None
    while time.monotonic() < deadline:
        server.check_alive()
        r = server.api("GET", f"/api/v2/dags/atlas_manual_sweep/dagRuns/{run_id}")
        assert r.status_code == 200, r.text
        run = r.json()
        if run["state"] in ("success", "failed"):
            break
        time.sleep(2.0)
    if run is None or run["state"] != "success":
        tis = server.api("GET", f"/api/v2/dags/atlas_manual_sweep/dagRuns/{run_id}/taskInstances").json()
        states = {(t["task_id"], t["map_index"]): t["state"] for t in tis.get("task_instances", [])}
        pytest.fail(f"run {run_id} did not succeed within {RUN_TIMEOUT:.0f}s: {run and run['state']}; tasks: {states}\n"
                    f"{server.log_tails()}")
    return run
