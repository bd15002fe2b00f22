// The WebAssembly ABI is written once (src/kernel/abi.ts, src/capture/codes.ts) and compiled into
// both sides; a kernel built before a change to it would read its host's memory the old way. The
// kernel carries the digest of the ABI it was built from, and the host refuses one whose digest
// is not its own.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { abiDigest, checkAbi } from '../src/kernel/digest.js';
import { instantiateKernel, kernelUrl } from '../src/kernel/load.js';
import { KernelWalker } from '../src/kernel/walker.js';

describe('the kernel ABI', () => {
  it('each build of the kernel carries the digest of the ABI the host was built with', async () => {
    for (const shared of [false, true]) {
      const module = await WebAssembly.compile(fs.readFileSync(kernelUrl(shared)));
      const { instance } = await instantiateKernel(module);
      expect((instance.exports['abiDigest'] as () => number)() >>> 0, shared ? 'kernel.wasm' : 'kernel-unshared.wasm').toBe(abiDigest());
    }
    expect((await KernelWalker.load()).kind).toBe('kernel');
  });
  it('a kernel built from another ABI is refused, saying how to rebuild it', () => {
    expect(() => checkAbi({ abiDigest: () => (abiDigest() + 1) >>> 0 })).toThrow(/built from another ABI .* npm run build:wasm/);
    expect(() => checkAbi({})).toThrow(/digest missing/);
    expect(() => checkAbi({ abiDigest: () => abiDigest() })).not.toThrow();
  });
});
