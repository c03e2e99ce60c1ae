"""The Airflow settings' own kinds of value (:mod:`airflow_atlas.settings_model`): sweepable strategies,
Spark conf, schedules. Declared in :mod:`airflow_atlas.airflow.settings`; nothing here imports Airflow."""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.tables import SWEEPABLE_STRATEGY_NAMES, SweepStrategy
from airflow_atlas.settings_model import Kind, Nullable, Text, TextList


@dataclass(frozen=True)
class Strategies(Kind):
    """A non-empty list of sweepable strategies (case-insensitive, duplicates dropped)."""

    def check(self, value: Any) -> tuple:
        names = TextList(allow_empty=False).check(value)
        out: list[str] = []
        for name in names:
            try:
                parsed = SweepStrategy.parse(name).value
            except InvalidInputError as exc:
                raise ValueError(str(exc)) from None
            if parsed not in SWEEPABLE_STRATEGY_NAMES:
                raise ValueError(f"{parsed} is never swept; use CONSERVATIVE and/or THOROUGH")
            if parsed not in out:
                out.append(parsed)
        return tuple(out)

    def parse(self, text: str) -> tuple:
        return TextList().parse(text)

    def describe(self) -> str:
        return "non-empty list of " + " / ".join(f"`{s}`" for s in SWEEPABLE_STRATEGY_NAMES)


SCHEDULE = Nullable(Text("a cron expression or a preset like `@hourly`"))

SPARK_CONF_OWNED = {
    "spark.pyspark.python": "spark_executor_python",
    "spark.driver.host": "spark_driver_host",
    "spark.submit.deployMode": "nothing (the sweep jobs run in client mode only)",
}
"""Spark conf keys that ``spark_conf`` may not set, and what sets them instead."""


@dataclass(frozen=True)
class SparkConf(Kind):
    """Spark conf: ``spark.*`` keys with non-empty string, number or boolean values (stored as strings),
    none that another setting owns (:data:`SPARK_CONF_OWNED`) or that is an engine setting."""

    def check(self, value: Any) -> dict:
        if not isinstance(value, Mapping):
            raise ValueError(f"must be a JSON object of Spark conf, got {value!r}")
        out = {}
        for key, item in value.items():
            if not isinstance(key, str) or not key.startswith("spark."):
                raise ValueError(f"{key!r} is not a Spark conf key (they start with 'spark.')")
            if key.startswith("spark.atlas.store."):
                raise ValueError(f"{key} is an engine setting: set it as one (top level or store_config)")
            if key in SPARK_CONF_OWNED:
                raise ValueError(f"set {key} through {SPARK_CONF_OWNED[key]}, not spark_conf")
            if isinstance(item, bool):
                item = "true" if item else "false"
            elif isinstance(item, (int, float)) and item == item and item not in (float("inf"), float("-inf")):
                item = str(item)
            if not isinstance(item, str) or not item:
                raise ValueError(f"{key} must be a non-empty string, number or boolean, got {item!r}")
            out[key] = item
        return out

    def parse(self, text: str) -> dict:
        try:
            return json.loads(text)
        except ValueError:
            raise ValueError(f"must be a JSON object of Spark conf, got {text!r}") from None

    def describe(self) -> str:
        return "JSON object of `spark.*` conf"
