// A thread's frame index by (code address, instruction address), for the block engine's
// harvest: every new node of the engine's tree needs the frame of its (code, instruction) in
// its thread's profile, and a deep churning stack makes hundreds of thousands of nodes over a
// few hundred frames. Two nested Maps (code → instruction → name) and a Map by name cost about
// half a microsecond a node; this open-addressing table of 32-bit halves costs a hash and four
// compares, and makes no garbage.

const EMPTY = -1;

export class FrameIdCache {
  /** per entry: code low, code high, instruction low, instruction high, frame (−1: empty) */
  private table = new Int32Array(5 * 256).fill(EMPTY);
  private count = 0;

  /** The frame stored for (code, instruction), or −1. */
  get(codeLo: number, codeHi: number, ipLo: number, ipHi: number): number {
    const t = this.table;
    const mask = t.length / 5 - 1;
    for (let h = hash(codeLo, codeHi, ipLo, ipHi) & mask; ; h = (h + 1) & mask) {
      const e = h * 5;
      const frame = t[e + 4]!;
      if (frame === EMPTY) return EMPTY;
      if (t[e] === (codeLo | 0) && t[e + 1] === (codeHi | 0) && t[e + 2] === (ipLo | 0) && t[e + 3] === (ipHi | 0)) return frame;
    }
  }

  /** Stores `frame` (≥ 0) for (code, instruction), which get() did not find. */
  set(codeLo: number, codeHi: number, ipLo: number, ipHi: number, frame: number): void {
    // (at most half full: probes stay short, and one is always empty)
    if (2 * (this.count + 1) > this.table.length / 5) this.grow();
    this.place(this.table, codeLo, codeHi, ipLo, ipHi, frame);
    this.count++;
  }

  private place(t: Int32Array, codeLo: number, codeHi: number, ipLo: number, ipHi: number, frame: number): void {
    const mask = t.length / 5 - 1;
    let h = hash(codeLo, codeHi, ipLo, ipHi) & mask;
    while (t[h * 5 + 4] !== EMPTY) h = (h + 1) & mask;
    const e = h * 5;
    t[e] = codeLo;
    t[e + 1] = codeHi;
    t[e + 2] = ipLo;
    t[e + 3] = ipHi;
    t[e + 4] = frame;
  }

  private grow(): void {
    const old = this.table;
    const t = new Int32Array(old.length * 2).fill(EMPTY);
    for (let e = 0; e < old.length; e += 5) if (old[e + 4] !== EMPTY) this.place(t, old[e]!, old[e + 1]!, old[e + 2]!, old[e + 3]!, old[e + 4]!);
    this.table = t;
  }
}

function hash(codeLo: number, codeHi: number, ipLo: number, ipHi: number): number {
  let h = Math.imul(codeLo ^ Math.imul(codeHi, 0x27d4eb2f), 0x9e3779b1);
  h = Math.imul(h ^ ipLo ^ Math.imul(ipHi, 0x165667b1), 0x85ebca77);
  return (h ^ (h >>> 15)) >>> 0;
}
