#!/usr/bin/env bash
# provision-browser.sh: make Debian's Chromium available for the browser tests (the viewers of
# `report --format flamegraph|heatmap|speedscope` opened offline, driven by playwright-core).
#
# Nothing happens when a Chromium is already there ($CHROMIUM, /usr/bin/chromium). Otherwise
# the Debian package `chromium` is installed with apt-get, as root or through `sudo -n`; where
# neither is possible the script says so and exits non-zero: the browser tests then skip, loudly.
set -euo pipefail

for c in "${CHROMIUM:-}" /usr/bin/chromium /usr/bin/chromium-browser; do
  if [ -n "$c" ] && [ -x "$c" ]; then
    echo "provision-browser: $("$c" --version 2>/dev/null | tail -1) ($c)"
    exit 0
  fi
done

if ! command -v apt-get >/dev/null; then
  echo "provision-browser: no apt-get here: install Chromium and set CHROMIUM=/path/to/chromium" >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "provision-browser: installing Debian's chromium needs root (or sudo without a password): install it, or set CHROMIUM" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
echo "provision-browser: installing Debian's chromium (about half a minute)"
if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends chromium >/tmp/provision-browser.log 2>&1; then
  # the package lists may be missing or stale on a fresh machine
  "${as_root[@]}" apt-get update -q >>/tmp/provision-browser.log 2>&1 || true
  if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends chromium >>/tmp/provision-browser.log 2>&1; then
    echo "provision-browser: apt-get could not install chromium (log: /tmp/provision-browser.log)" >&2
    tail -3 /tmp/provision-browser.log >&2
    exit 1
  fi
fi
echo "provision-browser: $(/usr/bin/chromium --version 2>/dev/null | tail -1)"
