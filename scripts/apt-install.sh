#!/usr/bin/env bash
# apt-install.sh WHO PACKAGE...: Debian's packages, for the provisioning scripts. As root, or
# through `sudo -n`; the package lists are updated once if the first try fails (a fresh machine
# may have none). On failure it says why in one line, prefixed by WHO, and exits non-zero; the
# log is /tmp/WHO.log.
set -uo pipefail
who=$1
shift
log=/tmp/$who.log
if ! command -v apt-get >/dev/null; then
  echo "$who: no apt-get here: install $*" >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "$who: installing $* needs root (or sudo without a password): install them" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends "$@" >"$log" 2>&1; then
  "${as_root[@]}" apt-get update -q >>"$log" 2>&1 || true
  if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends "$@" >>"$log" 2>&1; then
    echo "$who: apt-get could not install $* (log: $log)" >&2
    tail -3 "$log" >&2
    exit 1
  fi
fi
