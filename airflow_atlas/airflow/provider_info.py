"""Provider metadata of airflow-atlas (entry point ``apache_airflow_provider`` in pyproject.toml).

Declares the ``atlas_embedded`` connection type and its form (``conn-fields`` / ``ui-field-behaviour``;
the older hook classmethods are deprecated in Airflow 3). Cassandra stores use the Cassandra provider's
own ``cassandra`` connection type: see :mod:`airflow_atlas.airflow.hooks.atlas` for the extras we read.
"""
from __future__ import annotations

from airflow_atlas import __version__


def get_provider_info() -> dict:
    return {
        "package-name": "airflow-atlas",
        "name": "Airflow Atlas",
        "description": "AtlasDB-style targeted sweep for MVCC stores on Apache Cassandra: hooks, operators, "
        "sensors and triggers.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Airflow Atlas",
                "external-doc-url": "https://github.com/palantir/atlasdb",
                "tags": ["software"],
            }
        ],
        "hooks": [
            {
                "integration-name": "Airflow Atlas",
                "python-modules": ["airflow_atlas.airflow.hooks.atlas", "airflow_atlas.airflow.hooks.nodetool"],
            }
        ],
        "operators": [
            {
                "integration-name": "Airflow Atlas",
                "python-modules": [
                    "airflow_atlas.airflow.operators.sweep_timestamps",
                    "airflow_atlas.airflow.operators.sweep",
                    "airflow_atlas.airflow.operators.compaction",
                    "airflow_atlas.airflow.operators.full_sweep",
                    "airflow_atlas.airflow.operators.scrub",
                ],
            }
        ],
        "sensors": [{"integration-name": "Airflow Atlas", "python-modules": ["airflow_atlas.airflow.sensors.atlas"]}],
        "triggers": [{"integration-name": "Airflow Atlas", "python-modules": ["airflow_atlas.airflow.triggers.atlas"]}],
        "connection-types": [
            {
                "connection-type": "atlas_embedded",
                "hook-class-name": "airflow_atlas.airflow.hooks.atlas.AtlasHook",
                "hook-name": "Atlas embedded store (SQLite)",
                "conn-fields": {
                    "path": {
                        "label": "Database file",
                        "description": "Absolute path of the SQLite file (alternatively put it in Host).",
                        "schema": {"type": ["string", "null"]},
                    }
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "port", "login", "password", "extra"],
                    "relabeling": {"host": "Database file (absolute path)"},
                    "placeholders": {"host": "/var/lib/airflow-atlas/atlas.db"},
                },
            }
        ],
    }
