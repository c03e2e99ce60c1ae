"""Registration: the plugin and provider metadata load without any deprecation warning, the provider
metadata passes Airflow's own schema, and the entry points in pyproject.toml name them."""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

from tests.airflow.conftest import import_string
from tests.conftest import REPO_ROOT

STRICT = ["-W", "error::DeprecationWarning", "-W", "error::FutureWarning", "-W", "error::PendingDeprecationWarning"]


@pytest.mark.airflow
def test_plugin_provider_and_every_module_import_without_deprecation_warnings(airflow_home):
    code = """
import importlib, pkgutil
import airflow_atlas.airflow as pkg
from airflow_atlas.airflow.plugin import AtlasPlugin
from airflow_atlas.airflow.provider_info import get_provider_info
names = [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
for name in names:
    importlib.import_module(name)
assert AtlasPlugin.name == "airflow_atlas"
print("IMPORTED", len(names))
"""
    result = subprocess.run([sys.executable, *STRICT, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "IMPORTED" in result.stdout


def test_provider_info_matches_airflows_schema_and_the_package():
    import airflow
    import jsonschema

    from airflow_atlas.airflow.provider_info import get_provider_info

    info = get_provider_info()
    with open(f"{airflow.__path__[0]}/provider_info.schema.json") as f:
        jsonschema.validate(info, json.load(f))
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert info["package-name"] == project["name"]
    (conn_type,) = info["connection-types"]
    assert conn_type["connection-type"] == "atlas_embedded"
    assert import_string(conn_type["hook-class-name"]).conn_type == "atlas_embedded"
    for section in ("hooks", "operators", "sensors", "triggers"):
        for entry in info[section]:
            for module in entry["python-modules"]:
                __import__(module)


def test_entry_points_name_the_plugin_and_the_provider():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    plugin_ref = project["entry-points"]["airflow.plugins"]["airflow_atlas"]
    provider_ref = project["entry-points"]["apache_airflow_provider"]["provider_info"]
    plugin = import_string(plugin_ref.replace(":", "."))
    from airflow.plugins_manager import AirflowPlugin

    assert issubclass(plugin, AirflowPlugin)
    assert callable(import_string(provider_ref.replace(":", ".")))


def test_plugin_mounts_the_dashboard_and_adds_it_to_the_menu():
    from fastapi import FastAPI

    from airflow_atlas.airflow.plugin import DASHBOARD_PREFIX, AtlasPlugin

    (app,) = AtlasPlugin.fastapi_apps
    assert isinstance(app["app"], FastAPI) and app["url_prefix"] == DASHBOARD_PREFIX == "/atlas"
    (view,) = AtlasPlugin.external_views
    assert view["href"] == "/atlas/" and view["url_route"] == "atlas"
