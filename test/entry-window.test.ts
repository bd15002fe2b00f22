// 3.11: when C code calls a Python function, the callee's frame is pushed (is_entry 0), linked
// as the current frame, and only then does the new eval loop set is_entry — a real state a
// sample can catch (a stopped target sits in it as often as its instructions take). The walk
// then tells the entry by the calling eval loop's _PyCFrame (cframe->previous), whose current
// frame is the callee's caller. Built here byte by byte on the 3.11 x86_64 layout, through
// both walkers (they must agree).
//
// The other side of that window, caught at the interrupt (record --copy interrupt): the new
// loop has marked the callee an entry and made it current, but not yet linked it to its caller
// (`previous` still 0) — a one-frame stack that looked whole. The running loop's first entry
// frame must lead to the calling loop's current frame; a walk whose does not is rejected.
//
// 3.12 has the same windows with its entry frames as frames of their own (owned by the C stack,
// in the eval loop's C frame): the loop points the thread state at its _PyCFrame, then links
// its entry frame to the calling loop's current frame, then the callee to the entry frame, then
// makes the callee current — stores the compiler may order otherwise. The same rule holds
// there, checked on the 3.12 layout below.
import { describe, expect, it } from 'vitest';
import { builtinLayout } from '../src/layout/builtin.js';
import type { Layout } from '../src/layout/layout.js';
import { walkParams } from '../src/layout/walk-params.js';
import type { CodeRange, Region, WalkSample } from '../src/walk/types.js';
import { checkedWalker } from './helpers/walkers.js';

const L = builtinLayout(0x030b07f0, 'x86_64');
const P = walkParams(L);
const TSTATE = 0x10_0000n;
const CFRAME = 0x7ff0_0000n; // the running eval loop's _PyCFrame, on the C stack
const OUTER = 0x7ff0_1000n; // the calling eval loop's
const CHUNK = 0x20_0000n;
const CODE = 0x30_0000n;
const code: CodeRange = { address: CODE, bytecodeStart: CODE + 0xb8n, bytecodeEnd: CODE + 0x200n, frameSize: 0 };

function put(b: Uint8Array, at: number, v: bigint): void {
  new DataView(b.buffer, b.byteOffset).setBigUint64(at, v, true);
}

/**
 * The thread state, pointing at the running eval loop's _PyCFrame (its current frame
 * `current`), and where `entered` is not null the calling loop's _PyCFrame, whose current frame
 * it is.
 */
function loopRegions(layout: Layout, current: bigint, entered: bigint | null): Region[] {
  const T = layout.tstate;
  const length = T.cframePrevious! + 8;
  const ts = new Uint8Array(T.size);
  put(ts, T.currentFrame, CFRAME);
  const cframe = new Uint8Array(length);
  put(cframe, T.cframeCurrentFrame!, current);
  const regions: Region[] = [
    { address: TSTATE, bytes: ts },
    { address: CFRAME, bytes: cframe },
  ];
  if (entered !== null) {
    put(cframe, T.cframePrevious!, OUTER);
    const outer = new Uint8Array(length);
    put(outer, T.cframeCurrentFrame!, entered);
    regions.push({ address: OUTER, bytes: outer });
  }
  return regions;
}

/**
 * <module> (is_entry) → caller → callee on the data stack, the callee's is_entry as given; the
 * calling eval loop's current frame `entered` (null: no calling eval loop read).
 */
function sample(calleeIsEntry: boolean, entered: 'caller' | 'module' | null, calleeLinked = true): WalkSample {
  const frames = [CHUNK, CHUNK + 0x100n, CHUNK + 0x200n];
  const chunk = new Uint8Array(0x300);
  frames.forEach((f, i) => {
    const at = Number(f - CHUNK);
    put(chunk, at + L.frame.previous, i === 0 || (i === 2 && !calleeLinked) ? 0n : frames[i - 1]!);
    put(chunk, at + L.frame.executable, CODE);
    put(chunk, at + L.frame.instrPtr, CODE + 0xb8n + BigInt(2 * i));
    chunk[at + L.frame.owner] = L.owners.thread;
    chunk[at + L.frame.isEntry!] = i === 0 || (i === 2 && calleeIsEntry) ? 1 : 0;
  });
  const regions = [...loopRegions(L, frames[2]!, entered === null ? null : entered === 'caller' ? frames[1]! : frames[0]!), { address: CHUNK, bytes: chunk }];
  return { threadStateAddress: TSTATE, regions };
}

