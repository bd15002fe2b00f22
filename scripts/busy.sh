#!/usr/bin/env bash
# scripts/busy.sh N COMMAND... — run COMMAND with N busy loops (one CPU each) beside it, as a
# loaded CI runner or laptop would be; the loops end with the command. Its exit code is the
# command's. E.g. `scripts/busy.sh 2 npm test`.
set -u
n=${1:?usage: scripts/busy.sh N COMMAND...}; shift
pids=()
for _ in $(seq 1 "$n"); do
  ( while :; do :; done ) &
  pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
"$@"
