#!/usr/bin/env bash
# Two timestamp server instances for the local Cassandra node (127.0.0.1:9350 and :9351; one leads, the other
# stands by), started for the store atlas_timestamps_home and serving every adopted keyspace of the node:
#   scripts/timestamps.sh start | stop | status        (devkit/timestamps.py; logs in $TMPDIR/airflow-atlas-timestamps)
#   scripts/timestamps.sh start --cert-file CERT.pem --key-file KEY.pem   serve TLS (clients: $ATLAS_TIMESTAMP_TLS_CA)
#     [--client-ca-file CA.pem]   mutual TLS: clients present a certificate CA.pem signed
#                                 ($ATLAS_TIMESTAMP_TLS_CERT, $ATLAS_TIMESTAMP_TLS_KEY)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m devkit.timestamps "$@"
