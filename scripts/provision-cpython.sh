#!/usr/bin/env bash
# provision-cpython.sh [DEST] [VERSIONS...]
#
# Unpacks Debian's python3.X-minimal packages, together with the suite's own glibc,
# into DEST (default .cache/cpython) and writes launchers DEST/bin/python3.X.
# Nothing on the host changes: apt runs with a private configuration under DEST (its
# own sources, lists, cache and an empty dpkg status); there is no chroot and no install.
# The interpreters run through the unpacked ld.so, because the host's glibc may be older
# than the one they were built against.
#
# Suites are tried in order (sid, then forky, then trixie) per version; a version that no
# suite offers is reported, and the script exits non-zero once it has done the others (their
# tests skip with the reason; under CI they fail). Set STDLIB=1 to
# also unpack libpython3.X-stdlib (asyncio, json, profiling.sampling, ...).
# The interpreters' C headers (libpython3.X-dev) come too, for the test that checks the layouts
# against offsetof(); HEADERS=0 leaves them out.
# Set MIRROR= to override the Debian mirror taken from the host's apt sources.
set -euo pipefail
ok=()
failed=()
DEST=$(realpath -m "${1:-.cache/cpython}"); [ $# -gt 0 ] && shift
VERSIONS=${*:-3.13 3.14 3.15}
STDLIB=${STDLIB:-0}
HEADERS=${HEADERS:-1}
SUITES=${SUITES:-sid forky trixie}

mirror() {
  local m=""
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    m=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
  fi
  if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
    m=$(awk '$1=="deb" && $0 !~ /security/ {for(i=2;i<=NF;i++) if ($i ~ /^https?:/) {print $i; exit}}' /etc/apt/sources.list)
  fi
  echo "${m:-http://deb.debian.org/debian}"
}
MIRROR=${MIRROR:-$(mirror)}

for tool in apt-get dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "provision-cpython: $tool not found; cannot provision Debian interpreters" >&2; exit 1; }
done

# use_suite SUITE: a private apt configuration for SUITE under DEST/suites/SUITE (sets S)
use_suite() {
  S=$DEST/suites/$1; local A=$S/.apt
  mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/parts" "$S/debs" "$S/root" "$DEST/bin"
  touch "$A/status"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $1 main" > "$A/sources.list"
  cat > "$A/apt.conf" <<CONF
Dir::Etc::SourceList "$A/sources.list";
Dir::Etc::SourceParts "$A/parts";
Dir::State::Lists "$A/lists";
Dir::State::status "$A/status";
Dir::Cache "$A/cache";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Check-Valid-Until "false";
Acquire::Languages "none";
APT::Architecture "amd64";
APT::Sandbox::User "root";
CONF
  export APT_CONFIG=$A/apt.conf
  if [ ! -f "$S/.updated" ]; then
    apt-get update -qq >/dev/null 2>&1 && touch "$S/.updated" || { echo "provision-cpython: apt-get update failed for $1" >&2; return 1; }
  fi
}

# patchelf, for the test of an interpreter binary patched to use another loader: from the
# host's own suite, so that it runs with the host's libraries
if [ ! -x "$DEST/bin/patchelf" ]; then
  host_suite=$(. /etc/os-release 2>/dev/null; echo "${VERSION_CODENAME:-}")
  if [ -n "$host_suite" ] && use_suite "$host_suite" && (cd "$S/debs" && apt-get download -qq patchelf >/dev/null 2>&1); then
    dpkg-deb -x "$S"/debs/patchelf_*.deb "$S/root" && ln -sf "$S/root/usr/bin/patchelf" "$DEST/bin/patchelf"
    "$DEST/bin/patchelf" --version >/dev/null 2>&1 && echo "provision-cpython: $("$DEST/bin/patchelf" --version)" || rm -f "$DEST/bin/patchelf"
  fi
  [ -x "$DEST/bin/patchelf" ] || { echo "provision-cpython: patchelf not provisioned; its test will skip" >&2; failed+=(patchelf); }
fi

