#!/usr/bin/env bash
# Installs the JavaScript client libraries the end-to-end tests drive, pinned, from the npm
# registry into target/js-clients (node-redis 5.12.1: client-side caching over RESP3), with
# Node from Debian's packages when it is missing. Idempotent; needs root (or sudo) only to
# install Node.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/js-clients
want="redis@5.12.1"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
if [ -f "$dir/node_modules/redis/package.json" ] &&
  grep -q '"version": "5.12.1"' "$dir/node_modules/redis/package.json"; then
  echo "install-js-clients: present ($want in $dir)"
  exit 0
fi
mkdir -p "$dir"
npm install --silent --no-audit --no-fund --prefix "$dir" "$want" >/dev/null
echo "install-js-clients: installed $want in $dir"
