#!/usr/bin/env bash
# Runs the test suite: bootstraps .venv and runs pytest. It starts no service, with or without arguments:
# each service is started by the session fixture of the tests that use it, at their first use, when it does
# not run (tests/services.py: the local Cassandra node, 127.0.0.1, and its timestamp servers; the Spark
# standalone master with two workers, 127.0.0.5; the packages Chromium, sshd, Prometheus, Redis and
# statsd_exporter, installed when missing), under a file lock per service, so the two groups of the
# whole-suite run asking at once start it once; a service that cannot start fails the tests that use it, naming it and its
# log. So `scripts/test.sh tests/unit` starts nothing. The other clusters are started by their tiers' fixtures
# for that package only: the 3-node cluster (127.0.0.2-4) by tests/cluster, the secured node (127.0.0.6) and
# secured 3-node cluster (127.0.0.7-9) by tests/integration/security, the two-datacenter cluster
# (127.0.0.21-23) by tests/datacenters, the deployment by tests/deploy. Every start is idempotent (a running
# node or master is reused, never restarted), and what the shared fixtures started is left running.
# Without arguments the suite runs its two groups at once, then tests/cluster and the pace's latency tests alone
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

# The whole suite: its two groups at once (pytest-xdist, one worker per group: tests/groups.py), then the 3-node
# cluster's tier and the tests that judge the sweep's pace by a latency measured on this machine alone. Most of a
# tier's time is waiting (a cluster or a deployment starting, a heartbeat timing out, a retry's delay), so two
# groups share the 2 cores without making either's tests slower in proportion (one after the other the suite took
# 74 min; the groups' split by measured tier times is in docs/TESTING.md). The groups share only what every tier
# already shares one test at a time (the local node, each test in a keyspace of its own; the Spark master, which
# queues a second application); each worker has its own AIRFLOW_HOME (tests/conftest.py) and temporary directory.
# tests/cluster runs alone: its three nodes, starved by a group beside them, timed out client heartbeats and hit
# Cassandra's schema race on DROP KEYSPACE (a clean-clone run of 2026-11-29); the application pace's
# acceptance test measures the sweep's rate in half-second windows, which a group beside it would starve.
ALONE=(tests/cluster tests/integration/sweep/test_application_pace.py)
RUNS_TMP="${TMPDIR:-/tmp}/airflow-atlas-pytest"
mkdir -p "$RUNS_TMP" # (pytest creates --basetemp itself, but not its parent)
ignores=()
for d in "${ALONE[@]}"; do ignores+=(--ignore="$d"); done
echo "[test] the two groups at once (tests/groups.py; pytest-xdist), the rest but ${ALONE[*]}; then ${ALONE[*]} alone"
"$ROOT/.venv/bin/python" -m pytest -n 2 --dist loadgroup --basetemp="$RUNS_TMP/groups" "${ignores[@]}"
groups_rc=$?
echo
echo "[test] ===== alone: ${ALONE[*]} ====="
"$ROOT/.venv/bin/python" -m pytest --basetemp="$RUNS_TMP/alone" "${ALONE[@]}"
alone_rc=$?
failed=0
ran "$groups_rc" "the two groups" || failed=1
ran "$alone_rc" "${ALONE[*]}" || failed=1
echo "[test] exit codes: the two groups $groups_rc, ${ALONE[*]} $alone_rc"
exit "$failed"
