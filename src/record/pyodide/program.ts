// Running a program as __main__ in a loaded Pyodide, the way both Pyodide recorders do (the Node
// worker, src/record/pyodide/worker.ts, and the browser page's worker, web/profile-worker.ts):
// compiled first (a SyntaxError is the program's error, reported without samples of its
// formatting), then run with builtins.exec called from JS — runPython would put Pyodide's own
// Python frames (eval_code, CodeRunner.run) under <module> in every sample. No Node API here.

import type { ProgramOutcome } from './protocol.js';
import type { PyodideApi, PyProxyLike } from './sampler.js';

export interface Program {
  code: PyProxyLike;
  globals: PyProxyLike;
  /** id() of the module's code object: a stack without it is not the program's */
  moduleCode: bigint;
}

export interface ProgramSource {
  python: string;
  /** co_filename and sys.argv[0]; an absolute path also gets the source written there (tracebacks show its lines) */
  filename: string;
  args: string[];
}

/** Compile the program and make its __main__ namespace; a SyntaxError is the program's error. */
export function prepareProgram(py: PyodideApi, program: ProgramSource): Program | { error: ProgramOutcome } {
  const sys = py.pyimport('sys');
  const builtins = py.pyimport('builtins');
  try {
    sys.argv = py.toPy([program.filename, ...program.args]);
    // tracebacks show source lines when the file is where its name says
    if (program.filename.startsWith('/')) {
      try {
        const dir = program.filename.slice(0, program.filename.lastIndexOf('/')) || '/';
        py.FS.mkdirTree(dir);
        py.FS.writeFile(program.filename, program.python);
      } catch {
        // only tracebacks would miss the source lines
      }
    }
    const code = builtins.compile(program.python, program.filename, 'exec') as PyProxyLike;
    const globals = py.toPy({ __name__: '__main__', __file__: program.filename }) as PyProxyLike;
    const moduleCode = BigInt(builtins.id(code) as number);
    return { code, globals, moduleCode };
  } catch (e) {
    return { error: outcomeOf(e, sys, () => false) };
  } finally {
    builtins.destroy?.();
    sys.destroy?.();
  }
}

/**
 * Run the program as __main__ with builtins.exec called from JS: no Python frame of
 * Pyodide's sits under <module>. `stopAsked`: a KeyboardInterrupt is the stop the caller
 * asked for (the outcome is "stopped"), not the program's error.
 */
export function execProgram(py: PyodideApi, program: Program, stopAsked: () => boolean): ProgramOutcome {
  const builtins = py.pyimport('builtins');
  // taken before: importing it after the program's exception runs Python (Pyodide's pyimport),
  // where a SIGINT written to stop the program would be raised again
  const sys = py.pyimport('sys');
  try {
    builtins.exec(program.code, program.globals);
    return { kind: 'finished' };
  } catch (e) {
    return outcomeOf(e, sys, stopAsked);
  } finally {
    program.code.destroy?.();
    program.globals.destroy?.();
    builtins.destroy?.();
    sys.destroy?.();
  }
}

/** What an exception out of the program means. */
export function outcomeOf(e: unknown, sys: any, stopAsked: () => boolean): ProgramOutcome {
  const type = (e as { type?: unknown }).type;
  // not a PythonError: a fault of the recorder or of Pyodide, not of the program
  if (typeof type !== 'string') throw e;
  const message = (e instanceof Error ? e.message : String(e)).trimEnd();
  if (type === 'KeyboardInterrupt' && stopAsked()) return { kind: 'stopped' };
  if (type === 'SystemExit') {
    const exitCode = systemExitCode(sys, message);
    return exitCode === 0 ? { kind: 'finished' } : { kind: 'exit', exitCode, traceback: message };
  }
  return { kind: 'error', type, traceback: message };
}

/** sys.exit(x): None → 0, an int → itself, anything else → 1 (CPython prints it). */
function systemExitCode(sys: any, message: string): number {
  let code: unknown;
  try {
    const exc = sys.last_exc ?? sys.last_value;
    code = exc?.code;
    exc?.destroy?.();
  } catch {
    code = undefined;
  }
  if (code === undefined) {
    // the traceback's last line: "SystemExit: 3", or "SystemExit" for None
    const last = message.trimEnd().split('\n').pop() ?? '';
    const m = /^SystemExit(?::\s*(.*))?$/.exec(last);
    code = m ? (m[1] === undefined || m[1] === '' || m[1] === 'None' ? null : /^-?\d+$/.test(m[1]) ? Number(m[1]) : m[1]) : 1;
  }
  if (code === null) return 0;
  if (typeof code === 'number' && Number.isInteger(code)) return code;
  if (typeof code === 'bigint') return Number(code);
  (code as PyProxyLike | null)?.destroy?.();
  return 1;
}
