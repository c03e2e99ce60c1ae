"""Node pressure on Cassandra: each node's ``system_views.thread_pools``, read from the node itself (a
virtual table is node-local, so the request names its host: the driver's public ``Session.execute(host=)``).
The rules that make a node "under pressure" are the engine's (:mod:`airflow_atlas.kvs.pressure`)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cassandra import OperationTimedOut

from ..pressure import NodePressure

THREAD_POOLS_QUERY = "SELECT name, pending_tasks, active_tasks_limit, blocked_tasks FROM system_views.thread_pools"
COLUMNS = ("name", "pending_tasks", "active_tasks_limit", "blocked_tasks")
TIMEOUT_SECONDS = 2.0
"""Longest wait for one node's answer (at most the service's request timeout), so a sweep never stalls on its
health check: a node that answers no sooner is reported late (``NodePressure.late``: under pressure)."""


def read_node_pressure(session: Any, timeout: float, translate: Callable[[BaseException], Exception]) -> list[NodePressure]:
    """Every node the driver does not know to be down, one request each; a node that answers late is reported
    ``late``, one that cannot be reached is left out (its pressure is unknown, not zero). When none answers, the last error (translated) is raised: a role
    without SELECT on the virtual table, every node down."""
    out: list[NodePressure] = []
    error: BaseException | None = None
    for host in session.cluster.metadata.all_hosts():
        if host.is_up is False:
            continue
        try:
            rows = session.execute(THREAD_POOLS_QUERY, timeout=min(timeout, TIMEOUT_SECONDS), host=host)
            out.append(NodePressure.from_rows(str(host.address), [dict(zip(COLUMNS, row, strict=False)) for row in rows]))
        except OperationTimedOut:
            out.append(NodePressure(str(host.address), (), late=True))
        except Exception as exc:  # not reachable (down, not yet known down), or refused
            error = exc
    if not out and error is not None:
        raise translate(error) from error
    return out


__all__ = ["THREAD_POOLS_QUERY", "read_node_pressure"]
