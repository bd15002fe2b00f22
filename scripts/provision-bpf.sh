#!/usr/bin/env bash
# provision-bpf.sh: what copies at the interrupt need (test/kernel-copy.test.ts): clang (its BPF
# target builds bpf/copier.bpf.c), libbpf (its headers to build, its library to load) and bpftool
# (the tests check that nothing is left loaded). Debian's packages are installed with apt-get
# where missing, as root or through `sudo -n`; then the program is built (scripts/build-bpf.sh).
# Otherwise the script says why not and exits non-zero (the tests then skip, loudly; under CI
# they fail).
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v clang >/dev/null || need+=(clang)
[ -f /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
ldconfig -p 2>/dev/null | grep -q 'libbpf\.so\.1 ' || need+=(libbpf1)
command -v bpftool >/dev/null || [ -x /usr/sbin/bpftool ] || need+=(bpftool)
if [ ${#need[@]} -gt 0 ]; then
  bash scripts/apt-install.sh provision-bpf "${need[@]}" || exit 1
fi
REQUIRED=1 bash scripts/build-bpf.sh
echo "provision-bpf: $(clang --version | head -1)"
