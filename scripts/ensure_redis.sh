#!/usr/bin/env bash
# Makes sure Debian's Redis server binary is installed for the deployment tier (tests/deploy, started by
# scripts/deploy.sh on 127.0.0.11 with its own directory and port); the system service is never configured,
# started or enabled by this script (apt's policy-rc.d, when the image has one, keeps it from starting;
# otherwise the packaged service is stopped and disabled right after the install).
# Idempotent: does nothing when /usr/bin/redis-server exists. As root it installs `redis-server` (without
# recommends) with apt-get; otherwise it only warns, and scripts/deploy.sh fails with a message naming this script.
set -uo pipefail
REDIS="${ATLAS_REDIS_SERVER:-/usr/bin/redis-server}"
if [[ -x "$REDIS" ]]; then
  exit 0
fi
if [[ "$(id -u)" -ne 0 ]]; then
  echo "[redis] WARNING: $REDIS is missing and this is not root: install Debian's redis-server package" \
       "(apt-get install -y --no-install-recommends redis-server) or the deployment tests will fail" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "[redis] WARNING: $REDIS is missing and apt-get is not available: the deployment tests will fail" >&2
  exit 0
fi
echo "[redis] installing Debian's redis-server package (once; the system service is not used)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq >/tmp/atlas-apt-redis.log 2>&1 \
       && apt-get install -y -qq --no-install-recommends redis-server >>/tmp/atlas-apt-redis.log 2>&1; }; then
  echo "[redis] ERROR: apt-get could not install redis-server (log: /tmp/atlas-apt-redis.log):" >&2
  tail -n 20 /tmp/atlas-apt-redis.log >&2
  exit 1
fi
if [[ ! -x "$REDIS" ]]; then
  echo "[redis] ERROR: redis-server is installed but $REDIS is still missing" >&2
  exit 1
fi
# Without a policy-rc.d the package starts its service (127.0.0.1:6379): stop and disable it.
if command -v systemctl >/dev/null && systemctl is-active --quiet redis-server 2>/dev/null; then
  systemctl disable --now redis-server >/dev/null 2>&1 || true
elif [[ -x /etc/init.d/redis-server ]] && /etc/init.d/redis-server status >/dev/null 2>&1; then
  /etc/init.d/redis-server stop >/dev/null 2>&1 || true
  command -v update-rc.d >/dev/null && update-rc.d redis-server disable >/dev/null 2>&1 || true
fi
echo "[redis] $("$REDIS" --version 2>&1 | head -n 1 || echo installed)" >&2
