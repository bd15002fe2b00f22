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
bash "$(dirname "$0")/apt-install.sh" provision-gdb gdb || exit 1
echo "provision-gdb: $(gdb --version | head -1)"
