"""AtlasPlugin: registers airflow-atlas with Airflow 3 (entry point ``airflow.plugins`` in pyproject.toml).

Operators, sensors, hooks and triggers need no registration: import them from
``airflow_atlas.airflow.operators`` / ``.sensors`` / ``.hooks``. Connection types and the connection form
come from the provider metadata (:mod:`airflow_atlas.airflow.provider_info`).

Dashboard hook point: the web dashboard (a later issue) is a FastAPI app in the module
``airflow_atlas.airflow.web`` exposing ``create_app() -> fastapi.FastAPI``. When that module exists, this
plugin mounts it under ``/atlas`` in the API server (``fastapi_apps``) and adds it to the UI menu
(``external_views``). Plugin apps are NOT authenticated by Airflow: every route of that app that shows
store data must depend on the API server's authentication (see ../shared/notes/airflow-3.3.md).
"""
from __future__ import annotations

import importlib

from airflow.plugins_manager import AirflowPlugin

DASHBOARD_MODULE = "airflow_atlas.airflow.web"
DASHBOARD_PREFIX = "/atlas"


def _dashboard() -> tuple[list[dict], list[dict]]:
    """(fastapi_apps, external_views) of the dashboard, or nothing while the module does not exist."""
    try:
        module = importlib.import_module(DASHBOARD_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name in (DASHBOARD_MODULE, DASHBOARD_MODULE.rsplit(".", 1)[0]):
            return [], []
        raise  # the dashboard exists but one of its own imports is missing: show the error
    app = {"app": module.create_app(), "url_prefix": DASHBOARD_PREFIX, "name": "Atlas sweep dashboard"}
    view = {
        "name": "Atlas sweep",
        "href": DASHBOARD_PREFIX + "/",
        "url_route": "atlas",
        "category": "browse",
        "destination": "nav",
    }
    return [app], [view]


_APPS, _VIEWS = _dashboard()


class AtlasPlugin(AirflowPlugin):
    name = "airflow_atlas"
    fastapi_apps = _APPS
    external_views = _VIEWS
