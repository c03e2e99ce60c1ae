"""``GET /atlas/metrics``: the store's sweep status as Prometheus gauges
(:class:`airflow_atlas.status.metrics.StatusCollector`, the same figures as ``atlas-sweep metrics``), behind
the same authentication as the dashboard (added by :func:`airflow_atlas.airflow.web.app.install_routes`).

The store is the dashboard's (:class:`~airflow_atlas.airflow.web.shared.StoreCache`: the ``atlas_settings``
Variable's connection, reopened when it changes or after an error). A scrape needs an Airflow token:
Prometheus sends it with ``authorization: {credentials_file: ...}`` (a token from ``POST /auth/token``;
docs/METRICS.md). A store problem is ``atlas_status_up 0``, not an HTTP error.
"""
from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import Response

from airflow_atlas.status.metrics import StatusCollector, status_registry

from .shared import NO_STORE, StoreCache


def attach_metrics(app: FastAPI, cache: StoreCache) -> None:
    """Give ``app`` its registry: one :class:`StatusCollector` over ``cache``'s store."""
    collector = StatusCollector(cache.get, on_error=cache.discard,
                                compaction_threshold=lambda: cache.compaction_threshold)
    app.state.atlas_metrics_collector = collector
    app.state.atlas_metrics_registry = status_registry(collector)


def metrics_route(request: Request) -> Response:
    from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

    body = generate_latest(request.app.state.atlas_metrics_registry)
    return Response(body, media_type=CONTENT_TYPE_PLAIN_0_0_4, headers=NO_STORE)
