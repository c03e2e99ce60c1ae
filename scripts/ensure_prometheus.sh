#!/usr/bin/env bash
# Makes sure Debian's Prometheus server binary is installed for the metrics test
# (tests/integration/cli/test_metrics_prometheus.py), which starts its OWN Prometheus on 127.0.0.1 with a
# throwaway config and data directory, scraping `atlas-sweep metrics`; the system service is never
# configured, started or enabled by this script (apt's policy-rc.d, when the image has one, keeps it from
# starting; otherwise the packaged service is stopped and disabled right after the install).
# Idempotent: does nothing when /usr/bin/prometheus exists. As root it installs the `prometheus` package
# (without recommends: no node exporter) with apt-get; otherwise it only warns, and the Prometheus test
# fails with a message naming this script.
set -uo pipefail
PROMETHEUS="${ATLAS_PROMETHEUS:-/usr/bin/prometheus}"
if [[ -x "$PROMETHEUS" ]]; then
  exit 0
fi
if [[ "$(id -u)" -ne 0 ]]; then
  echo "[prometheus] WARNING: $PROMETHEUS is missing and this is not root: install Debian's prometheus package" \
       "(apt-get install -y --no-install-recommends prometheus) or the Prometheus metrics test will fail" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "[prometheus] WARNING: $PROMETHEUS is missing and apt-get is not available: the Prometheus metrics test will fail" >&2
  exit 0
fi
echo "[prometheus] installing Debian's prometheus package (once; the system service is not used)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq >/tmp/atlas-apt-prometheus.log 2>&1 \
       && apt-get install -y -qq --no-install-recommends prometheus >>/tmp/atlas-apt-prometheus.log 2>&1; }; then
  echo "[prometheus] ERROR: apt-get could not install prometheus (log: /tmp/atlas-apt-prometheus.log):" >&2
  tail -n 20 /tmp/atlas-apt-prometheus.log >&2
  exit 1
fi
if [[ ! -x "$PROMETHEUS" ]]; then
  echo "[prometheus] ERROR: prometheus is installed but $PROMETHEUS is still missing" >&2
  exit 1
fi
# Without a policy-rc.d the package starts its service (listening on all interfaces): stop and disable it.
if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
elif [[ -x /etc/init.d/prometheus ]] && /etc/init.d/prometheus status >/dev/null 2>&1; then
  /etc/init.d/prometheus stop >/dev/null 2>&1 || true
  command -v update-rc.d >/dev/null && update-rc.d prometheus disable >/dev/null 2>&1 || true
fi
echo "[prometheus] $("$PROMETHEUS" --version 2>&1 | head -n 1 || echo installed)" >&2
