#!/usr/bin/env bash
# Makes sure OpenSSH's server binary is installed for the SSH nodetool test
# (tests/airflow/hooks/test_nodetool_ssh.py), which starts its OWN private sshd on 127.0.0.1 with a
# throwaway config and keys; the system sshd is never configured, started or enabled by this script.
# Idempotent: does nothing when /usr/sbin/sshd exists. As root it installs the `openssh-server` package
# with apt-get; otherwise it only warns, and the SSH test fails with a message naming this script.
set -uo pipefail
SSHD="${ATLAS_SSHD:-/usr/sbin/sshd}"
if [[ -x "$SSHD" ]]; then
  exit 0
fi
if [[ "$(id -u)" -ne 0 ]]; then
  echo "[sshd] WARNING: $SSHD is missing and this is not root: install Debian's openssh-server package" \
       "(apt-get install -y openssh-server) or the SSH nodetool test will fail" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "[sshd] WARNING: $SSHD is missing and apt-get is not available: the SSH nodetool test will fail" >&2
  exit 0
fi
echo "[sshd] installing Debian's openssh-server package (once; the system sshd is not started)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq >/tmp/atlas-apt-sshd.log 2>&1 \
       && apt-get install -y -qq openssh-server >>/tmp/atlas-apt-sshd.log 2>&1; }; then
  echo "[sshd] ERROR: apt-get could not install openssh-server (log: /tmp/atlas-apt-sshd.log):" >&2
  tail -n 20 /tmp/atlas-apt-sshd.log >&2
  exit 1
fi
if [[ ! -x "$SSHD" ]]; then
  echo "[sshd] ERROR: openssh-server is installed but $SSHD is still missing" >&2
  exit 1
fi
echo "[sshd] $("$SSHD" -V 2>&1 | head -n 1 || echo installed)" >&2
