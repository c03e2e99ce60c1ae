"""A real Prometheus scrapes the plugin's ``/atlas/metrics`` in Airflow's real API server app (served by
uvicorn on 127.0.0.1 in this process) with a bearer token from the auth manager, as docs/METRICS.md tells
operators to; without the token its scrape is refused (``up`` 0). The figures are the status document's.
The in-process routes (401/403, figures, a broken store) are in test_dashboard_app.py."""
from __future__ import annotations

import threading
import time

import pytest

from tests.integration.cli.test_metrics_prometheus import _by_pair, _free_port, prometheus, wait_for  # noqa: F401

pytestmark = pytest.mark.airflow


@pytest.fixture
def api_server(airflow_home):
    """Airflow's API server app ("core") served by uvicorn on 127.0.0.1 (stopped after the test);
    yields (port, token)."""
    import uvicorn
    from airflow.api_fastapi.app import create_app, get_auth_manager, purge_cached_app
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    purge_cached_app()
    app = create_app(apps="core")
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on", log_level="warning"))
    thread = threading.Thread(target=server.run, name="test-api-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the API server did not start"
        time.sleep(0.1)
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
    yield port, token
    server.should_exit = True
    thread.join(30)
    purge_cached_app()


def test_prometheus_scrapes_the_plugins_metrics_with_a_token(api_server, embedded_store, prometheus):  # noqa: F811
    from airflow_atlas.status import compute_status
    from airflow_atlas.workload import WorkloadSpec, run_workload

    store, _ = embedded_store
    run_workload(store, WorkloadSpec(transactions=30, rows=20, seed=8))
    port, token = api_server
    query, log = prometheus(port, metrics_path="/atlas/metrics", token=token)
    assert wait_for(query, "atlas_status_up == 1", log)
    want = compute_status(store)
    backlog = _by_pair(wait_for(query, "atlas_sweep_backlog_entries", log))
    assert backlog == {(r["shard"], r["strategy"]): r["backlog_entries"] for r in want["shards"]}
    assert sum(backlog.values()) > 0


def test_prometheus_without_a_token_is_refused(api_server, embedded_store, prometheus):  # noqa: F811
    port, _ = api_server
    query, log = prometheus(port, metrics_path="/atlas/metrics")
    (up,) = wait_for(query, 'up{job="atlas"}', log)
    assert float(up["value"][1]) == 0
    assert query("atlas_status_up") == []
