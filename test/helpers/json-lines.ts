// A child's stdout as JSON lines: each whole line parsed as it comes (the workloads that say
// their own stacks print one JSON object per line).
import type { ChildProcess } from 'node:child_process';

/** The list the child's JSON lines are pushed to, as they arrive. */
export function jsonLines<T>(child: ChildProcess): T[] {
  const lines: T[] = [];
  let buffer = '';
  child.stdout!.on('data', (d: Buffer) => {
    buffer += d.toString();
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      lines.push(JSON.parse(buffer.slice(0, nl)) as T);
      buffer = buffer.slice(nl + 1);
    }
  });
  return lines;
}
