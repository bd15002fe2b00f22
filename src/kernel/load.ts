// Where the walk kernel (the WebAssembly module, assembly/kernel.ts) comes from, in every
// runtime. Two builds ship in build/: kernel-unshared.wasm (plain memory: runs everywhere; what
// the processing engine loads by default) and kernel.wasm (a shared memory: needs
// SharedArrayBuffer — Node, Deno, Bun, a cross-origin-isolated page; what KernelWalker uses by
// default there, and what the viewer's processing workers run in an isolated page). Given a
// compiled module, the engine and KernelWalker instantiate it with the memory its build imports.
//
// Nothing here imports a Node module at load time. The default source, the build next to the
// package, is read with fetch() where fetch reads file: URLs (Deno, Bun), with node:fs
// (obtained when called) in Node, and with fetch() for any other URL (a page served over http,
// a bundler's asset URL). workerd compiles no WebAssembly at run time: there the kernel is
// imported as a precompiled module (`import kernel from 'pyunwind/kernel.wasm'`) and given as is.

import { checkAbi } from './digest.js';

/** build/kernel-unshared.wasm or build/kernel.wasm, next to the package (src/ and dist/ both sit one level below it). */
export function kernelUrl(shared = false): URL {
  // written out twice (not built from a name) so bundlers that follow `new URL(literal, import.meta.url)` find both files
  return shared ? new URL('../../build/kernel.wasm', import.meta.url) : new URL('../../build/kernel-unshared.wasm', import.meta.url);
}

/**
 * The walk kernel, compiled. `source`: a compiled module (returned as is), the wasm bytes, or a
 * URL to fetch (file: URLs in Node, Deno and Bun too); none: the unshared build next to the
 * package (build/kernel-unshared.wasm — what reportCaptureBytes needs).
 */
export async function loadKernel(source?: URL | string | BufferSource | WebAssembly.Module): Promise<WebAssembly.Module> {
  if (source instanceof WebAssembly.Module) return source;
  if (source === undefined || source instanceof URL || typeof source === 'string') {
    const url = source === undefined ? kernelUrl(false) : new URL(source, typeof location === 'undefined' ? undefined : location.href);
    return WebAssembly.compile((await readUrl(url)) as Uint8Array<ArrayBuffer>);
  }
  return WebAssembly.compile(source);
}

/** The bytes of a kernel build next to the package (for KernelWalker, worker pools and the fuzzer). */
export async function readKernelBytes(shared: boolean): Promise<Uint8Array> {
  return readUrl(kernelUrl(shared));
}

/** What the block engine asks its host (assembly/engine.ts): the number of the frame at (code, instruction). */
export interface KernelHooks {
  nameFrame(codeLo: number, codeHi: number, ipLo: number, ipHi: number): number;
}

/** The kernel's imports: its memory, and the block engine's one call out (which only the engine's host answers). */
export function kernelImports(memory: WebAssembly.Memory, hooks?: KernelHooks): WebAssembly.Imports {
  const nameFrame =
    hooks?.nameFrame ??
    ((): number => {
      throw new Error('the walk kernel asked to name a frame outside the block engine (a bug)');
    });
  return { env: { memory, nameFrame } };
}

/**
 * The kernel instantiated with the memory its build imports: plain (kernel-unshared.wasm) or
 * shared (kernel.wasm). A shared-memory build refuses a plain memory with a LinkError, and is
 * then given a shared one (where SharedArrayBuffer exists).
 */
export async function instantiateKernel(module: WebAssembly.Module, hooks?: KernelHooks): Promise<{ instance: WebAssembly.Instance; memory: WebAssembly.Memory; shared: boolean }> {
  const plain = new WebAssembly.Memory({ initial: 16, maximum: 65536 });
  let made: { instance: WebAssembly.Instance; memory: WebAssembly.Memory; shared: boolean };
  try {
    made = { instance: await WebAssembly.instantiate(module, kernelImports(plain, hooks)), memory: plain, shared: false };
  } catch (e) {
    if (!(e instanceof WebAssembly.LinkError) || typeof SharedArrayBuffer === 'undefined') throw e;
    const memory = new WebAssembly.Memory({ initial: 16, maximum: 65536, shared: true });
    made = { instance: await WebAssembly.instantiate(module, kernelImports(memory, hooks)), memory, shared: true };
  }
  checkAbi(made.instance.exports);
  return made;
}

/** fetch() reads file: URLs in these runtimes (Node's does not). */
const fetchReadsFiles = (): boolean => 'Deno' in globalThis || 'Bun' in globalThis;

async function readUrl(url: URL): Promise<Uint8Array> {
  const hint = url.protocol === 'file:' ? ' (build it with npm run build:wasm)' : '';
  try {
    if (url.protocol === 'file:' && !fetchReadsFiles()) {
      const fs = await nodeFs();
      if (!fs) throw new Error('this runtime reads no files: give the kernel as a compiled module, its bytes, or an http(s) URL');
      return await fs.readFile(url);
    }
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
    return new Uint8Array(await response.arrayBuffer());
  } catch (e) {
    throw new Error(`cannot read the walk kernel ${url.href}: ${(e as Error).message}${hint}`, { cause: e });
  }
}

interface NodeFs {
  readFile(url: URL): Promise<Uint8Array>;
}

/**
 * node:fs/promises where there is one, else null. Through process.getBuiltinModule (Node 20.16+)
 * or an import whose name bundlers do not follow (a browser or workerd bundle has no node:fs
 * to resolve, and never gets here with a file: URL it could read).
 */
async function nodeFs(): Promise<NodeFs | null> {
  const proc = (globalThis as { process?: { getBuiltinModule?: (name: string) => unknown; versions?: { node?: string } } }).process;
  const builtin = proc?.getBuiltinModule?.('node:fs/promises') as NodeFs | undefined;
  if (builtin) return builtin;
  if (!proc?.versions?.node) return null;
  const name = ['node', 'fs/promises'].join(':');
  return (await import(/* @vite-ignore */ /* webpackIgnore: true */ name)) as NodeFs;
}
