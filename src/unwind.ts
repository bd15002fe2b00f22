// From a snapshot to validated, symbolized stacks: decode each code object, walk
// every thread's sample with a walker (the WebAssembly kernel or the reference), and turn each
// trusted frame into (qualname, filename, line).

import type { Layout } from './layout/layout.js';
import type { Snapshot } from './record/snapshot.js';
import { CodeTable } from './symbols/code-table.js';
import type { SymbolizedFrame } from './symbols/types.js';
import { walkParams, type Walker } from './walk/index.js';
import type { Status } from './walk/status.js';
import type { WalkResult } from './walk/types.js';

export { CodeTable } from './symbols/code-table.js';
export type { SymbolizedFrame } from './symbols/types.js';

export interface ThreadStack {
  interpreterId: bigint;
  threadStateAddress: bigint;
  threadId: bigint;
  nativeThreadId: bigint;
  /** Python's main thread (threading.main_thread(): see the copier for how it is known) */
  mainThread: boolean;
  status: Status;
  /** innermost first */
  frames: SymbolizedFrame[];
  walk: WalkResult;
  /** what the copy could not read, if anything */
  copyErrors: string[];
}

/** Walk and name every thread of a snapshot; `opcodes`: each frame with its instruction (SymbolizedFrame.opcode). */
export function unwindSnapshot(snapshot: Snapshot, walker: Walker, maxDepth?: number, opcodes = false): ThreadStack[] {
  const layout = snapshot.layout;
  const codes = new CodeTable(layout, snapshot.codeObjects);
  const results = walker.walk(
    walkParams(layout, maxDepth),
    codes.ranges,
    snapshot.threads.map((t) => ({ threadStateAddress: t.threadStateAddress, regions: t.regions })),
  );
  return snapshot.threads.map((t, i) => {
    const walk = results[i]!;
    // a copy that moved while it was made is not a stack of one moment: `torn`, never shown
    const status: Status = t.moved ? 'torn' : walk.status;
    return {
      interpreterId: t.interpreterId,
      threadStateAddress: t.threadStateAddress,
      threadId: t.threadId,
      nativeThreadId: t.nativeThreadId,
      mainThread: t.mainThread,
      status,
      frames: status === 'torn' ? [] : walk.frames.map((f) => codes.frame(f.code, f.instrPtr, opcodes)),
      walk,
      copyErrors: t.errors,
    };
  });
}
