#!/usr/bin/env bash
# provision-gdb.sh: gdb, which the native-frame tests run beside `dump --native` on the same
# stopped threads (test/native-dump.test.ts). Nothing happens when gdb is there; otherwise
# Debian's package is installed with apt-get, as root or through `sudo -n`, or the script says
# why not and exits non-zero (the tests then skip, loudly; under CI they fail).
set -euo pipefail
if command -v gdb >/dev/null; then
  echo "provision-gdb: $(gdb --version | head -1)"
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "provision-gdb: no apt-get here: install gdb" >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "provision-gdb: installing Debian's gdb needs root (or sudo without a password): install it" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends gdb >/tmp/provision-gdb.log 2>&1; then
  "${as_root[@]}" apt-get update -q >>/tmp/provision-gdb.log 2>&1 || true
  if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends gdb >>/tmp/provision-gdb.log 2>&1; then
    echo "provision-gdb: apt-get could not install gdb (log: /tmp/provision-gdb.log)" >&2
    exit 1
  fi
fi
echo "provision-gdb: $(gdb --version | head -1)"
