#!/usr/bin/env bash
# Local Apache Cassandra 5.0 nodes for airflow-atlas: tests, CI and users (devkit/cassandra/: the commands and
# every variable are in its module doc, devkit/cassandra/__init__.py).
#
#   scripts/cassandra.sh fetch | start [--fresh] [--adopt] | status | stop | discard | restart | nodetool ARGS |
#                        log | logfile | config                       the single node (default 127.0.0.1)
#   scripts/cassandra.sh cluster ...                                  N nodes on 127.0.0.2 .. 127.0.0.(N+1)
#   scripts/cassandra.sh dc ...                                       two datacenters on 127.0.0.21 .. 127.0.0.23
#   scripts/cassandra.sh secure ... | secure cluster ...              secured node 127.0.0.6, cluster 127.0.0.7-9
#
# Runs on the project's .venv when it exists (the secured nodes' roles need its cassandra-driver), else on
# python3 (3.11 or later): the rest is the standard library, so `fetch` and `start` work before
# scripts/bootstrap.sh has run. The working directory is the caller's (a relative ATLAS_CACHE_DIR is resolved
# from it).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
[[ -x "$PY" ]] || PY="$(command -v python3)" || { echo "[cassandra] ERROR: python3 is required" >&2; exit 1; }
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" -m devkit.cassandra "$@"
