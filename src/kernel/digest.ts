// The digest of the WebAssembly ABI: every constant of src/kernel/abi.ts and
// src/capture/codes.ts, by name, folded with FNV-1a. scripts/abi-digest.ts compiles it into the
// kernel (assembly/abi-digest.ts, exported as abiDigest()); checkAbi compares the kernel's with
// the host's, so that a kernel built from another ABI is refused with a message rather than
// read wrongly.
import * as abi from './abi.js';
import * as codes from '../capture/codes.js';

export function abiDigest(): number {
  const entries = [...Object.entries(abi), ...Object.entries(codes)].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  let h = 0x811c9dc5;
  for (const [name, value] of entries) {
    for (const ch of `${name}=${String(value)};`) {
      h ^= ch.charCodeAt(0);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
  }
  return h >>> 0;
}

/** Throws unless the kernel's exports say it was built from this ABI. */
export function checkAbi(exports: WebAssembly.Exports): void {
  const f = exports['abiDigest'];
  const theirs = typeof f === 'function' ? ((f as () => number)() >>> 0) : null;
  const ours = abiDigest();
  if (theirs !== ours) {
    throw new Error(
      `the walk kernel was built from another ABI (its digest ${theirs === null ? 'missing' : `0x${theirs.toString(16)}`}, this pyunwind's 0x${ours.toString(16)}): rebuild it with npm run build:wasm`,
    );
  }
}
