// The pyunwind command: one verb per job.

import { EXIT, oneLine, UsageError } from './errors.js';

import { VERSION } from '../version.js';

const HELP = `pyunwind ${VERSION} — trustworthy Python stack samples from raw CPython memory

Usage: pyunwind COMMAND [OPTIONS]

Commands:
  record    sample a running Python (--pid PID, or -- COMMAND) into a capture file
  report    turn a capture into a profile: text, a flame graph, a heatmap, or a file for
            speedscope, Firefox Profiler, DevTools, pprof, pstats (--format; --diff BASE)
  view      open a capture in the browser: a flame graph, threads, validation, downloads
            (served to 127.0.0.1 only; processed in the browser)
  bench     measure how fast this machine processes a capture (kernel, reference, workers)
  dump      print the current stack of every thread of a running Python, once
  top       watch a running Python live: its functions by self and total samples, refreshed
  demo      record a bundled program in Pyodide (or --python PATH) and print its profile
  help      this help (also: pyunwind COMMAND --help)

Statuses: complete (3.15: the chain reached the thread's base frame), complete-unverifiable
(before 3.15), idle (no Python frame), or a rejection: incomplete, dangling, cycle, too-deep,
corrupt, no-thread-state, torn; with native frames (report --native on a capture recorded with
--native) also native-incomplete, native-unmatched. See docs/how-it-works.md.
`;

/** `out` takes bytes as well as text: some formats are binary. */
type Command = (argv: string[], out: (s: string | Uint8Array) => void, err: (s: string) => void) => Promise<number>;

// Each command's module is loaded when it runs: `report` need not load the recorder's native
// calls, nor `record` the exporters (start-up is part of every command's time).
const COMMANDS: Record<string, () => Promise<Command>> = {
  record: async () => (await import('./record.js')).record,
  report: async () => (await import('./report.js')).report,
  view: async () => (await import('./view.js')).view,
  dump: async () => (await import('./dump.js')).dump,
  top: async () => (await import('./top.js')).top,
  bench: async () => (await import('./bench.js')).bench,
  demo: async () => (await import('./demo.js')).demo,
};

/** Commands loaded so far: a module is loaded once per process however often main runs. */
const loaded = new Map<string, Command>();

export async function main(argv: string[], out = (s: string | Uint8Array) => void process.stdout.write(s), err = (s: string) => void process.stderr.write(s)): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === undefined || verb === 'help' || verb === '--help' || verb === '-h') {
    out(HELP);
    return verb === undefined ? EXIT.usage : EXIT.ok;
  }
  if (verb === '--version' || verb === '-V') {
    out(`pyunwind ${VERSION}\n`);
    return EXIT.ok;
  }
  const load = COMMANDS[verb];
  if (!load) {
    err(`pyunwind: unknown command "${verb}" (try: pyunwind --help)\n`);
    return EXIT.usage;
  }
  try {
    let command = loaded.get(verb);
    if (!command) {
      command = await load();
      loaded.set(verb, command);
    }
    return await command(rest, out, err);
  } catch (e) {
    const usage = e instanceof UsageError || (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    err(`pyunwind ${verb}: ${oneLine(e)}${usage ? ` (try: pyunwind ${verb} --help)` : ''}\n`);
    return usage ? EXIT.usage : EXIT.failure;
  }
}
