#!/usr/bin/env bash
# Runs the test suite: bootstraps .venv and runs pytest. It starts no service, with or without arguments:
# each service is started by the session fixture of the tests that use it, at their first use, when it does
# not run (tests/services.py: the local Cassandra node, 127.0.0.1, and its timestamp servers; the Spark
# standalone master with two workers, 127.0.0.5; the packages Chromium, sshd, Prometheus, Redis and
# statsd_exporter, installed when missing), under a file lock per service, so the two lanes of the whole-suite
# run asking at once start it once; a service that cannot start fails the tests that use it, naming it and its
# log. So `scripts/test.sh tests/unit` starts nothing. The other clusters are started by their tiers' fixtures
# for that package only: the 3-node cluster (127.0.0.2-4) by tests/cluster, the secured node (127.0.0.6) and
# secured 3-node cluster (127.0.0.7-9) by tests/integration/security, the two-datacenter cluster
# (127.0.0.21-23) by tests/datacenters, the deployment by tests/deploy. Every start is idempotent (a running
# node or master is reused, never restarted), and what the shared fixtures started is left running.
# Without arguments the suite runs in two lanes at once, then tests/cluster and the pace's latency tests alone
# (below); extra arguments go to one pytest (e.g. scripts/test.sh -m reliability, scripts/test.sh tests/unit).
# The linters run inside pytest (tests/lint: ruff and mypy, configured in pyproject.toml), so a finding fails.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
"$ROOT/scripts/bootstrap.sh" || exit 1
export PATH="$ROOT/.venv/bin:$PATH"
# The project's own bytecode too (PYTHONDONTWRITEBYTECODE may be set; stale files are rebuilt by mtime).
"$ROOT/.venv/bin/python" -m compileall -q airflow_atlas dags spark_jobs tests bench >/dev/null

ran() { # a pytest exit code -> ours (5: nothing ran, an error here)
  if [[ $1 -eq 5 ]]; then
    echo "[test] ERROR: no tests ran${2:+ in $2}" >&2
    return 1
  fi
  return "$1"
}

if [[ $# -gt 0 ]]; then
  "$ROOT/.venv/bin/python" -m pytest "$@"
  ran $?
  exit $?
fi

# The whole suite: two pytest processes at once, then the 3-node cluster's tier and the tests that judge the
# sweep's pace by a latency measured on this machine alone. Most of a tier's time is
# waiting (a cluster or a deployment starting, a heartbeat timing out, a retry's delay), so two lanes share the 2
# cores without making either's tests slower in proportion (one after the other the suite took 74 min; the lanes'
# split by measured tier times is in docs/TESTING.md). The lanes share only what every tier already shares one
# test at a time (the local node, each test in a keyspace of its own; the Spark master, which queues a second
# application); each has its own AIRFLOW_HOME (tests/conftest.py), temporary directory and pytest cache.
# tests/cluster runs alone: its three nodes, starved by a lane beside them, timed out client heartbeats and hit
# Cassandra's schema race on DROP KEYSPACE (a clean-clone run of 2026-11-29); the application pace's
# acceptance test measures the sweep's rate in half-second windows, which a lane beside it would starve. The servers lane's output is
# printed when both lanes have ended (it is in test-artifacts/lanes/servers.log while it runs).
SERVERS_LANE=(tests/integration/security tests/deploy tests/datacenters tests/integration/transactions tests/integration/kvs
  tests/integration/foundation tests/integration/sweep/queue)
ALONE=(tests/cluster tests/integration/sweep/test_application_pace.py)
LANES_DIR="$ROOT/test-artifacts/lanes"
LANES_TMP="${TMPDIR:-/tmp}/airflow-atlas-pytest"
mkdir -p "$LANES_DIR" "$LANES_TMP" # (pytest creates --basetemp itself, but not its parent)
lane() { # name, paths or options...
  local name="$1"
  shift
  "$ROOT/.venv/bin/python" -m pytest --basetemp="$LANES_TMP/$name" -o cache_dir=".pytest_cache/$name" "$@"
}
ignores=()
for d in "${SERVERS_LANE[@]}" "${ALONE[@]}"; do ignores+=(--ignore="$d"); done
echo "[test] two lanes at once: servers (${SERVERS_LANE[*]}; its log: $LANES_DIR/servers.log) and main (the rest" \
  "but ${ALONE[*]}, below); then ${ALONE[*]} alone"
lane servers "${SERVERS_LANE[@]}" >"$LANES_DIR/servers.log" 2>&1 &
servers=$!
trap 'kill "$servers" 2>/dev/null' EXIT
lane main "${ignores[@]}"
main_rc=$?
wait "$servers"
servers_rc=$?
trap - EXIT
echo
echo "[test] ===== the servers lane (${SERVERS_LANE[*]}) ====="
cat "$LANES_DIR/servers.log"
echo
echo "[test] ===== alone: ${ALONE[*]} ====="
lane alone "${ALONE[@]}"
alone_rc=$?
failed=0
ran "$main_rc" "the main lane" || failed=1
ran "$servers_rc" "the servers lane" || failed=1
ran "$alone_rc" "${ALONE[*]}" || failed=1
echo "[test] exit codes: main lane $main_rc, servers lane $servers_rc, ${ALONE[*]} $alone_rc"
exit "$failed"
