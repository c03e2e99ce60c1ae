"""The one serialisation of operator results at the XCom boundary.

Operators work with dataclasses (the engine's results, :class:`~airflow_atlas.airflow.targets.SweepTarget`,
:class:`~airflow_atlas.compaction.CompactionResult`, :mod:`airflow_atlas.airflow.results` ...) and return
``to_xcom(result)`` from ``execute``: plain JSON (dicts, lists, strings, numbers, None), what Airflow stores
and what templates, downstream tasks, the asset events and the dashboard read. Each result type reads its
JSON back with its ``from_json`` classmethod where a task consumes it.

Airflow's own serialisation of dataclasses is not used: it needs every class in ``[core]
allowed_deserialization_classes``, loses nested types, and wraps values so templates (``{{ t.shard }}``)
and the dashboard would no longer see plain JSON.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


def to_xcom(value: Any) -> Any:
    """``value`` as plain JSON: a dataclass by its ``to_json()`` (or all its fields), recursively through
    mappings, lists and tuples; other values unchanged."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_json = getattr(value, "to_json", None)
        return to_xcom(to_json() if callable(to_json) else dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {key: to_xcom(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_xcom(item) for item in value]
    return value


__all__ = ["to_xcom"]
