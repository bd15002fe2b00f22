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
import { describe, expect, it } from 'vitest';
import { builtinLayout } from '../src/layout/builtin.js';
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
  const ts = new Uint8Array(L.tstate.size);
  put(ts, L.tstate.currentFrame, CFRAME);
  const cframe = new Uint8Array(24);
  put(cframe, L.tstate.cframeCurrentFrame!, frames[2]!);
  const regions: Region[] = [
    { address: TSTATE, bytes: ts },
    { address: CHUNK, bytes: chunk },
    { address: CFRAME, bytes: cframe },
  ];
  if (entered !== null) {
    put(cframe, L.tstate.cframePrevious!, OUTER);
    const outer = new Uint8Array(24);
    put(outer, L.tstate.cframeCurrentFrame!, entered === 'caller' ? frames[1]! : frames[0]!);
    regions.push({ address: OUTER, bytes: outer });
  }
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
