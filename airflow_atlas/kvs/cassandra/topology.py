"""Datacenters of the keyspace and of the cluster, as the driver's metadata sees them (public driver API).

* :func:`keyspace_datacenters` - replicas per datacenter of a keyspace (NetworkTopologyStrategy), or ``{}``
  for a single-datacenter strategy (SimpleStrategy);
* :func:`down_hosts` - datacenter -> addresses of the hosts the driver knows to be down (a node that shut
  down announces it; the driver's control connection hears it for every datacenter, also for remote ones
  it sends no requests to);
* :func:`down_note` - those as text for an error message: which datacenter an operation at ALL waits for.

The policy the store checks with them is :func:`airflow_atlas.kvs.consistency.multi_datacenter_problems`.
"""
from __future__ import annotations

from typing import Any


def keyspace_datacenters(cluster: Any, keyspace: str) -> dict[str, int]:
    """Replicas per datacenter of ``keyspace`` ({} when unknown or not NetworkTopologyStrategy)."""
    meta = cluster.metadata.keyspaces.get(keyspace)
    factors = getattr(getattr(meta, "replication_strategy", None), "dc_replication_factors", None)
    return {str(dc): int(rf) for dc, rf in factors.items()} if isinstance(factors, dict) else {}


def down_hosts(cluster: Any) -> dict[str, list[str]]:
    """Datacenter -> sorted addresses of hosts the driver has marked down (``is_up`` False; None, never
    judged, is not down)."""
    down: dict[str, list[str]] = {}
    for host in cluster.metadata.all_hosts():
        if host.is_up is False:
            down.setdefault(str(host.datacenter), []).append(str(host.address))
    return {dc: sorted(addresses) for dc, addresses in sorted(down.items())}


def down_note(cluster: Any) -> str:
    """`` - down: datacenter dc2 (127.0.0.23)`` for the hosts known down, or "" when none is."""
    down = down_hosts(cluster)
    if not down:
        return ""
    named = "; ".join(f"datacenter {dc} ({', '.join(addresses)})" for dc, addresses in down.items())
    return f" - down: {named}"
