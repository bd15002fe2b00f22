#!/usr/bin/env bash
# provision-tests.sh: what `npm test` needs beyond node_modules — Debian's CPython 3.13/3.14/3.15
# (scripts/provision-cpython.sh), Chromium (scripts/provision-browser.sh), gdb
# (scripts/provision-gdb.sh, for the native-frame tests) and the BPF tools (scripts/provision-bpf.sh,
# for copies at the interrupt).
#
# Outside CI a part that cannot be provisioned is reported and the tests that need it skip
# with the reason (listed at the end of the run). Under CI (CI=true) it is an error: CI promises
# every interpreter and browser the suite runs on.
set -uo pipefail
cd "$(dirname "$0")/.."
failed=()
STDLIB=1 bash scripts/provision-cpython.sh .cache/cpython || failed+=("the Debian interpreters")
bash scripts/provision-browser.sh || failed+=("Chromium")
bash scripts/provision-gdb.sh || failed+=("gdb")
bash scripts/provision-bpf.sh || failed+=("the BPF tools (clang, libbpf, bpftool)")
[ ${#failed[@]} -eq 0 ] && exit 0
what=$(IFS=,; echo "${failed[*]}" | sed 's/,/ and /g')
case "${CI:-}" in
  true|TRUE|True|1)
    echo "pyunwind: $what could not be provisioned, and CI must run every test" >&2
    exit 1 ;;
esac
echo "pyunwind: $what could not be provisioned: their tests will skip (the coverage list at the end says which)" >&2
exit 0
