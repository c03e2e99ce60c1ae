"""Parsing the Spark jobs' inputs: pairs, shard ranges, settings, sweep timestamps, the attempt count and
the application's parallelism."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..kvs.tables import SWEEPABLE_STRATEGY_NAMES

TASKS_PER_CORE = 2
"""A targeted sweep of more pairs than this many per core of the application runs this many Spark tasks per
core, each sweeping a contiguous group of the pairs (:func:`task_count`): a Spark task's own cost (a
Python worker's round trip, the task's scheduling) was ~0.1 s per one-pair task on local[2], a deferred
Connect submission of 16 caught-up pairs spent 1.1 s in 16 tasks against 0.5 s for the same sweep in one
process (bench/ANALYSIS.md, spark_scaleout). Two per core, not one: a pair with a large backlog holds up only the
pairs of its own group, and the other groups spread over the free cores."""

STORE_SETTING_CONF_PREFIX = "spark.atlas.store."
"""Spark conf keys ``spark.atlas.store.<StoreConfig field>=<value>`` override store settings."""


def parse_pairs(text: str | Sequence) -> list[tuple[int, str]]:
    """``"0:CONSERVATIVE,1:THOROUGH"`` (or a list of ``"s:STRATEGY"``, ``(s, strategy)`` or
    ``{"shard": s, "strategy": ...}``) -> de-duplicated ``[(shard, STRATEGY), ...]`` in input order."""
    items = [t for t in (x.strip() for x in text.split(",")) if t] if isinstance(text, str) else list(text)
    out: list[tuple[int, str]] = []
    for item in items:
        shard_text: Any  # a str, or whatever a mapping or a pair holds (checked by int() below)
        given: Any  # the strategy as given: a str, a SweepStrategy member...
        if isinstance(item, str):
            shard_text, sep, given = item.partition(":")
            if not sep:
                raise ValueError(f"pair {item!r} is not SHARD:STRATEGY")
        elif isinstance(item, Mapping):
            shard_text, given = item.get("shard"), item.get("strategy")
        else:
            shard_text, given = item
        try:
            shard = int(shard_text)
        except (TypeError, ValueError):
            raise ValueError(f"pair {item!r}: shard {shard_text!r} is not an integer") from None
        strategy = str(getattr(given, "value", given)).strip().upper()  # SweepStrategy members too
        if strategy not in SWEEPABLE_STRATEGY_NAMES:
            raise ValueError(f"pair {item!r}: strategy must be CONSERVATIVE or THOROUGH")
        if shard < 0:
            raise ValueError(f"pair {item!r}: shard must be >= 0")
        if (shard, strategy) not in out:
            out.append((shard, strategy))
    if not out:
        raise ValueError("no (shard, strategy) pairs given")
    return out


def pairs_from_shards(shards: str, strategies: str) -> list[tuple[int, str]]:
    """``--shards "0-3,7" --strategies CONSERVATIVE,THOROUGH`` -> the cross product as pairs."""
    numbers: list[int] = []
    for part in (p.strip() for p in shards.split(",")):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            numbers.extend(range(int(lo), int(hi) + 1))
        else:
            numbers.append(int(part))
    names = [s.strip() for s in strategies.split(",") if s.strip()]
    return parse_pairs([f"{n}:{s}" for n in numbers for s in names])


def _setting_value(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_settings(items: Iterable[str]) -> dict:
    """``["NAME=VALUE", ...]`` (values JSON where they parse) -> StoreConfig overrides."""
    out = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"setting {item!r} is not NAME=VALUE")
        out[name.strip()] = _setting_value(value.strip())
    return out


def settings_from_spark_conf(conf_items: Iterable[tuple[str, str]]) -> dict:
    """``spark.atlas.store.<name>=<value>`` Spark conf entries as StoreConfig overrides."""
    return {
        key[len(STORE_SETTING_CONF_PREFIX):]: _setting_value(value)
        for key, value in conf_items
        if key.startswith(STORE_SETTING_CONF_PREFIX)
    }


def parse_sweep_timestamps(value: object) -> dict[str, int] | None:
    """``"CONSERVATIVE=12,THOROUGH=15"`` or a mapping -> {"CONSERVATIVE": 12, ...}; ValueError naming the problem."""
    if value in (None, "", {}):
        return None
    items = value.items() if isinstance(value, Mapping) else (part.split("=", 1) for part in str(value).split(","))
    out = {}
    for item in items:
        if len(item) != 2:
            raise ValueError(f"sweep timestamps: expected STRATEGY=TIMESTAMP, got {item!r}")
        name, ts = item
        name = str(name).strip().upper()
        if name not in SWEEPABLE_STRATEGY_NAMES:
            raise ValueError(f"sweep timestamps: unknown strategy {name!r} (CONSERVATIVE or THOROUGH)")
        try:
            ts = int(str(ts).strip())
        except ValueError:
            raise ValueError(f"sweep timestamps: {name} timestamp {ts!r} is not an integer") from None
        if ts < 0:
            raise ValueError(f"sweep timestamps: {name} timestamp must be >= 0, got {ts}")
        out[name] = ts
    return out


def spark_parallelism(master: str, conf: Mapping[str, str]) -> int | None:
    """The cores an application offers, from its conf (a Connect server's, or a classic session's; a classic
    ``local[*]`` session asks its SparkContext instead): ``spark.default.parallelism`` when set, ``local[N]`` /
    ``local[N,F]`` N, ``local`` 1, ``local-cluster[N,C,M]`` N x C, any other master ``spark.cores.max`` when
    set; None when the conf does not say (``local[*]``, a standalone master without ``spark.cores.max``)."""
    def number(text: str | None) -> int | None:
        try:
            value = int(str(text).strip())
        except (TypeError, ValueError):
            return None
        return value if value > 0 else None

    given = number(conf.get("spark.default.parallelism"))
    if given:
        return given
    master = (master or "").strip()
    if master == "local":
        return 1
    if master.startswith("local-cluster[") and master.endswith("]"):
        parts = master[len("local-cluster["):-1].split(",")
        workers, cores = (number(parts[0]), number(parts[1])) if len(parts) >= 2 else (None, None)
        return workers * cores if workers and cores else None
    if master.startswith("local[") and master.endswith("]"):
        return number(master[len("local["):-1].split(",", 1)[0])
    return number(conf.get("spark.cores.max"))


def task_count(items: int, parallelism: int | None) -> int:
    """How many Spark tasks a targeted sweep of ``items`` pairs runs on an application of ``parallelism``
    cores: at most :data:`TASKS_PER_CORE` per core, never more than the pairs, at least 1; one per pair when
    the parallelism is unknown."""
    if items <= 0:
        return 1
    if not parallelism or parallelism < 1:
        return items
    return max(1, min(items, TASKS_PER_CORE * parallelism))


def effective_max_failures(master: str, conf_value: str | None) -> int:
    """How many attempts Spark gives a task: ``local``/``local[N]`` never retry (1), ``local[N,F]`` gives F,
    other masters honour ``spark.task.maxFailures`` (default 4)."""
    master = (master or "").strip()
    if master.startswith("local-cluster"):
        return int(conf_value or 4)
    if master == "local" or master.startswith("local["):
        inner = master[len("local["):-1] if master.startswith("local[") else ""
        if "," in inner:
            return max(1, int(inner.split(",", 1)[1]))
        return 1
    return max(1, int(conf_value or 4))
