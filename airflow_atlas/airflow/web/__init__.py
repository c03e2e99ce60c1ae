"""The sweep dashboard in the Airflow UI: a FastAPI app the plugin mounts under ``/atlas``
(see :mod:`airflow_atlas.airflow.plugin`) and shows in the UI's menu (Browse -> Atlas sweep).

* ``GET /atlas/`` - the page: per shard and strategy progress, lag, backlog, last run, lock holder,
  tombstones, a lag-over-time chart, why the sweep timestamp is not advancing, the backlog drain forecast;
* ``GET /atlas/api/status`` - the same as JSON (:func:`airflow_atlas.status.compute_status`);
* ``GET /atlas/metrics`` - the same figures as Prometheus gauges (:mod:`.metrics`).

All require an authenticated Airflow user. Details in :mod:`.app`; the page in :mod:`.render`.
"""
from __future__ import annotations

from .app import create_app

__all__ = ["create_app"]
