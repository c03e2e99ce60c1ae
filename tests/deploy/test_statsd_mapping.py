"""Compose's statsd-exporter mapping (docker/statsd-exporter/mapping.yml) is true to the sweep metrics' names:
the sweep metrics code (airflow_atlas/airflow/metrics.py) sends its plain-StatsD lines to a UDP socket of the
test through Airflow's real StatsD client, after real sweeps (a caught-up run and a failed one), and each
dotted per-pair line goes through the rules as statsd-exporter applies them (first match wins; ``*`` is one
dot-separated component; the line's type must match ``match_metric_type``). Every line maps, every rule is
used, and the Prometheus names keep units (``_total`` counters, ``_seconds`` timers). Compose mounts the file
and points statsd-exporter at it. (No statsd-exporter binary is available to run here: the rules are
applied by the test.)"""
from __future__ import annotations

import re

import pytest
import yaml

from airflow_atlas.airflow.metrics import emit_shard_metrics
from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import AtlasError
from airflow_atlas.store import AtlasStore
from airflow_atlas.workload import WorkloadSpec, run_workload
from tests.airflow.test_metrics import statsd  # noqa: F401 - the fixture: Airflow's StatsD at a test socket
from tests.conftest import REPO_ROOT
from tests.integration.cli.test_sweep_runs import corrupt_commit_entry

pytestmark = pytest.mark.airflow

MAPPING = REPO_ROOT / "docker" / "statsd-exporter" / "mapping.yml"
COMPOSE = REPO_ROOT / "docker" / "docker-compose.yml"
TYPES = {"c": "counter", "g": "gauge", "ms": "observer"}


def _rules() -> list[dict]:
    return yaml.safe_load(MAPPING.read_text())["mappings"]


def _apply(rules: list[dict], name: str, kind: str) -> tuple[int, str, dict] | None:
    """(rule index, Prometheus name, labels) of the first rule matching a StatsD line, as statsd-exporter does."""
    parts = name.split(".")
    for i, rule in enumerate(rules):
        pattern = rule["match"].split(".")
        if len(pattern) != len(parts) or rule.get("match_metric_type", kind) != kind:
            continue
        captured = []
        for p, part in zip(pattern, parts, strict=True):
            if p == "*":
                captured.append(part)
            elif p != part:
                break
        else:
            def fill(text: str, captured=captured) -> str:
                return re.sub(r"\$(\d+)", lambda m: captured[int(m.group(1)) - 1], str(text))

            return i, fill(rule["name"]), {k: fill(v) for k, v in rule.get("labels", {}).items()}
    return None


def test_compose_points_statsd_exporter_at_the_mapping():
    service = yaml.safe_load(COMPOSE.read_text())["services"]["statsd-exporter"]
    mount = next(v for v in service["volumes"] if v.split(":")[0] == "./statsd-exporter/mapping.yml")
    target = mount.split(":")[1]
    assert f"--statsd.mapping-config={target}" in service["command"]
    assert (COMPOSE.parent / "statsd-exporter" / "mapping.yml").exists()


def test_every_sweep_metric_maps_and_every_rule_is_used(statsd, tmp_path):  # noqa: F811
    with AtlasStore.open(f"sqlite:///{tmp_path / 'atlas.db'}", StoreConfig(unreadable_window_seconds=0)) as store:
        store.initialize(shards=2)
        _sweep_and_emit(store)
    _check(statsd())


def _sweep_and_emit(store) -> None:
    """Every pair swept once (the corrupt entry's pair fails), its metrics sent as the sweep task sends them."""
    run_workload(store, WorkloadSpec(transactions=20, rows=10, seed=2))
    corrupt_commit_entry(store, "demo_thorough")
    for strategy in ("CONSERVATIVE", "THOROUGH"):
        for shard in range(store.number_of_shards()):
            target = {"shard": shard, "strategy": strategy}
            try:
                result = store.sweeper.sweep_shard(shard, strategy).to_json()
            except AtlasError as exc:  # the corrupt entry's pair: a failed run, sent as such
                result = {**target, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
            emit_shard_metrics(store, target, result)


def _check(lines: list[str]) -> None:
    rules = _rules()
    used: set[int] = set()
    mapped: dict[str, set[str]] = {}
    statuses = set()
    for line in lines:
        m = re.fullmatch(r"airflow\.(atlas\.sweep\.(?:conservative|thorough)\.[^:]+):[-0-9.eE]+\|(c|g|ms)(\|@[0-9.]+)?", line)
        if not m:
            continue
        name, kind = "airflow." + m.group(1), TYPES[m.group(2)]
        hit = _apply(rules, name, kind)
        assert hit is not None, f"statsd-exporter's mapping has no rule for {name} ({kind}): {MAPPING}"
        index, prom, labels = hit
        used.add(index)
        strategy, shard = m.group(1).split(".")[2:4]
        assert labels["strategy"] == strategy.upper() and labels["shard"] == shard, (name, labels)
        if kind == "counter":
            assert prom.endswith("_total"), prom
        if kind == "observer":
            assert prom.endswith("_seconds"), prom  # statsd-exporter exports timers (ms) in seconds
        if "status" in labels:
            statuses.add(labels["status"])
        mapped.setdefault(prom, set()).add(kind)
    assert {"caught_up", "failed"} <= statuses, statuses
    unused = [rules[i]["match"] for i in range(len(rules)) if i not in used]
    assert not unused, f"rules no sweep metric uses (a renamed metric?): {unused}"
    assert all(len(kinds) == 1 for kinds in mapped.values()), mapped
    assert re.fullmatch(r"[a-z_]+", "".join(mapped)), sorted(mapped)
