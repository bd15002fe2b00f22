// Byte arrays one after the other in one new array: how a capture held in parts (a memory sink,
// blocks posted by a sampler) becomes the bytes a reader takes.

/** The parts, one after the other; `length`: their total, when the caller keeps it. */
export function concatBytes(parts: readonly Uint8Array[], length = parts.reduce((n, p) => n + p.length, 0)): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(length);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
