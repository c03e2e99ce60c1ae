#!/usr/bin/env bash
# Runs the test suite: bootstraps .venv, starts the local Cassandra node (127.0.0.1) and the Spark standalone
# master with two workers (127.0.0.5), runs pytest. The local 3-node Cassandra cluster (127.0.0.2-4) is
# started by the fixture of tests/cluster for that package only (scripts/cassandra.sh cluster ...); the
# secured node (127.0.0.6) and secured 3-node cluster (127.0.0.7-9) by the fixtures of
# tests/integration/security for that package only (scripts/cassandra.sh secure ...); the two-datacenter
# cluster (127.0.0.21-23) by the fixture of tests/datacenters for that package only (scripts/cassandra.sh dc ...).
# Every start is idempotent (a running node or master is reused, never restarted).
# Without arguments the suite runs in two lanes at once (below: SERVICES_LANE); extra arguments go to one pytest
# (e.g. scripts/test.sh -m reliability, scripts/test.sh tests/unit).
# The linters run inside pytest (tests/lint: ruff and mypy, configured in pyproject.toml), so a finding fails.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
"$ROOT/scripts/bootstrap.sh" || exit 1
"$ROOT/scripts/cassandra.sh" start || exit 1
"$ROOT/scripts/spark.sh" start || exit 1
"$ROOT/scripts/ensure_chromium.sh" || exit 1
"$ROOT/scripts/ensure_sshd.sh" || exit 1
"$ROOT/scripts/ensure_prometheus.sh" || exit 1
"$ROOT/scripts/ensure_redis.sh" || exit 1
"$ROOT/scripts/ensure_statsd_exporter.sh" >/dev/null || exit 1
export PATH="$ROOT/.venv/bin:$PATH"
# The project's own bytecode too (PYTHONDONTWRITEBYTECODE may be set; stale files are rebuilt by mtime).
"$ROOT/.venv/bin/python" -m compileall -q airflow_atlas dags spark_jobs tests bench >/dev/null

# The whole suite (no arguments) runs in two lanes at once, two pytest processes: the tiers that bring their own
# servers (the 3-node, secured and two-datacenter clusters, the Celery deployment on 127.0.0.11) beside
# everything else. Most of a tier's time is waiting (a cluster or a deployment starting, a heartbeat timing out,
# a retry's delay), so the two lanes share the 2 cores without making either's tests slower in proportion. The
# lanes share only what every tier already shares one test at a time (the local node, each test in a keyspace
# of its own; the Spark master, which queues a second application): each has its own AIRFLOW_HOME
# (tests/conftest.py), temporary directory and pytest cache. The services lane's output is printed when both
# have ended (it is also in test-artifacts/lanes/services.log while it runs). With arguments: one pytest, as given.
SERVICES_LANE=(tests/cluster tests/datacenters tests/deploy tests/integration/security)
LANES_DIR="$ROOT/test-artifacts/lanes"
LANES_TMP="${TMPDIR:-/tmp}/airflow-atlas-pytest"

ran() { # a pytest exit code -> ours (5: nothing ran, an error here)
  if [[ $1 -eq 5 ]]; then
    echo "[test] ERROR: no tests ran${2:+ in the $2 lane}" >&2
    return 1
  fi
  return "$1"
}

if [[ $# -gt 0 ]]; then
  "$ROOT/.venv/bin/python" -m pytest "$@"
  ran $?
  exit $?
fi

mkdir -p "$LANES_DIR" "$LANES_TMP" # (pytest creates --basetemp itself, but not its parent)
ignores=()
for d in "${SERVICES_LANE[@]}"; do ignores+=(--ignore="$d"); done
echo "[test] two lanes: services (${SERVICES_LANE[*]}; its log: $LANES_DIR/services.log) and main (the rest, below)"
"$ROOT/.venv/bin/python" -m pytest --basetemp="$LANES_TMP/services" -o cache_dir=.pytest_cache/services \
  "${SERVICES_LANE[@]}" >"$LANES_DIR/services.log" 2>&1 &
services=$!
trap 'kill "$services" 2>/dev/null' EXIT
"$ROOT/.venv/bin/python" -m pytest --basetemp="$LANES_TMP/main" -o cache_dir=.pytest_cache/main "${ignores[@]}"
main_rc=$?
wait "$services"
services_rc=$?
trap - EXIT
echo
echo "[test] ===== the services lane (${SERVICES_LANE[*]}) ====="
cat "$LANES_DIR/services.log"
ran "$main_rc" main
main_rc=$?
ran "$services_rc" services
services_rc=$?
echo "[test] lanes: main exit $main_rc, services exit $services_rc"
[[ $main_rc -eq 0 && $services_rc -eq 0 ]]
