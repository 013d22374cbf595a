#!/usr/bin/env bash
# Installs the Python applications the end-to-end tests drive, pinned, from PyPI into a
# virtual environment at target/py-apps (Celery 5.5.3 with its Redis transport: kombu and
# redis-py as Celery pins them), with python3-venv from Debian's packages when it is
# missing. Idempotent; needs root (or sudo) only to install python3-venv.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/py-apps
want="celery[redis]==5.5.3"
if ! /usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
fi
if [ -x "$dir/bin/celery" ] && "$dir/bin/python" -c \
  'import celery, sys; sys.exit(celery.__version__ != "5.5.3")' >/dev/null 2>&1; then
  echo "install-py-apps: present ($want in $dir)"
  exit 0
fi
mkdir -p target
/usr/bin/python3 -m venv "$dir"
"$dir/bin/pip" install --quiet --disable-pip-version-check "$want"
echo "install-py-apps: installed $want in $dir"
