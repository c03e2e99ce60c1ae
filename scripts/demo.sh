#!/usr/bin/env bash
# The main job: a targeted-sweep demo on the embedded store (no server needed).
# `scripts/demo.sh --cassandra` runs the same demo on the local Cassandra node (started for you);
# `scripts/demo.sh --cluster` on an RF 3 keyspace of the local 3-node cluster, swept by Spark jobs on the
# local standalone master with two workers (both started for you); `scripts/demo.sh --secure` on the secured
# node (127.0.0.6: TLS, passwords, CassandraAuthorizer; started for you), the job run as a least-privilege
# sweeper role; `scripts/demo.sh --datacenters` on a keyspace replicated in both datacenters of the local
# two-datacenter cluster (127.0.0.21-23; started for you), swept in dc1, the safety oracle run from both.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
"$ROOT/scripts/bootstrap.sh"
for arg in "$@"; do
  if [[ "$arg" == "--cassandra" ]]; then "$ROOT/scripts/cassandra.sh" start; fi
  if [[ "$arg" == "--secure" ]]; then "$ROOT/scripts/cassandra.sh" secure start; fi
  if [[ "$arg" == "--datacenters" ]]; then "$ROOT/scripts/cassandra.sh" dc start; fi
  if [[ "$arg" == "--cluster" ]]; then "$ROOT/scripts/cassandra.sh" cluster start && "$ROOT/scripts/spark.sh" start; fi
done
export PATH="$ROOT/.venv/bin:$PATH"
exec "$ROOT/.venv/bin/python" "$ROOT/scripts/demo.py" "$@"