describe('3.11: a frame C code has just called, before its eval loop sets is_entry', () => {
  it('reads the calling eval loop: its current frame is the callee’s caller', async () => {
    expect(P.cframePrevious).toBe(16);
    const walker = await checkedWalker();
    const through = (s: WalkSample): boolean[] => {
      const [r] = walker.walk(P, [code], [s]);
      expect(r!.status).toBe('complete-unverifiable');
      return r!.frames.map((f) => f.callsThroughC);
    };
    // frames innermost first: the flag sits on the caller (index 1)
    expect(through(sample(true, 'caller'))).toEqual([false, true, false]);
    // the window: is_entry not set yet, the calling eval loop tells
    expect(through(sample(false, 'caller'))).toEqual([false, true, false]);
    // no calling eval loop read (older captures): is_entry alone
    expect(through(sample(false, null))).toEqual([false, false, false]);
  });

  it('an entry frame not yet linked to the calling eval loop’s current frame is of no one moment', async () => {
    const walker = await checkedWalker();
    const status = (s: WalkSample): string => walker.walk(P, [code], [s])[0]!.status;
    // marked an entry and made current, `previous` not yet set: the callee alone looked whole
    expect(status(sample(true, 'caller', false))).toBe('incomplete');
    // linked: whole
    expect(status(sample(true, 'caller'))).toBe('complete-unverifiable');
    // the first entry frame on the chain (<module>, previous 0) does not lead to the calling
    // loop's current frame (<module> itself): frames of different loops glued together (the
    // rule looks only at the current frame for an unset is_entry — a deeper frame's was set
    // before it called anything)
    expect(status(sample(false, 'module'))).toBe('incomplete');
    // no calling eval loop read (older captures): not checked
    expect(status(sample(true, null, false))).toBe('complete-unverifiable');
  });
});

describe('3.12: the running eval loop’s entry frame leads to the calling loop’s current frame', () => {
  const L12 = builtinLayout(0x030c01f0, 'x86_64');
  const P12 = walkParams(L12);
  const E0 = 0x7ff0_2000n; // the outermost eval loop's entry frame (its caller: none)
  const E1 = 0x7ff0_0100n; // the running loop's, beside its _PyCFrame on the C stack
  const code12: CodeRange = { address: CODE, bytecodeStart: CODE + 0xc0n, bytecodeEnd: CODE + 0x200n, frameSize: 0 };

  function frame(bytes: Uint8Array, at: number, previous: bigint, owner: number, ip: bigint): void {
    put(bytes, at + L12.frame.previous, previous);
    put(bytes, at + L12.frame.executable, CODE);
    put(bytes, at + L12.frame.instrPtr, ip);
    bytes[at + L12.frame.owner] = owner;
  }

  /**
   * E0 ← <module> ← caller on the data stack, then C code calling the callee through the
   * running loop: E1 ← callee. `entryLinked`: E1 leads to the caller (else 0, not yet set);
   * `calleeTo`: what the callee's `previous` holds; `entered`: the calling loop's current frame
   * as its copied _PyCFrame says (null: not read).
   */
  function sample12(entryLinked: boolean, calleeTo: 'entry' | 'caller', entered: 'caller' | 'none' | null): WalkSample {
    const frames = [CHUNK, CHUNK + 0x100n, CHUNK + 0x200n];
    const chunk = new Uint8Array(0x300);
    const ip = (i: number): bigint => CODE + 0xc0n + BigInt(2 * i);
    frame(chunk, 0, E0, L12.owners.thread, ip(0));
    frame(chunk, 0x100, frames[0]!, L12.owners.thread, ip(1));
    frame(chunk, 0x200, calleeTo === 'entry' ? E1 : frames[1]!, L12.owners.thread, ip(2));
    const e0 = new Uint8Array(L12.frame.size);
    frame(e0, 0, 0n, L12.owners.cstack!, 0n);
    const e1 = new Uint8Array(L12.frame.size);
    frame(e1, 0, entryLinked ? frames[1]! : 0n, L12.owners.cstack!, 0n);
    const regions = [
      ...loopRegions(L12, frames[2]!, entered === null ? null : entered === 'caller' ? frames[1]! : 0n),
      { address: CHUNK, bytes: chunk },
      { address: E1, bytes: e1 },
      { address: E0, bytes: e0 },
    ];
    return { threadStateAddress: TSTATE, regions };
  }

  it('rejects a walk whose first entry frame does not lead to the calling loop’s current frame', async () => {
    expect(P12.cframePrevious).toBe(8);
    const walker = await checkedWalker();
    const walk = (s: WalkSample) => walker.walk(P12, [code12], [s])[0]!;
    // whole: callee, its entry frame, then the caller's loop down to the outermost entry frame
    const whole = walk(sample12(true, 'entry', 'caller'));
    expect(whole.status).toBe('complete-unverifiable');
    expect(whole.frames.map((f) => f.callsThroughC)).toEqual([false, true, false]);
    // the entry frame not yet linked to the caller: the callee alone looked whole
    expect(walk(sample12(false, 'entry', 'caller')).status).toBe('incomplete');
    // the callee's `previous` not yet set to the entry frame, its old value a frame of the same
    // place before (a Python call's caller): three frames through no entry of this loop
    expect(walk(sample12(true, 'caller', 'caller')).status).toBe('incomplete');
    // the outermost loop (its calling _PyCFrame's current frame none): not checked, as without
    // the calling loop read
    expect(walk(sample12(false, 'entry', 'none')).status).toBe('complete-unverifiable');
    expect(walk(sample12(false, 'entry', null)).status).toBe('complete-unverifiable');
  });
});
