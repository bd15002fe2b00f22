#!/usr/bin/env bash
# build-bpf.sh: the kernel side of copies at the interrupt (bpf/copier.bpf.c) with clang's BPF
# target, into dist/bpf/copier.bpf.o. Without clang or libbpf's headers it says so and builds
# nothing (the recorder then says copies at the interrupt are not built in), unless
# REQUIRED=1 (scripts/provision-bpf.sh), where that is an error.
set -euo pipefail
cd "$(dirname "$0")/.."
out=dist/bpf/copier.bpf.o
missing=""
command -v clang >/dev/null || missing="clang"
[ -f /usr/include/bpf/bpf_helpers.h ] || missing="${missing:+$missing and }libbpf's headers (libbpf-dev)"
if [ -n "$missing" ]; then
  echo "build-bpf: $missing not installed: the BPF copier is not built (apt install clang libbpf-dev)" >&2
  [ "${REQUIRED:-0}" = 1 ] && exit 1
  exit 0
fi
mkdir -p dist/bpf
# (the uapi headers include <asm/types.h>, which Debian keeps under the multiarch directory)
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
clang -O2 -g -target bpf -I"/usr/include/$multiarch" -c bpf/copier.bpf.c -o "$out"
echo "build-bpf: $out"
