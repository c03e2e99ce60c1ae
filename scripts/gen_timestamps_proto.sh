#!/usr/bin/env bash
# Regenerates the timestamp server's gRPC code from airflow_atlas/timestamps/timestamps.proto (the generated
# files are committed: the deployment and the tests need no code generator). Needs grpcio-tools of the grpcio
# release in requirements.lock, in a virtualenv of its own (not the project's .venv), e.g.
#   python3.11 -m venv /tmp/protoc && /tmp/protoc/bin/pip install grpcio-tools==1.85.1 protobuf==7.36.2
#   PROTOC_PYTHON=/tmp/protoc/bin/python scripts/gen_timestamps_proto.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
"${PROTOC_PYTHON:?set PROTOC_PYTHON to a Python with grpcio-tools}" -m grpc_tools.protoc -I . \
  --python_out=. --pyi_out=. airflow_atlas/timestamps/timestamps.proto
