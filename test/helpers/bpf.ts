// What the tests of copies at the interrupt need of the machine (the built BPF program, bpftool
// to list what is loaded, and root), and the programs they record.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { bpfObjectPath } from '../../src/record/linux/kernel-copier.js';
import { waitUntil } from './wait.js';
import type { Interpreter } from '../../harness/interpreters.js';

/** The minor version an interpreter's label names ("debian-3.13" → 13). */
export const minorOf = (label: string): number => Number(/3\.(\d+)/.exec(label)?.[1]);

/** Each interpreter once as it is, and again with copies at the interrupt: the cases of a test run both ways. */
export function withInterruptCases(interpreters: readonly Interpreter[]): { py: Interpreter; interrupt: boolean }[] {
  return [...interpreters.map((py) => ({ py, interrupt: false })), ...interpreters.map((py) => ({ py, interrupt: true }))];
}

/** `bpftool prog show`'s listing, or null where bpftool is not installed. */
export function bpftool(): string | null {
  for (const c of ['bpftool', '/usr/sbin/bpftool']) {
    const r = spawnSync(c, ['prog', 'show'], { encoding: 'utf8' });
    if (!r.error && r.status === 0) return r.stdout;
  }
  return null;
}

/** Why copies at the interrupt cannot be tried here, or null. */
export function cannotTryKernelCopies(): string | null {
  if (!fs.existsSync(bpfObjectPath())) return `the BPF program is not built (${bpfObjectPath()}: scripts/provision-bpf.sh)`;
  if (bpftool() === null) return 'bpftool is not installed (scripts/provision-bpf.sh)';
  if (process.getuid?.() !== 0) return 'not root: copies at the interrupt need root, or CAP_BPF and CAP_PERFMON';
  return null;
}

/**
 * The BPF programs process `pid` holds (their ids, from the prog_id of its descriptors): ours,
 * told apart from those of other tests running at the same time.
 */
export function programsOf(pid: number | 'self'): number[] {
  const ids: number[] = [];
  let fds: string[];
  try {
    fds = fs.readdirSync(`/proc/${pid}/fdinfo`);
  } catch {
    return ids;
  }
  for (const fd of fds) {
    let info: string;
    try {
      info = fs.readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8');
    } catch {
      continue;
    }
    const m = /^prog_id:\s*(\d+)$/m.exec(info);
    if (m) ids.push(Number(m[1]));
  }
  return [...new Set(ids)].sort((a, b) => a - b);
}

/** Which of these program ids `bpftool prog show` still lists. */
export function stillLoaded(ids: readonly number[]): number[] {
  const listed = new Set([...(bpftool() ?? '').matchAll(/^(\d+): /gm)].map((m) => Number(m[1])));
  return ids.filter((id) => listed.has(id));
}

/**
 * A program of the interpreter `command` (`-c program`, under `prefix`: setpriv, …), started
 * with a pipe on its stdin (it may wait on it); resolves with it and the first line it printed.
 * Each is added to `children`, for the caller to kill at the end.
 */
export async function startPython(command: string, program: string, children: ChildProcess[], prefix: string[] = []): Promise<{ child: ChildProcess; line: string }> {
  const argv = [...prefix, command, '-c', program];
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  await waitUntil(() => out.includes('\n'), 'the program to start', 60_000);
  return { child, line: out.trim() };
}
