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
  if ! command -v apt-get >/dev/null; then
    echo "provision-bpf: no apt-get here: install ${need[*]}" >&2
    exit 1
  fi
  if [ "$(id -u)" -eq 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
  else
    echo "provision-bpf: installing ${need[*]} needs root (or sudo without a password): install them" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends "${need[@]}" >/tmp/provision-bpf.log 2>&1; then
    "${as_root[@]}" apt-get update -q >>/tmp/provision-bpf.log 2>&1 || true
    if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends "${need[@]}" >>/tmp/provision-bpf.log 2>&1; then
      echo "provision-bpf: apt-get could not install ${need[*]} (log: /tmp/provision-bpf.log)" >&2
      exit 1
    fi
  fi
fi
REQUIRED=1 bash scripts/build-bpf.sh
echo "provision-bpf: $(clang --version | head -1)"
