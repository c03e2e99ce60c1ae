#!/usr/bin/env bash
# Runs the test suite: bootstraps .venv, starts the local Cassandra node, runs pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh -m reliability, scripts/test.sh tests/unit).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
"$ROOT/scripts/bootstrap.sh" || exit 1
"$ROOT/scripts/cassandra.sh" start || exit 1
"$ROOT/scripts/ensure_chromium.sh" || exit 1
"$ROOT/scripts/ensure_sshd.sh" || exit 1
export PATH="$ROOT/.venv/bin:$PATH"
"$ROOT/.venv/bin/python" -m pytest "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
  echo "[test] ERROR: no tests ran" >&2
  exit 1
fi
exit $rc
