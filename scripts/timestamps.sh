#!/usr/bin/env bash
# Two timestamp server instances for the local Cassandra node (127.0.0.1:9350 and :9351; one leads, the other
# stands by), started for the store atlas_timestamps_home and serving every adopted keyspace of the node:
#   scripts/timestamps.sh start | stop | status        (devkit/timestamps.py; logs in $TMPDIR/airflow-atlas-timestamps)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m devkit.timestamps "$@"
