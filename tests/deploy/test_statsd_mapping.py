"""Compose's statsd-exporter mapping (docker/statsd-exporter/mapping.yml) is true to the sweep metrics' names:
the sweep metrics code (airflow_atlas/airflow/metrics.py) sends its plain-StatsD lines to a UDP socket of the
test through Airflow's real StatsD client, after real sweeps (a caught-up run and a failed one), and each
dotted per-pair line goes through the rules as statsd-exporter applies them (first match wins; ``*`` is one
dot-separated component; the line's type must match ``match_metric_type``). Every line maps, every rule is
used, and the Prometheus names keep units (``_total`` counters, ``_seconds`` timers). Compose mounts the file
and points statsd-exporter at it. The same lines then go to a real statsd_exporter (the binary
scripts/deploy.sh runs: ``statsd_exporter_binary``, scripts/ensure_statsd_exporter.sh) started with the file: it serves what the
rules, as applied here, say it should (tests/deploy/test_deployment.py checks the deployment's own exporter
receiving a sweep's metrics from Airflow's task processes)."""
from __future__ import annotations

import re
import socket
import subprocess
import time

import pytest
import yaml

from airflow_atlas.airflow.metrics import emit_shard_metrics
from airflow_atlas.config import StoreConfig
from airflow_atlas.errors import AtlasError
from airflow_atlas.serialisation import to_json
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


def test_every_sweep_metric_maps_and_every_rule_is_used(statsd, statsd_exporter_binary, tmp_path):  # noqa: F811
    with AtlasStore.open(f"sqlite:///{tmp_path / 'atlas.db'}", StoreConfig(unreadable_window_seconds=0)) as store:
        store.initialize(shards=2)
        _sweep_and_emit(store)
    lines = statsd()
    mapped = _check(lines)
    _check_real_exporter(statsd_exporter_binary, lines, mapped, tmp_path)


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _check_real_exporter(exporter: str, lines: list[str], mapped: dict[str, set[str]], tmp_path) -> None:
    """The lines through a real statsd_exporter started with the mapping (on 127.0.0.1, ended by ``timeout``
    whatever happens): every Prometheus name the rules give is served, with the pairs' labels."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    udp, web = _free_port(socket.SOCK_DGRAM), _free_port(socket.SOCK_STREAM)
    log = open(tmp_path / "statsd_exporter.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(["timeout", "120", exporter, f"--statsd.mapping-config={MAPPING}",
                             f"--statsd.listen-udp=127.0.0.1:{udp}", "--statsd.listen-tcp=",
                             f"--web.listen-address=127.0.0.1:{web}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        served: dict[str, set[tuple[str, str]]] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                text = httpx.get(f"http://127.0.0.1:{web}/metrics", timeout=5).text
                break
            except httpx.HTTPError:
                assert proc.poll() is None, (tmp_path / "statsd_exporter.log").read_text()
                time.sleep(0.2)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for line in lines:
                sock.sendto(line.encode(), ("127.0.0.1", udp))
        while time.monotonic() < deadline:
            text = httpx.get(f"http://127.0.0.1:{web}/metrics", timeout=5).text
            served = {}
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    if "strategy" in sample.labels and "shard" in sample.labels:
                        served.setdefault(family.name, set()).add((sample.labels["strategy"], sample.labels["shard"]))
            if {_family(name) for name in mapped} <= set(served):
                break
            time.sleep(0.2)
        assert {_family(name) for name in mapped} <= set(served), (sorted(mapped), sorted(served))
        assert all(strategy in ("CONSERVATIVE", "THOROUGH") for pairs in served.values() for strategy, _ in pairs)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _family(name: str) -> str:
    """The metric family a Prometheus name belongs to (the client's parser drops a counter's ``_total``)."""
    return name.removesuffix("_total")


def _sweep_and_emit(store) -> None:
    """Every pair swept once (the corrupt entry's pair fails), its metrics sent as the sweep task sends them."""
    run_workload(store, WorkloadSpec(transactions=20, rows=10, seed=2))
    corrupt_commit_entry(store, "demo_thorough")
    for strategy in ("CONSERVATIVE", "THOROUGH"):
        for shard in range(store.number_of_shards()):
            target = {"shard": shard, "strategy": strategy}
            try:
                result = to_json(store.sweeper.sweep_shard(shard, strategy))
            except AtlasError as exc:  # the corrupt entry's pair: a failed run, sent as such
                result = {**target, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
            emit_shard_metrics(target, result)


def _check(lines: list[str]) -> dict[str, set[str]]:
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
    return mapped
