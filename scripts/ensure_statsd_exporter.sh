#!/usr/bin/env bash
# Makes sure a Prometheus statsd_exporter binary is installed for the deployment (scripts/deploy.sh runs it
# as the component `statsd-exporter`, the StatsD receiver of the deployment's Airflow metrics, as compose
# runs prom/statsd-exporter; tests/deploy checks that the sweep's per-pair metrics arrive there).
# Idempotent: does nothing when the binary is there. Prints the binary's path on stdout.
#   1. Debian's package `prometheus-statsd-exporter` (/usr/bin/prometheus-statsd-exporter) when apt offers it
#      (Debian 12 has none);
#   2. otherwise the Go module github.com/prometheus/statsd_exporter at the version of compose's image
#      (docker/docker-compose.yml, prom/statsd-exporter:vX.Y.Z: one version for both), built from source
#      with `go install` into /usr/local/bin/statsd_exporter (needs Go; about two minutes the first time).
# $ATLAS_STATSD_EXPORTER names a binary to use instead. Only the binary is installed: no service is
# configured, started or enabled (the Debian package's service is stopped and disabled if it started).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEBIAN_BIN=/usr/bin/prometheus-statsd-exporter
GO_BIN=/usr/local/bin/statsd_exporter
LOG=/tmp/atlas-statsd-exporter-install.log

say() { echo "[statsd-exporter] $*" >&2; }
found() { echo "$1"; exit 0; }

if [[ -n "${ATLAS_STATSD_EXPORTER:-}" ]]; then
  [[ -x "$ATLAS_STATSD_EXPORTER" ]] || { say "ERROR: ATLAS_STATSD_EXPORTER=$ATLAS_STATSD_EXPORTER is not an executable"; exit 1; }
  found "$ATLAS_STATSD_EXPORTER"
fi
[[ -x "$DEBIAN_BIN" ]] && found "$DEBIAN_BIN"
[[ -x "$GO_BIN" ]] && found "$GO_BIN"
if [[ "$(id -u)" -ne 0 ]]; then
  say "ERROR: no statsd_exporter and this is not root: run scripts/ensure_statsd_exporter.sh as root"
  exit 1
fi

if command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  candidate="$(apt-cache policy prometheus-statsd-exporter 2>/dev/null | sed -n 's/^ *Candidate: //p')"
  if [[ -z "$candidate" ]]; then
    apt-get update -qq >"$LOG" 2>&1 || true
    candidate="$(apt-cache policy prometheus-statsd-exporter 2>/dev/null | sed -n 's/^ *Candidate: //p')"
  fi
  if [[ -n "$candidate" && "$candidate" != "(none)" ]]; then
    say "installing Debian's prometheus-statsd-exporter $candidate (the system service is not used)"
    if apt-get install -y -qq --no-install-recommends prometheus-statsd-exporter >>"$LOG" 2>&1 && [[ -x "$DEBIAN_BIN" ]]; then
      if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus-statsd-exporter 2>/dev/null; then
        systemctl disable --now prometheus-statsd-exporter >/dev/null 2>&1 || true
      elif [[ -x /etc/init.d/prometheus-statsd-exporter ]]; then
        /etc/init.d/prometheus-statsd-exporter stop >/dev/null 2>&1 || true
        command -v update-rc.d >/dev/null && update-rc.d prometheus-statsd-exporter disable >/dev/null 2>&1 || true
      fi
      found "$DEBIAN_BIN"
    fi
    say "apt-get could not install prometheus-statsd-exporter (log: $LOG); building it from source instead"
  fi
fi

version="$(sed -n 's/.*image: *prom\/statsd-exporter:\(v[0-9][0-9.]*\).*/\1/p' "$ROOT/docker/docker-compose.yml" | head -n 1)"
[[ -n "$version" ]] || { say "ERROR: no prom/statsd-exporter:vX.Y.Z image in docker/docker-compose.yml"; exit 1; }
command -v go >/dev/null || { say "ERROR: no Debian package and no Go toolchain: cannot install statsd_exporter $version"; exit 1; }
say "building github.com/prometheus/statsd_exporter@$version with go install into $(dirname "$GO_BIN") (once)"
if ! GOBIN="$(dirname "$GO_BIN")" go install "github.com/prometheus/statsd_exporter@$version" >>"$LOG" 2>&1; then
  say "ERROR: go install failed (log: $LOG):"
  tail -n 20 "$LOG" >&2
  exit 1
fi
[[ -x "$GO_BIN" ]] || { say "ERROR: go install succeeded but $GO_BIN is missing"; exit 1; }
found "$GO_BIN"
