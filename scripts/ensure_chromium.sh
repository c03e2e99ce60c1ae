#!/usr/bin/env bash
# Makes sure Debian's Chromium is installed for the browser tests (tests/browser, marker `browser`), which
# drive it with Playwright at /usr/bin/chromium (Playwright's own browser downloads are not used).
# Idempotent: does nothing when /usr/bin/chromium exists. As root it installs the `chromium` package with
# apt-get; otherwise it only warns, and the browser tests fail with a message naming this script.
set -uo pipefail
CHROMIUM="${ATLAS_CHROMIUM:-/usr/bin/chromium}"
if [[ -x "$CHROMIUM" ]]; then
  exit 0
fi
if [[ "$(id -u)" -ne 0 ]]; then
  echo "[chromium] WARNING: $CHROMIUM is missing and this is not root: install Debian's chromium package" \
       "(apt-get install -y chromium) or the browser tests will fail" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "[chromium] WARNING: $CHROMIUM is missing and apt-get is not available: the browser tests will fail" >&2
  exit 0
fi
echo "[chromium] installing Debian's chromium package (once)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -q >/tmp/atlas-apt-chromium.log 2>&1 \
       && apt-get install -y -q chromium >>/tmp/atlas-apt-chromium.log 2>&1; }; then
  echo "[chromium] ERROR: apt-get could not install chromium (log: /tmp/atlas-apt-chromium.log):" >&2
  tail -n 20 /tmp/atlas-apt-chromium.log >&2
  exit 1
fi
echo "[chromium] $("$CHROMIUM" --version 2>/dev/null || echo installed)" >&2
