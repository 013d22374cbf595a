#!/usr/bin/env bash
# Installs the benchmark and test peers from Debian's packages: fio (device bench),
# redis-server and redis-tools (redis-benchmark, redis-cli), memcached, python3-redis
# (redis-py, for Debian's /usr/bin/python3). Idempotent; needs root (or sudo).
set -euo pipefail
packages=(fio redis-server redis-tools memcached python3-redis)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-peers: all present (${packages[*]})"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-peers: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
# The packages start their services; benchmarks start their own instances on other ports.
for svc in redis-server memcached; do
  $SUDO systemctl stop "$svc" >/dev/null 2>&1 || $SUDO service "$svc" stop >/dev/null 2>&1 || true
done
echo "install-peers: done"
