#!/usr/bin/env bash
# The main job: a targeted-sweep demo on the embedded store (no server needed).
# `scripts/demo.sh --cassandra` runs the same demo on the local Cassandra node (started for you).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
"$ROOT/scripts/bootstrap.sh"
for arg in "$@"; do
  if [[ "$arg" == "--cassandra" ]]; then "$ROOT/scripts/cassandra.sh" start; fi
done
export PATH="$ROOT/.venv/bin:$PATH"
exec "$ROOT/.venv/bin/python" -m airflow_atlas.demo "$@"
