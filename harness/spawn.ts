// Spawning a Python program for a live test or a benchmark and reading what it says about itself.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface ReportedFrame {
  qualname: string;
  name: string;
  filename: string;
  line: number;
}

export interface ReportedStack {
  /** native thread id (or ident where there is none) */
  thread: number;
  ident: number;
  name: string;
  /** outermost first */
  stack: ReportedFrame[];
}

export interface Spawned {
  child: ChildProcess;
  pid: number;
  /** JSON lines printed before READY */
  lines: unknown[];
  kill(): void;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

/**
 * Run `command args...`, collect the JSON lines it prints until a line `READY`, and return
 * while it keeps running. Rejects with its stderr if it exits or times out first.
 */
export function spawnUntilReady(command: string, args: string[], timeoutMs = 30_000): Promise<Spawned> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  const kill = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    live.delete(child);
  };
  return new Promise((resolve, reject) => {
    let err = '';
    const lines: unknown[] = [];
    const timer = setTimeout(() => {
      kill();
      reject(new Error(`${command} did not print READY within ${timeoutMs} ms; stderr: ${err}`));
    }, timeoutMs);
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    createInterface({ input: child.stdout! }).on('line', (raw) => {
      const line = raw.trim();
      if (line === 'READY') {
        clearTimeout(timer);
        resolve({ child, pid: child.pid!, lines, kill });
      } else if (line.startsWith('{')) lines.push(JSON.parse(line));
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      live.delete(child);
      reject(new Error(`${command} exited (${code ?? signal}) before READY; stderr: ${err}`));
    });
  });
}

export interface Interactive {
  child: ChildProcess;
  pid: number;
  /** resolves when the program prints a line equal to `text` */
  waitFor(text: string, timeoutMs?: number): Promise<void>;
  /** write a line to its stdin */
  send(line: string): void;
  kill(): void;
}

/** Run a program that prints named moments and waits on stdin between them. */
export function spawnInteractive(command: string, args: string[]): Interactive {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  live.add(child);
  let err = '';
  const seen: string[] = [];
  const waiters: { text: string; resolve: () => void }[] = [];
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  createInterface({ input: child.stdout! }).on('line', (raw) => {
    const line = raw.trim();
    seen.push(line);
    for (const w of waiters.filter((w) => w.text === line)) w.resolve();
  });
  const kill = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    live.delete(child);
  };
  return {
    child,
    pid: child.pid!,
    kill,
    send: (line) => child.stdin!.write(line + '\n'),
    waitFor: (text, timeoutMs = 30_000) =>
      new Promise<void>((resolve, reject) => {
        if (seen.includes(text)) return resolve();
        const timer = setTimeout(() => reject(new Error(`no "${text}" from ${command} in ${timeoutMs} ms; stderr: ${err}`)), timeoutMs);
        waiters.push({ text, resolve: () => (clearTimeout(timer), resolve()) });
        child.on('exit', (c, s) => reject(new Error(`${command} exited (${c ?? s}) before "${text}"; stderr: ${err}`)));
      }),
  };
}
