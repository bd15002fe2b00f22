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

echo "provision-browser: installing Debian's chromium (about half a minute; or set CHROMIUM=/path/to/chromium)"
bash "$(dirname "$0")/apt-install.sh" provision-browser chromium || exit 1
echo "provision-browser: $(/usr/bin/chromium --version 2>/dev/null | tail -1)"
