"""The dashboard's FastAPI app, mounted by the plugin under ``/atlas`` in the Airflow API server.

Routes (all need an authenticated Airflow user: the API server's own ``requires_authenticated``
dependency, so the UI's session cookie or an ``Authorization: Bearer <token>`` from ``POST /auth/token``;
without one: 401, with an invalid token: 403):

* ``GET /`` - the dashboard page (HTML, see :mod:`.render`);
* ``GET /api/status`` - the same data as JSON: the status document (:func:`airflow_atlas.status.build_status`)
  with the effective settings and their sources (``effective_settings``, ``settings_warnings``:
  :meth:`AtlasSettings.effective`, :meth:`AtlasSettings.warnings`).
* ``GET /metrics`` - the same figures as Prometheus gauges (:mod:`.metrics`, docs/METRICS.md).

Query parameters of the page and the JSON: ``shards`` (``0,2,5``; default all), ``strategy`` (``CONSERVATIVE``,
``THOROUGH`` or ``ALL``), ``window`` (seconds over which rates are measured, default 3600); the page also
takes ``refresh`` (reload every N seconds, 5..3600). Bad values: 400 naming the problem. A store or
settings problem: 503 with the message (the page shows it).

The store is the one of the ``atlas_settings`` Variable's ``store_conn_id`` (read at each request, so a
change applies at once), opened through :class:`~airflow_atlas.airflow.hooks.atlas.AtlasHook` with the
engine settings the sweeps use, and kept open between requests (reopened when the connection or the
settings change, or after an error).

Why the routes are added when the app starts (its lifespan, which the API server runs for every plugin
app) rather than in :func:`create_app`: the plugin module, and so :func:`create_app`, is imported by every
Airflow process that loads plugins - each task process included - while the authentication dependency
lives in the API server's code (``airflow.api_fastapi.core_api.security``), a heavy import only the API
server needs. Until the app has started it has no route at all (404), so nothing is ever served
unauthenticated.
"""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlparse

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.serialisation import to_json

from .render import render_error, render_page
from .shared import NO_STORE, StoreCache

log = logging.getLogger(__name__)


# ----- app ------------------------------------------------------------------------------------------------
def create_app() -> FastAPI:
    """The dashboard app (cheap to build: no route until it starts, see the module doc)."""
    app = FastAPI(
        title="Atlas sweep dashboard",
        lifespan=_lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.atlas_stores = StoreCache()
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    install_routes(app)
    # A collector per start of the app: the one of an earlier start was closed when that start ended (the
    # same app object serves again when its server is started again, e.g. in one test process).
    from .metrics import attach_metrics

    attach_metrics(app, app.state.atlas_stores)
    try:
        yield
    finally:
        collector = getattr(app.state, "atlas_metrics_collector", None)
        if collector is not None:
            collector.close()
        app.state.atlas_stores.close()


def install_routes(app: FastAPI) -> None:
    """Add the routes, each behind the API server's authentication (idempotent)."""
    if getattr(app.state, "atlas_routes_installed", False):
        return
    from airflow.api_fastapi.core_api.security import requires_authenticated

    authenticated = [Depends(requires_authenticated())]
    app.add_api_route("/", dashboard_page, methods=["GET"], dependencies=authenticated, response_class=HTMLResponse,
                      name="atlas_dashboard")
    app.add_api_route("/api/status", status_json, methods=["GET"], dependencies=authenticated, name="atlas_status")
    from .metrics import metrics_route

    app.add_api_route("/metrics", metrics_route, methods=["GET"], dependencies=authenticated, name="atlas_metrics")
    app.state.atlas_routes_installed = True


# ----- routes (sync: FastAPI runs them in its thread pool, the store calls block) ---------------------------
def dashboard_page(
    request: Request,
    shards: str | None = None,
    strategy: str | None = None,
    window: float | None = None,
    refresh: int | None = None,
) -> HTMLResponse:
    app_root = _app_root(request)
    try:
        if refresh is not None and not 5 <= refresh <= 3600:
            raise InvalidInputError(f"refresh must be between 5 and 3600 seconds, got {refresh}")
        status = _compute(request, shards, strategy, window)
    except InvalidInputError as exc:
        return HTMLResponse(render_error("Bad request", str(exc), app_root=app_root), status_code=400, headers=NO_STORE)
    except HTTPException as exc:
        return HTMLResponse(render_error("Store unavailable", str(exc.detail), app_root=app_root),
                            status_code=exc.status_code, headers=NO_STORE)
    query = {"shards": shards, "strategy": strategy, "window": window}
    page = render_page(status, app_root=app_root, airflow_root=airflow_root(), query=query, refresh_seconds=refresh)
    return HTMLResponse(page, headers=NO_STORE)


def status_json(
    request: Request,
    shards: str | None = None,
    strategy: str | None = None,
    window: float | None = None,
) -> JSONResponse:
    try:
        status = _compute(request, shards, strategy, window)
    except InvalidInputError as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from None
    return JSONResponse(status, headers=NO_STORE)


def _compute(request: Request, shards: str | None, strategy: str | None, window: float | None) -> dict:
    """compute_status on the configured store; InvalidInputError for bad parameters, HTTPException(503)
    for a settings or store problem."""
    from airflow_atlas.status import DEFAULT_WINDOW_SECONDS, build_status
    from airflow_atlas.status.compaction import threshold_of

    shard_list = parse_shards(shards)
    strategies = parse_strategy(strategy)
    if window is not None and not window > 0:
        raise InvalidInputError(f"window must be a positive number of seconds, got {window}")
    cache: StoreCache = request.app.state.atlas_stores
    try:
        store, effective, settings_warnings = cache.get_with_settings()
    except Exception as exc:
        log.warning("atlas dashboard: cannot open the store: %s", exc)
        raise HTTPException(status_code=503, detail=f"cannot open the store: {type(exc).__name__}: {exc}") from None
    try:
        status = build_status(store, shard_list, strategies, window_seconds=window or DEFAULT_WINDOW_SECONDS,
                              compaction_threshold=threshold_of(effective))
        status.effective_settings, status.settings_warnings = effective, settings_warnings
        return to_json(status)
    except InvalidInputError:
        raise
    except Exception as exc:
        log.warning("atlas dashboard: status failed: %s", exc, exc_info=True)
        cache.discard(store)  # reopen at the next request (e.g. after a Cassandra outage)
        raise HTTPException(status_code=503, detail=f"reading the store failed: {type(exc).__name__}: {exc}") from None


# ----- parameters and paths ----------------------------------------------------------------------------------
def parse_shards(value: str | None) -> list[int] | None:
    if value is None or not value.strip():
        return None
    out = []
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            out.append(int(part))
        except ValueError:
            raise InvalidInputError(f"shards must be comma-separated integers, got {value!r}") from None
    return out or None


def parse_strategy(value: str | None) -> list[str] | None:
    if value is None or not value.strip() or value.strip().upper() == "ALL":
        return None
    return [value.strip().upper()]


def _app_root(request: Request) -> str:
    """URL path this app is served under (the API server's base path + the plugin's mount prefix)."""
    return str(request.scope.get("root_path") or "").rstrip("/")


def airflow_root() -> str:
    """URL path of the Airflow UI: the path of ``[api] base_url`` (empty when Airflow is served at /)."""
    from airflow.configuration import conf

    return urlparse(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")
