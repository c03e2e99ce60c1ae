"""The one serialisation of operator results at the XCom boundary.

Operators work with dataclasses (the engine's results, :class:`~airflow_atlas.airflow.targets.SweepTarget`,
:class:`~airflow_atlas.compaction.CompactionResult`, :mod:`airflow_atlas.airflow.results` ...) and return
``to_xcom(result)`` from ``execute``: plain JSON (dicts, lists, strings, numbers, None) by
:func:`airflow_atlas.serialisation.to_json`, what Airflow stores and what templates, downstream tasks, the
asset events and the dashboard read. A task that consumes a result reads it back with
:func:`~airflow_atlas.serialisation.from_json` (a target: ``SweepTarget.from_json``, which validates).

Airflow's own serialisation of dataclasses is not used: it needs every class in ``[core]
allowed_deserialization_classes``, loses nested types, and wraps values so templates (``{{ t.shard }}``)
and the dashboard would no longer see plain JSON.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from airflow_atlas.serialisation import to_json


def to_xcom(value: Any) -> Any:
    """``value`` as plain JSON: a dataclass by :func:`~airflow_atlas.serialisation.to_json`, recursively
    through mappings, lists and tuples; other values unchanged."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_xcom(to_json(value))
    if isinstance(value, Mapping):
        return {key: to_xcom(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_xcom(item) for item in value]
    return value


__all__ = ["to_xcom"]
