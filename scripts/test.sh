#!/usr/bin/env bash
# Runs the test suite: bootstraps .venv, starts the local Cassandra node (127.0.0.1) and the Spark standalone
# master with two workers (127.0.0.5), runs pytest. The local 3-node Cassandra cluster (127.0.0.2-4) is
# started by the fixture of tests/cluster for that package only (scripts/cassandra.sh cluster ...); the
# secured node (127.0.0.6) and secured 3-node cluster (127.0.0.7-9) by the fixtures of
# tests/integration/security for that package only (scripts/cassandra.sh secure ...); the two-datacenter
# cluster (127.0.0.21-23) by the fixture of tests/datacenters for that package only (scripts/cassandra.sh dc ...).
# Every start is idempotent (a running node or master is reused, never restarted).
# Extra arguments go to pytest (e.g. scripts/test.sh -m reliability, scripts/test.sh tests/unit).
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
"$ROOT/.venv/bin/python" -m pytest "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
  echo "[test] ERROR: no tests ran" >&2
  exit 1
fi
exit $rc
