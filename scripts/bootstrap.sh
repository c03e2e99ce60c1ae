#!/usr/bin/env bash
# Creates or refreshes the project's virtual environment (.venv) from requirements.lock.
# Safe to re-run: does nothing when the environment already matches the lock file.
# Needs only Python 3.11 on PATH (python3.11 or python3); installs uv into the venv itself.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
UV_VERSION=0.13.8
STAMP="$VENV/.atlas-lock-stamp"

want="$(cat "$ROOT/requirements.lock" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  exit 0
fi

PY="${ATLAS_PYTHON:-}"
if [[ -z "$PY" ]]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(0 if sys.version_info[:2] in ((3, 11), (3, 12)) else 1)'; then
      PY="$(command -v "$candidate")"
      break
    fi
  done
fi
[[ -n "$PY" ]] || { echo "[bootstrap] ERROR: Python 3.11 (python3.11 or python3) is required" >&2; exit 1; }

echo "[bootstrap] creating $VENV with $PY" >&2
if [[ ! -x "$VENV/bin/python" ]]; then
  "$PY" -m venv "$VENV"
fi
if [[ ! -x "$VENV/bin/uv" ]] || [[ "$("$VENV/bin/uv" --version 2>/dev/null | cut -d' ' -f2)" != "$UV_VERSION" ]]; then
  "$VENV/bin/python" -m pip --version >/dev/null 2>&1 || "$VENV/bin/python" -m ensurepip >/dev/null
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
fi
echo "[bootstrap] installing locked dependencies (requirements.lock)" >&2
# --compile-bytecode: the environment may set PYTHONDONTWRITEBYTECODE, and every Python process the
# suite starts (CLI, Airflow, Spark workers) would otherwise recompile what it imports (Airflow: ~3 s each).
"$VENV/bin/uv" pip install -q --compile-bytecode --python "$VENV/bin/python" -r "$ROOT/requirements.lock"
"$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --no-deps -e "$ROOT"
# pyspark and pyspark-client share the `pyspark` import package: insist they are the same release.
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md, sys
import pyspark
full = md.version("pyspark")
client = md.version("pyspark-client")
if not (pyspark.__version__ == full == client):
    sys.exit(f"[bootstrap] ERROR: pyspark {full} / pyspark-client {client} / imported {pyspark.__version__} differ")
PY
echo "$want" >"$STAMP"
echo "[bootstrap] environment ready" >&2
