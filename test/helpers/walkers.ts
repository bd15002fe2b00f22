// Every walk in the test suite goes through both walkers — the WebAssembly kernel and the
// TypeScript reference — and their outputs must be identical. `checkedWalker()` is a Walker
// that does that and throws on the first difference, so any test that walks real or synthetic
// memory also tests the agreement.
import { KernelWalker, ReferenceWalker, type Walker } from '../../src/walk/index.js';
import type { WalkParams } from '../../src/layout/walk-params.js';
import type { CodeRange, WalkResult, WalkSample } from '../../src/walk/types.js';

let kernel: Promise<KernelWalker> | null = null;
let unshared: Promise<KernelWalker> | null = null;
export const agreement = { samples: 0, batches: 0 };

export function loadKernel(shared = true): Promise<KernelWalker> {
  if (shared) return (kernel ??= KernelWalker.load({ shared: true }));
  return (unshared ??= KernelWalker.load({ shared: false }));
}

function show(r: WalkResult): string {
  return JSON.stringify(r, (_k, v) => (typeof v === 'bigint' ? `0x${v.toString(16)}` : v));
}

export function compareResults(a: WalkResult[], b: WalkResult[], what = 'kernel vs reference'): void {
  if (a.length !== b.length) throw new Error(`${what}: ${a.length} results vs ${b.length}`);
  for (let i = 0; i < a.length; i++) {
    const x = show(a[i]!);
    const y = show(b[i]!);
    if (x !== y) throw new Error(`${what} disagree on sample ${i}:\n  ${x}\n  ${y}`);
  }
}

/** A Walker running the kernel and the reference, requiring identical results. */
export async function checkedWalker(): Promise<Walker> {
  const k = await loadKernel();
  const ref = new ReferenceWalker();
  return {
    kind: 'checked',
    walk(params: WalkParams, codes: Iterable<CodeRange>, samples: readonly WalkSample[]): WalkResult[] {
      const codeList = [...codes];
      const a = k.walk(params, codeList, samples);
      const b = ref.walk(params, codeList, samples);
      compareResults(a, b);
      agreement.samples += samples.length;
      agreement.batches++;
      return a;
    },
  };
}
