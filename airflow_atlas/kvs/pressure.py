"""Node pressure: how busy the store's nodes are by their own account, the cheap health signal the
application pace backs off on (issue 31 item 2: "the node's own pressure ... as Reaper does").

Cassandra exposes each node's thread pools in the node-local virtual table ``system_views.thread_pools``
(``pending_tasks``, ``active_tasks_limit``, ``blocked_tasks``); the Cassandra service reads it from every node
it sees up (:meth:`~airflow_atlas.kvs.api.KeyValueService.node_pressure`, one small request per node). The
embedded store has no nodes: it reports none, and the pace ignores pressure there.

A node is **under pressure** (:meth:`NodePressure.problems`) when

* a request stage (:data:`REQUEST_STAGES`) queues more tasks than it has threads (``pending_tasks >
  active_tasks_limit``: the requests of every client wait, the application's included), or blocks tasks (the
  native transport holding clients back);
* its compactions fall behind: more than :data:`MAX_PENDING_COMPACTIONS` pending (Cassandra Reaper's default
  for holding repair back; sweep's tombstones are work for compaction too);
* it did not answer the read in time (``late``).

Pure data and rules: no I/O here (a leaf of ``kvs``).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

REQUEST_STAGES = ("MutationStage", "ReadStage", "CounterMutationStage", "Native-Transport-Requests")
"""The thread pools that serve client requests (the application's and the sweep's alike)."""
COMPACTION_POOL = "CompactionExecutor"
MAX_PENDING_COMPACTIONS = 20
"""Pending compaction tasks above which a node is under pressure (Cassandra Reaper's default threshold)."""


@dataclass(frozen=True)
class PoolState:
    """One thread pool of a node: tasks queued, threads that may run them, tasks blocked."""

    name: str
    pending: int
    limit: int
    blocked: int


@dataclass(frozen=True)
class NodePressure:
    """The thread pools of one node, as it reported them."""

    node: str
    pools: tuple[PoolState, ...]
    late: bool = False
    """The node did not answer within the read's timeout (the Cassandra service's: 2 s): busy, or worse."""

    @classmethod
    def from_rows(cls, node: str, rows: Iterable[Mapping[str, object]]) -> NodePressure:
        """From rows of ``system_views.thread_pools`` (``name``, ``pending_tasks``, ``active_tasks_limit``,
        ``blocked_tasks``; a missing number counts as 0)."""
        def num(row: Mapping[str, object], key: str) -> int:
            value = row.get(key)
            return int(value) if isinstance(value, int) else 0

        pools = tuple(PoolState(str(r.get("name")), num(r, "pending_tasks"), num(r, "active_tasks_limit"),
                                num(r, "blocked_tasks"))
                      for r in rows if r.get("name") in (*REQUEST_STAGES, COMPACTION_POOL))
        return cls(node, pools)

    def problems(self) -> list[str]:
        """Why the node is under pressure (empty: it is not); see the module doc."""
        out = ["no answer within the timeout"] if self.late else []
        for pool in self.pools:
            if pool.name == COMPACTION_POOL:
                if pool.pending > MAX_PENDING_COMPACTIONS:
                    out.append(f"{pool.pending} pending compactions > {MAX_PENDING_COMPACTIONS}")
            elif pool.pending > pool.limit:
                out.append(f"{pool.name} {pool.pending} pending > {pool.limit} threads")
            elif pool.blocked > 0:
                out.append(f"{pool.name} {pool.blocked} blocked")
        return out


def pressure_problem(nodes: Iterable[NodePressure]) -> str | None:
    """The first node under pressure and why (``127.0.0.2: MutationStage 40 pending > 16 threads``), or None."""
    for node in nodes:
        problems = node.problems()
        if problems:
            return f"{node.node}: {'; '.join(problems)}"
    return None


__all__ = ["COMPACTION_POOL", "MAX_PENDING_COMPACTIONS", "REQUEST_STAGES", "NodePressure", "PoolState",
           "pressure_problem"]
