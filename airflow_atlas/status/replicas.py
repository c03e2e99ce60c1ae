"""Replicas down, per datacenter, as the status document's warnings (pure).

A replica down stops what must reach it: sweep deletes at ALL (the default, ``consistency_sweep_delete``)
fail every iteration - progress stays, the sweep resumes once it is back - and writes at EACH_QUORUM
(``consistency_data_write`` / ``consistency_queue_write``, the defaults) fail when a whole datacenter's
quorum is gone. The policy and its reasons: :mod:`airflow_atlas.kvs.consistency`.
"""
from __future__ import annotations

from ..kvs.consistency import ConsistencyPolicy


def datacenter_warnings(down: dict[str, list[str]], policy: ConsistencyPolicy) -> list[str]:
    """One message per datacenter with replicas down (``down``: datacenter -> addresses)."""
    stops = []
    if "ALL" in (policy.sweep_delete, policy.sentinel, policy.abort_delete):
        stops.append("sweep is paused: its deletes run at ALL (consistency_sweep_delete), every iteration fails "
                     "naming this datacenter and progress stays until the replicas are back")
    if "EACH_QUORUM" in (policy.data_write, policy.queue_write) or "ALL" in (policy.data_write, policy.queue_write):
        stops.append(f"writes at {policy.data_write} (consistency_data_write) fail once the datacenter's quorum is gone")
    consequence = "; ".join(stops) if stops else "no operation of this store waits for it"
    return [
        f"datacenter {dc}: {len(addresses)} replica(s) down ({', '.join(addresses)}) - {consequence}"
        for dc, addresses in sorted(down.items())
    ]