for v in $VERSIONS; do
  have_headers() { [ "$HEADERS" = 0 ] || [ -n "$(compgen -G "$DEST/suites/*/root/usr/include/python$v/internal")" ]; }
  have_stdlib() { [ "$STDLIB" = 0 ] || { "$DEST/bin/python$v" -c 'import asyncio, json, tomllib, difflib' 2>/dev/null && [ -x "$DEST/bin/python${v}p" ]; }; }
  if [ -x "$DEST/bin/python$v" ] && "$DEST/bin/python$v" -c 'import sys' 2>/dev/null && have_headers && have_stdlib; then
    echo "provision-cpython: python$v already in $DEST ($("$DEST/bin/python$v" -c 'import sys; print(sys.version.split()[0])'))"
    ok+=("$v"); continue
  fi
  done_v=0
  for suite in $SUITES; do
    use_suite "$suite" || continue
    pkgs="libc6 libzstd1 libexpat1 zlib1g python$v-minimal libpython$v-minimal"
    [ "$STDLIB" = 1 ] && pkgs="$pkgs libpython$v-stdlib libssl3t64 libffi8"
    [ "$HEADERS" = 1 ] && pkgs="$pkgs libpython$v-dev"
    if ! (cd "$S/debs" && apt-get download -qq $pkgs >/dev/null 2>&1); then
      echo "provision-cpython: python$v not offered by $suite" >&2; continue
    fi
    for f in "$S"/debs/*.deb; do dpkg-deb -x "$f" "$S/root"; done
    # only the headers of -dev are wanted: its static libraries are big and unused
    find "$S/root" -name 'libpython3*.a' -delete
    R=$S/root; LP=$R/usr/lib/x86_64-linux-gnu; LD=$LP/ld-linux-x86-64.so.2
    # The suite's ld.so runs the unmodified interpreter: /proc/PID/exe is then ld.so and the
    # interpreter binary shows up only in /proc/PID/maps (pyunwind handles both).
    printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "$LD" "$LP" "$R/usr/bin/python$v" > "$DEST/bin/python$v"
    chmod +x "$DEST/bin/python$v"
    # With the standard library (STDLIB=1), also a copy of the binary patched to use the
    # suite's loader directly: programs that start sys.executable (CPython 3.15's own profiler,
    # `python -m profiling.sampling run`) need a binary that runs by itself.
    if [ "$STDLIB" = 1 ] && [ -x "$DEST/bin/patchelf" ]; then
      cp "$R/usr/bin/python$v" "$R/usr/bin/python${v}p"
      # DT_RPATH (not RUNPATH): it also applies to the libraries extension modules load
      # (libcrypto for _hashlib), which would otherwise come from the host
      "$DEST/bin/patchelf" --set-interpreter "$LD" --force-rpath --set-rpath "$LP" "$R/usr/bin/python${v}p"
      ln -sf "$R/usr/bin/python${v}p" "$DEST/bin/python${v}p"
    fi
    # Debian's packages ship no bytecode caches (their postinst makes them): without them every
    # import compiles its module again, so programs spend their first half second in the compiler
    if [ "$STDLIB" = 1 ]; then
      "$DEST/bin/python$v" -m compileall -q "$R/usr/lib/python$v" >/dev/null 2>&1 || true
    fi
    if "$DEST/bin/python$v" -c 'import sys, threading' >/dev/null 2>&1; then
      echo "provision-cpython: python$v from $suite: $("$DEST/bin/python$v" -c 'import sys; print(sys.version.split()[0])')"
      ok+=("$v"); done_v=1; break
    fi
    rm -f "$DEST/bin/python$v"
    echo "provision-cpython: python$v from $suite does not run here" >&2
  done
  if [ "$done_v" != 1 ] && [ ! -x "$DEST/bin/python$v" ]; then
    echo "provision-cpython: python$v NOT provisioned; its tests will skip" >&2
    failed+=("python$v")
  fi
done
echo "provision-cpython: ready: ${ok[*]:-none}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "provision-cpython: not provisioned: ${failed[*]}" >&2
  exit 1
fi
