"""Sweep *targets*: the small JSON dicts that flow between the tasks of one shard group.

A target names one (shard, strategy) pair and picks up fields as it goes through the group::

    plan    -> {"shard": 3, "strategy": "THOROUGH", "sweep_ts": 1234}
    acquire -> + {"lock": "sweep/thorough/3", "holder": "airflow:...", "acquired": true, "token": 7, "expires_at": ...}
    sweep   -> + {"result": {...ShardSweepResult.to_json()...}}
    reconcile -> + {"reconciled": {...}}

Operators accept a list of targets (``targets=``) or one pair (``shard=``, ``strategy=``). Lease tokens are
fencing tokens, not credentials; nothing secret ever goes into a target.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.api import SweepStrategy
from airflow_atlas.locks import Lease
from airflow_atlas.sweep.targeted import TargetedSweeper

SWEEPABLE = (SweepStrategy.CONSERVATIVE.value, SweepStrategy.THOROUGH.value)


def _strategy(value: Any) -> str:
    strategy = SweepStrategy.parse(value).value
    if strategy not in SWEEPABLE:
        raise InvalidInputError(f"strategy {strategy} is never swept: use CONSERVATIVE or THOROUGH")
    return strategy


def as_int(value: Any, what: str) -> int:
    """An integer argument that may arrive templated (a string of digits); InvalidInputError naming it
    otherwise, so Airflow fails the task at once instead of retrying a bare ValueError."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise InvalidInputError(f"{what} must be an integer, got {value!r}")


def _shard(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 256:
        raise InvalidInputError(f"shard must be an integer in 0..255, got {value!r}")
    return value


def normalize_targets(targets: Any = None, shard: Any = None, strategy: Any = None) -> list[dict]:
    """Validated targets from ``targets`` (a list of dicts, or one dict) or from ``shard`` + ``strategy``."""
    if targets is not None and (shard is not None or strategy is not None):
        raise InvalidInputError("pass either targets or shard and strategy, not both")
    if targets is None:
        if shard is None or strategy is None:
            raise InvalidInputError("name what to sweep: targets=[{'shard': 0, 'strategy': 'THOROUGH'}] or shard= and strategy=")
        targets = [{"shard": shard, "strategy": strategy}]
    if isinstance(targets, Mapping):
        targets = [targets]
    if isinstance(targets, (str, bytes)) or not isinstance(targets, Iterable):
        raise InvalidInputError(f"targets must be a list of {{'shard', 'strategy'}} dicts, got {type(targets).__name__}")
    out = []
    for target in targets:
        if not isinstance(target, Mapping) or "shard" not in target or "strategy" not in target:
            raise InvalidInputError(f"each target needs 'shard' and 'strategy', got {target!r}")
        item = dict(target)
        item["shard"] = _shard(item["shard"])
        item["strategy"] = _strategy(item["strategy"])
        if item.get("sweep_ts") is not None and (isinstance(item["sweep_ts"], bool) or not isinstance(item["sweep_ts"], int)):
            raise InvalidInputError(f"sweep_ts must be an integer, got {item['sweep_ts']!r}")
        out.append(item)
    return out


def lock_name(target: Mapping) -> str:
    return TargetedSweeper.lock_name(target["shard"], target["strategy"])


def holder_for(context: Mapping, target: Mapping) -> str:
    """The lock holder of a pair within one DAG run: stable across the group's tasks and their retries,
    distinct between runs, DAGs and pairs."""
    ti = context["ti"]
    return f"airflow:{ti.dag_id}:{ti.run_id}:{target['strategy']}:{target['shard']}"


def lease_to_json(lease: Lease) -> dict:
    return {"lock": lease.name, "holder": lease.holder, "token": lease.token, "expires_at": lease.expires_at}


def lease_from(target: Mapping) -> Lease | None:
    """The lease an acquire task recorded in the target (None if it holds none)."""
    if not target.get("acquired") or target.get("token") is None:
        return None
    return Lease(
        name=target["lock"], holder=target["holder"], token=int(target["token"]), expires_at=float(target["expires_at"])
    )


def batches(targets: list[dict], size: int) -> list[list[dict]]:
    """Split targets into groups of at most ``size`` (one mapped task group each)."""
    if size < 1:
        raise InvalidInputError("group size must be at least 1")
    return [targets[i : i + size] for i in range(0, len(targets), size)]


def label(targets: Any) -> str:
    """Short label of a group for map_index_template: ``THOROUGH/3`` or ``CONSERVATIVE/0..15 (16)``."""
    try:
        items = normalize_targets(targets)
    except InvalidInputError:
        return "?"
    if len(items) == 1:
        return f"{items[0]['strategy']}/{items[0]['shard']}"
    return f"{len(items)} pairs from {items[0]['strategy']}/{items[0]['shard']}"
