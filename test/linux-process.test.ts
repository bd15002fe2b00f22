// The Linux process memory source against real interpreters: each available native CPython is
// spawned, its _PyRuntime located through /proc/PID/maps + its ELF file, and what is read
// there checked against what the interpreter says about itself (sys.hexversion).

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ElfError, parseElf } from '../src/record/linux/elf.js';
import {
  chooseLayout,
  locateRuntime,
  openLinuxProcess,
  ProcessMemory,
  TargetError,
  targetErrorFromErrno,
  type RuntimeLocation,
} from '../src/record/linux/process.js';
import { parseProcMaps, ProcMapsError, readProcMaps } from '../src/record/linux/proc-maps.js';
import { ReadError } from '../src/record/copy/source.js';
import { nobody, runAs } from './helpers/as-nobody.js';
import { recordCoverage, skipTest, cannotRun } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';

const SUITE = 'linux-process';
const SCRIPT = 'import os, sys, time\nprint(sys.hexversion, os.getpid(), flush=True)\ntime.sleep(600)\n';
// measured with offsetof() against each version's internal headers (cpython-internals.md §2)
const MAIN_INTERPRETER_OFFSET: Record<number, number> = { 11: 58936, 12: 76392 };
const INTERPRETERS_MAIN_FIELD = 48n;

const children = new Set<ChildProcess>();
const tempDirs: string[] = [];
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

function track(child: ChildProcess): ChildProcess {
  children.add(child);
  return child;
}

interface Target {
  pid: number;
  hexversion: number;
}

/** Spawn `command … -c SCRIPT` and wait for the line it prints once it is running. */
function spawnPython(command: string, args: string[] = [], env: NodeJS.ProcessEnv = process.env): Promise<Target> {
  const child = track(spawn(command, [...args, '-c', SCRIPT], { stdio: ['ignore', 'pipe', 'pipe'], env }));
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`${command} printed nothing in 30 s; stderr: ${err}`)), 30_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      clearTimeout(timer);
      const [hex, pid] = out.slice(0, nl).trim().split(/\s+/).map(Number);
      resolve({ hexversion: hex!, pid: pid! });
    });
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${command} exited (${code ?? signal}) before it was ready; stderr: ${err}`));
    });
  });
}

/** Spawn a command and wait until it has exec'ed (so its maps are its own). */
function spawnOther(command: string, args: string[]): Promise<ChildProcess> {
  const child = track(spawn(command, args, { stdio: 'ignore' }));
  return new Promise((resolve, reject) => {
    child.on('spawn', () => resolve(child));
    child.on('error', reject);
  });
}

function u32(bytes: Uint8Array, at: number): number {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(at, true);
}
function u64(bytes: Uint8Array, at: number): bigint {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getBigUint64(at, true);
}

function onPath(command: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const p = path.join(dir, command);
    if (dir && fs.existsSync(p)) return p;
  }
  return null;
}

/** `_PyRuntime` and `Py_Version` as read from the running interpreter, checked against sys.hexversion. */
function checkRuntime(label: string, target: Target, loc: RuntimeLocation): void {
  const minor = (target.hexversion >> 16) & 0xff;
  const mem = new ProcessMemory(target.pid);
  try {
    if (loc.pyVersionAddress !== null) expect(u32(mem.read(loc.pyVersionAddress, 4), 0)).toBe(target.hexversion);
    if (minor >= 13) {
      const head = mem.read(loc.runtimeAddress, 16);
      expect(new TextDecoder('latin1').decode(head.subarray(0, 8))).toBe('xdebugpy');
      expect(u64(head, 8)).toBe(BigInt(target.hexversion));
    } else {
      expect(loc.pyVersionAddress, `${label}: Py_Version is required below 3.13`).not.toBeNull();
      // the main interpreter is embedded in _PyRuntime, so interpreters.main points into it
      const main = u64(mem.read(loc.runtimeAddress + INTERPRETERS_MAIN_FIELD, 8), 0);
      expect(main - loc.runtimeAddress).toBe(BigInt(MAIN_INTERPRETER_OFFSET[minor]!));
    }
  } finally {
    mem.close();
  }
}

/** The same addresses from an independent tool, when it is installed. */
function readelfPyRuntime(file: string): bigint | null {
  if (!onPath('readelf')) return null;
  const out = execFileSync('readelf', ['-SW', file], { encoding: 'utf8' });
  const m = /\]\s+\.PyRuntime\s+\S+\s+([0-9a-f]+)/.exec(out);
  return m ? BigInt('0x' + m[1]) : null;
}

describe('native interpreters', () => {
  for (const py of nativeInterpreters()) {
    describe(py.label, () => {
      if (py.missing) {
        cannotRun(SUITE, py.label, py.missing!);
        return;
      }
      let target: Target;
      let loc: RuntimeLocation;
      beforeAll(async () => {
        target = await spawnPython(py.command);
      });

      it('locateRuntime finds _PyRuntime and the version word there matches sys.hexversion', () => {
        loc = locateRuntime(target.pid);
        expect(path.basename(loc.file)).toMatch(/^(lib)?python3\.\d+/);
        const isPyenv = py.label.startsWith('pyenv-');
        expect(loc.pie).toBe(isPyenv);
        if (isPyenv) {
          expect(path.basename(loc.file)).toMatch(/^libpython3\.\d+\.so/);
          expect(loc.loadBias).toBeGreaterThan(0n);
          expect(loc.loadBias % 4096n).toBe(0n);
        } else {
          expect(loc.loadBias).toBe(0n);
        }
        checkRuntime(py.label, target, loc);

        // The ELF view agrees: the .PyRuntime section starts at the _PyRuntime symbol.
        const elf = parseElf(fs.readFileSync(loc.file), loc.file);
        const section = elf.section('.PyRuntime');
        const symbol = elf.symbol('_PyRuntime');
        expect(section).not.toBeNull();
        expect(symbol?.value).toBe(section!.addr);
        expect(loc.runtimeAddress).toBe(loc.loadBias + section!.addr);
        const fromReadelf = readelfPyRuntime(loc.file);
        if (fromReadelf !== null) expect(fromReadelf).toBe(section!.addr);
      });

      if (/^debian-3\.1[3-9]/.test(py.label)) {
        it('works when /proc/PID/exe is the ld.so that launched the interpreter', () => {
          const exe = fs.readlinkSync(`/proc/${target.pid}/exe`);
          expect(path.basename(exe)).toMatch(/^ld-linux/);
          expect(locateRuntime(target.pid).file).not.toBe(exe);
        });
      }

      it('openLinuxProcess gives the layout of the running version', () => {
        const source = openLinuxProcess(target.pid);
        try {
          expect(source.pid).toBe(target.pid);
          expect(source.layout.version.hex).toBe(target.hexversion);
          expect(source.runtimeAddress).toBe(source.location.runtimeAddress);
          const v = source.layout.version;
          expect(source.description).toContain(`pid ${target.pid} (`);
          expect(source.description).toContain(`${v.major}.${v.minor}.${v.micro}`);
          // interpreters.head is the main interpreter, which lives inside _PyRuntime
          const head = u64(source.read(source.runtimeAddress + BigInt(source.layout.runtime.interpretersHead), 8), 0);
          expect(head - source.runtimeAddress).toBeGreaterThan(0n);
          expect(head - source.runtimeAddress).toBeLessThan(1n << 20n);
          expect(source.tryRead(0x1000n, 8)).toBeNull();
          const buf = new Uint8Array(24);
          source.readInto(source.runtimeAddress, buf, 8, 8);
          expect(buf.subarray(8, 16)).toEqual(source.read(source.runtimeAddress, 8));
        } finally {
          source.close();
        }
        recordCoverage(SUITE, py.label, true);
      });
    });
  }
});

describe('patchelf-patched interpreter (an extra PT_LOAD below the first)', () => {
  const base = nativeInterpreters().find((p) => /^debian-3\.1[3-9]/.test(p.label) && !p.missing);
  // scripts/provision-cpython.sh puts patchelf beside the Debian interpreters
  const provisioned = path.resolve('.cache/cpython/bin/patchelf');
  const patchelf = fs.existsSync(provisioned) ? provisioned : onPath('patchelf');
  const why = !patchelf
    ? 'patchelf is neither provisioned (npm run provision) nor on PATH'
    : !base
      ? 'no Debian 3.13+ interpreter is provisioned'
      : null;
  if (why) {
    cannotRun(SUITE, 'patchelf', why);
    return;
  }
  it('finds _PyRuntime at the same address as in the unpatched binary', async () => {
    const original = await spawnPython(base!.command);
    const origLoc = locateRuntime(original.pid);
    const ldso = fs.readlinkSync(`/proc/${original.pid}/exe`);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-patchelf-'));
    tempDirs.push(dir);
    const copy = path.join(dir, path.basename(origLoc.file));
    fs.copyFileSync(origLoc.file, copy);
    execFileSync(patchelf!, ['--set-interpreter', ldso, '--set-rpath', path.dirname(ldso), copy]);
    const loadsBefore = parseElf(fs.readFileSync(origLoc.file)).loads;
    const loadsAfter = parseElf(fs.readFileSync(copy)).loads;
    expect(loadsAfter.length).toBe(loadsBefore.length + 1);
    expect(loadsAfter[0]!.vaddr).toBeLessThan(loadsBefore[0]!.vaddr);

    // the copy is not in its prefix, so point it at the original's standard library
    const prefix = path.dirname(path.dirname(origLoc.file));
    const patched = await spawnPython(copy, [], { ...process.env, PYTHONHOME: prefix });
    expect(fs.readlinkSync(`/proc/${patched.pid}/exe`)).toBe(copy);
    const loc = locateRuntime(patched.pid);
    expect(loc.file).toBe(copy);
    expect(loc.loadBias).toBe(0n);
    expect(loc.runtimeAddress).toBe(origLoc.runtimeAddress);
    checkRuntime('patchelf', patched, loc);
    recordCoverage(SUITE, 'patchelf', true);
  });
});

describe('an interpreter binary deleted after it started', () => {
  const base = nativeInterpreters().find((p) => /^debian-3\.1[3-9]/.test(p.label) && !p.missing);
  if (!base) {
    const why = 'no Debian 3.13+ interpreter is provisioned';
    cannotRun(SUITE, 'deleted-binary', why);
    return;
  }
  it('is read through /proc/PID/map_files, never from a different file at its path', async (ctx) => {
    const original = await spawnPython(base.command);
    const origLoc = locateRuntime(original.pid);
    const ldso = fs.readlinkSync(`/proc/${original.pid}/exe`);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-deleted-'));
    tempDirs.push(dir);
    const copy = path.join(dir, path.basename(origLoc.file));
    fs.copyFileSync(origLoc.file, copy);
    const prefix = path.dirname(path.dirname(origLoc.file));
    const target = await spawnPython(ldso, ['--library-path', path.dirname(ldso), copy], {
      ...process.env,
      PYTHONHOME: prefix,
    });
    fs.unlinkSync(copy);
    expect(readProcMaps(target.pid).some((m) => m.path === copy && m.deleted)).toBe(true);
    // map_files needs CAP_SYS_ADMIN (or CAP_CHECKPOINT_RESTORE)
    let mapFilesReadable = true;
    try {
      fs.readdirSync(`/proc/${target.pid}/map_files`).forEach((f) => fs.statSync(`/proc/${target.pid}/map_files/${f}`));
    } catch {
      mapFilesReadable = false;
    }
    if (!mapFilesReadable) {
      expect(() => locateRuntime(target.pid)).toThrow(/cannot open the mapped file \(deleted\)/);
      return skipTest(ctx, SUITE, 'deleted-binary', '/proc/PID/map_files is not readable (needs CAP_SYS_ADMIN)');
    }
    const loc = locateRuntime(target.pid);
    expect(loc.file).toBe(copy);
    expect(loc.runtimeAddress).toBe(origLoc.runtimeAddress);
    checkRuntime('deleted-binary', target, loc);
    // A different file now at the same path (another inode) must not be taken for it.
    fs.copyFileSync(onPath('sleep')!, copy);
    expect(locateRuntime(target.pid)).toEqual(loc);
    recordCoverage(SUITE, 'deleted-binary', true);
  });
});

describe('target errors', () => {
  it('a pid that has exited: "no process with pid N"', async () => {
    const child = track(spawn(process.execPath, ['-e', ''], { stdio: 'ignore' }));
    const pid = child.pid!;
    await new Promise((resolve) => child.on('exit', resolve));
    expect(fs.existsSync(`/proc/${pid}`)).toBe(false);
    const message = `no process with pid ${pid}`;
    expect(() => locateRuntime(pid)).toThrow(new TargetError('no-process', message));
    expect(() => openLinuxProcess(pid)).toThrow(message);
    expect(() => new ProcessMemory(pid)).toThrow(message);
    try {
      locateRuntime(pid);
    } catch (e) {
      expect(e).toBeInstanceOf(TargetError);
      expect((e as TargetError).kind).toBe('no-process');
    }
  });

  it('an invalid pid', () => {
    for (const pid of [0, -1, 1.5, Number.NaN]) expect(() => locateRuntime(pid)).toThrow(/^invalid pid/);
  });

  it('a process that is not Python', async () => {
    const sleeper = await spawnOther('sleep', ['60']);
    expect(() => openLinuxProcess(sleeper.pid!)).toThrow(
      new RegExp(
        `^pid ${sleeper.pid} does not look like CPython: no _PyRuntime in any mapped file \\(checked: no python3\\.N or libpython3\\.N among \\d+ mapped files\\)$`,
      ),
    );
  });

  it('a process whose executable is named like Python but is not', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-fake-'));
    tempDirs.push(dir);
    const fake = path.join(dir, 'python3.99');
    const sleepPath = onPath('sleep');
    expect(sleepPath).not.toBeNull();
    fs.copyFileSync(sleepPath!, fake);
    fs.chmodSync(fake, 0o755);
    const child = await spawnOther(fake, ['60']);
    let error: unknown;
    try {
      locateRuntime(child.pid!);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(TargetError);
    expect((error as TargetError).kind).toBe('not-python');
    expect((error as Error).message).toBe(
      `pid ${child.pid} does not look like CPython: no _PyRuntime in any mapped file (checked: ${fake}: no .PyRuntime section or _PyRuntime symbol)`,
    );
  });

  it('memory of another user’s process: permission denied', async (ctx) => {
    const victim = await spawnOther('sleep', ['60']);
    const expected = `cannot read memory of pid ${victim.pid}: permission denied (run as the same user as the target, or with CAP_SYS_PTRACE)`;
    const user = nobody();
    if (typeof user === 'string') {
      // Not root: a process of another user (pid 1 is root's) must be refused to us directly.
      const owner = fs.statSync('/proc/1').uid;
      if (owner === process.getuid?.()) {
        return skipTest(ctx, SUITE, 'permission-denied', 'not root, and pid 1 belongs to this user', false);
      }
      const denied = 'cannot read memory of pid 1: permission denied (run as the same user as the target, or with CAP_SYS_PTRACE)';
      expect(() => locateRuntime(1)).toThrow(denied);
      expect(() => new ProcessMemory(1)).toThrow(denied);
      recordCoverage(SUITE, 'permission-denied', true);
      return;
    }
    // A reader without CAP_SYS_PTRACE and another uid than the target's (root here).
    // (the module loaded as root, then run as nobody: nobody may not be able to enter the checkout)
    const module = path.resolve('src/record/linux/process.ts');
    const r = runAs(
      user,
      `const m = await import(${JSON.stringify(module)});`,
      `const out = [];
      for (const f of [() => m.locateRuntime(${victim.pid}), () => new m.ProcessMemory(${victim.pid})]) {
        try { f(); out.push('no error'); } catch (e) { out.push(e.name + ' ' + e.kind + ': ' + e.message); }
      }
      console.log(JSON.stringify(out));`,
      { tsx: true },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim().split('\n').pop()!)).toEqual([
      `TargetError permission: ${expected}`,
      `TargetError permission: ${expected}`,
    ]);
    recordCoverage(SUITE, 'permission-denied', true);
  });

  it('maps errno codes to the messages the CLI shows', () => {
    const err = (code: string) => Object.assign(new Error(`${code}: something`), { code });
    expect(targetErrorFromErrno(42, err('ENOENT'), 'maps').message).toBe('no process with pid 42');
    expect(targetErrorFromErrno(42, err('ESRCH'), 'mem').kind).toBe('no-process');
    for (const code of ['EACCES', 'EPERM']) {
      const e = targetErrorFromErrno(42, err(code), 'mem');
      expect(e.kind).toBe('permission');
      expect(e.message).toBe(
        'cannot read memory of pid 42: permission denied (run as the same user as the target, or with CAP_SYS_PTRACE)',
      );
    }
    const other = targetErrorFromErrno(42, err('EMFILE'), 'mem');
    expect(other.kind).toBe('read');
    expect(other.message).toBe('cannot read /proc/42/mem: EMFILE: something');
  });
});

describe('layout choice', () => {
  const noCookie = new Uint8Array(4096);
  noCookie[0] = 1;

  it('3.11/3.12 without Py_Version is an error that says so', () => {
    expect(() => chooseLayout('pid 7 (python3.12)', noCookie, null)).toThrow(
      /^pid 7 \(python3\.12\): _PyRuntime has no debug offsets .* no Py_Version/,
    );
  });

  it('an unsupported version passes the LayoutError message through', () => {
    let error: unknown;
    try {
      chooseLayout('pid 7 (python3.10)', noCookie, 0x030a07f0);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(TargetError);
    expect((error as TargetError).kind).toBe('unsupported');
    const cause = (error as TargetError).cause as Error;
    expect(cause.name).toBe('LayoutError');
    expect((error as Error).message).toBe(`pid 7 (python3.10): ${cause.message}`);
  });
});

describe('ProcessMemory on this process', () => {
  const maps = readProcMaps(process.pid);
  // Node's own executable is mapped from file offset 0, so it starts with the ELF header.
  const exeMap = maps.find((m) => m.offset === 0n && m.path === fs.realpathSync(process.execPath))!;
  const mem = new ProcessMemory(process.pid);
  afterAll(() => mem.close());

  it('reads, with one allocation or none', () => {
    expect(exeMap).toBeDefined();
    expect([...mem.read(exeMap.start, 4)]).toEqual([0x7f, 0x45, 0x4c, 0x46]);
    expect([...mem.tryRead(exeMap.start, 4)!]).toEqual([0x7f, 0x45, 0x4c, 0x46]);
    const target = new Uint8Array(10).fill(0xaa);
    mem.readInto(exeMap.start, target, 3, 4);
    expect([...target]).toEqual([0xaa, 0xaa, 0xaa, 0x7f, 0x45, 0x4c, 0x46, 0xaa, 0xaa, 0xaa]);
    expect(mem.tryReadInto(exeMap.start, target, 6)).toBe(true);
    expect(mem.read(exeMap.start, 0).length).toBe(0);
  });

  it('unreadable memory is a ReadError naming address and length (null from tryRead)', () => {
    expect(() => mem.read(0x1000n, 16)).toThrow(
      new ReadError(0x1000n, 16, `cannot read 16 bytes at 0x1000 in pid ${process.pid}: not mapped (EIO)`),
    );
    expect(mem.tryRead(0x1000n, 16)).toBeNull();
    expect(mem.tryReadInto(0x1000n, new Uint8Array(8))).toBe(false);
    // beyond 2^53: the address stays exact in the message (no rounding through a double)
    const far = (1n << 53n) + 8n;
    expect(() => mem.read(far, 8)).toThrow(`at 0x20000000000008 in pid`);
    expect(() => mem.read(1n << 63n, 8)).toThrow('address out of range');
    expect(() => mem.read(-8n, 8)).toThrow('address out of range');
    expect(mem.tryRead(1n << 64n, 8)).toBeNull();
    expect(() => mem.read(0x1000n, 1 << 31)).toThrow(ReadError);
    expect(() => mem.read(0x1000n, -1)).toThrow(ReadError);
    expect(() => mem.readInto(0x1000n, new Uint8Array(4), 2, 4)).toThrow(RangeError);
  });

  it('a read that runs off the end of a mapping is a short read', () => {
    const sorted = [...maps].sort((a, b) => (a.start < b.start ? -1 : 1));
    const edge = sorted.find((m, i) => m.perms.startsWith('r') && sorted[i + 1] && sorted[i + 1]!.start > m.end);
    expect(edge).toBeDefined();
    let error: unknown;
    try {
      mem.read(edge!.end - 8n, 16);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ReadError);
    expect((error as ReadError).address).toBe(edge!.end - 8n);
    expect((error as ReadError).length).toBe(16);
    expect((error as Error).message).toContain('short read: got 8 bytes');
  });

  it('a closed source refuses reads', () => {
    const other = new ProcessMemory(process.pid);
    other.close();
    other.close();
    expect(() => other.read(exeMap.start, 4)).toThrow('closed');
    expect(other.tryRead(exeMap.start, 4)).toBeNull();
  });
});

describe('parseProcMaps', () => {
  it('parses paths with spaces, deleted files, anonymous and pseudo mappings', () => {
    const text = [
      '00400000-00425000 r--p 00000000 fe:00 5309579                            /opt/my python/bin/python3.15',
      '7f2f8f800000-7f2f8f8f5000 r-xp 000f5000 103:02 26933    /usr/lib/libpython3.12.so.1.0 (deleted)',
      '00c96000-00cdd000 rw-p 00000000 00:00 0 ',
      '11535000-116fb000 rw-p 00000000 00:00 0                                  [heap]',
      'ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]',
      '',
    ].join('\n');
    const m = parseProcMaps(text);
    expect(m).toHaveLength(5);
    expect(m[0]).toEqual({
      start: 0x400000n,
      end: 0x425000n,
      perms: 'r--p',
      offset: 0n,
      dev: 'fe:00',
      inode: 5309579n,
      path: '/opt/my python/bin/python3.15',
      deleted: false,
    });
    expect(m[1]).toMatchObject({ path: '/usr/lib/libpython3.12.so.1.0', deleted: true, offset: 0xf5000n, dev: '103:02' });
    expect(m[2]).toMatchObject({ path: '', inode: 0n });
    expect(m[3]!.path).toBe('[heap]');
    expect(m[4]!.end).toBe(0xffffffffff601000n);
  });

  it('rejects a malformed line, naming it', () => {
    expect(() => parseProcMaps('00400000-00425000 r--p 0 fe:00 1 /x\ngarbage\n', '/proc/1/maps')).toThrow(
      new ProcMapsError('/proc/1/maps: line 2 is not a mapping: "garbage"'),
    );
    expect(() => parseProcMaps('00500000-00400000 r--p 0 fe:00 1 /x')).toThrow('ends before it starts');
  });
});

describe('parseElf', () => {
  /** A minimal ELF64 x86-64 shared object: one PT_LOAD, .PyRuntime, .dynsym, .dynstr, .shstrtab. */
  function buildElf(opts: { symbolShndx?: number; nameOffsetOverride?: number } = {}): Uint8Array {
    const shstr = '\0.shstrtab\0.dynstr\0.dynsym\0.PyRuntime\0';
    const dynstr = '\0_PyRuntime\0Py_Version\0';
    const enc = (s: string) => new TextEncoder().encode(s);
    const phoff = 64;
    const shstrOff = phoff + 56;
    const dynstrOff = shstrOff + shstr.length;
    const dynsymOff = Math.ceil((dynstrOff + dynstr.length) / 8) * 8;
    const nsyms = 4;
    const shoff = dynsymOff + nsyms * 24;
    const nsec = 5;
    const buf = new Uint8Array(shoff + nsec * 64);
    const dv = new DataView(buf.buffer);
    buf.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]);
    dv.setUint16(16, 3, true); // ET_DYN
    dv.setUint16(18, 62, true);
    dv.setBigUint64(0x20, BigInt(phoff), true);
    dv.setBigUint64(0x28, BigInt(shoff), true);
    dv.setUint16(0x36, 56, true);
    dv.setUint16(0x38, 1, true);
    dv.setUint16(0x3a, 64, true);
    dv.setUint16(0x3c, nsec, true);
    dv.setUint16(0x3e, 1, true);
    // PT_LOAD
    dv.setUint32(phoff, 1, true);
    dv.setBigUint64(phoff + 16, 0n, true);
    dv.setBigUint64(phoff + 48, 0x1000n, true);
    buf.set(enc(shstr), shstrOff);
    buf.set(enc(dynstr), dynstrOff);
    const sym = (i: number, name: number, shndx: number, value: bigint) => {
      const o = dynsymOff + i * 24;
      dv.setUint32(o, name, true);
      dv.setUint16(o + 6, shndx, true);
      dv.setBigUint64(o + 8, value, true);
      dv.setBigUint64(o + 16, 8n, true);
    };
    // an undefined reference to _PyRuntime first: it must be skipped
    sym(1, 1, 0, 0n);
    sym(2, opts.nameOffsetOverride ?? 1, opts.symbolShndx ?? 4, 0x5000n);
    sym(3, 12, 4, 0x4000n);
    const sec = (i: number, name: number, type: number, addr: bigint, off: number, size: number, link = 0, entsize = 0) => {
      const o = shoff + i * 64;
      dv.setUint32(o, name, true);
      dv.setUint32(o + 4, type, true);
      dv.setBigUint64(o + 16, addr, true);
      dv.setBigUint64(o + 24, BigInt(off), true);
      dv.setBigUint64(o + 32, BigInt(size), true);
      dv.setUint32(o + 40, link, true);
      dv.setBigUint64(o + 56, BigInt(entsize), true);
    };
    sec(1, 1, 3, 0n, shstrOff, shstr.length);
    sec(2, 11, 3, 0n, dynstrOff, dynstr.length);
    sec(3, 19, 11, 0n, dynsymOff, nsyms * 24, 2, 24);
    sec(4, 27, 1, 0x5000n, 0, 0x100);
    return buf;
  }

  it('reads loads, sections and defined symbols', () => {
    const elf = parseElf(buildElf());
    expect(elf.pie).toBe(true);
    expect(elf.loads).toHaveLength(1);
    expect(elf.sections.map((s) => s.name)).toEqual(['', '.shstrtab', '.dynstr', '.dynsym', '.PyRuntime']);
    expect(elf.section('.PyRuntime')?.addr).toBe(0x5000n);
    expect(elf.symbol('_PyRuntime')).toMatchObject({ value: 0x5000n, table: '.dynsym', sectionIndex: 4 });
    expect(elf.symbol('Py_Version')?.value).toBe(0x4000n);
    expect(elf.symbol('_PyRuntim')).toBeNull();
    expect(elf.symbol('missing')).toBeNull();
  });

  it('survives hostile symbol names and reserved section indexes', () => {
    expect(parseElf(buildElf({ nameOffsetOverride: 0xffffff })).symbol('_PyRuntime')).toBeNull();
    expect(parseElf(buildElf({ symbolShndx: 0xfff2 })).symbol('_PyRuntime')).toBeNull();
  });

  it('rejects what it cannot read, saying what and where', () => {
    const good = buildElf();
    const expectError = (bytes: Uint8Array, message: string | RegExp) => {
      expect(() => parseElf(bytes, 'f.so')).toThrow(ElfError);
      expect(() => parseElf(bytes, 'f.so')).toThrow(message);
    };
    expectError(new Uint8Array(100), 'f.so: not an ELF file');
    const elf32 = good.slice();
    elf32[4] = 1;
    expectError(elf32, 'f.so: ELF class 1 is not supported (only 64-bit ELF)');
    const be = good.slice();
    be[5] = 2;
    expectError(be, 'only little-endian');
    const arm = good.slice();
    new DataView(arm.buffer).setUint16(18, 183, true);
    expectError(arm, 'machine 183 is not supported');
    const core = good.slice();
    new DataView(core.buffer).setUint16(16, 4, true);
    expectError(core, 'ELF type 4 is not an executable or shared object');
    expectError(good.subarray(0, 40), 'truncated ELF header');
    expectError(good.subarray(0, 200), /f\.so: section header 0 \(offset 0x[0-9a-f]+, 1 × 64 bytes\) runs past the end of the file \(200 bytes\)/);
    const manyPhdrs = good.slice();
    new DataView(manyPhdrs.buffer).setUint16(0x38, 60000, true);
    expectError(manyPhdrs, /program header table \(offset 0x40, 60000 × 56 bytes\) runs past the end/);
    const badStrndx = good.slice();
    new DataView(badStrndx.buffer).setUint16(0x3e, 99, true);
    expectError(badStrndx, 'section name table index 99 is out of range (5 sections)');
    const badSymtab = good.slice();
    // .dynsym (section 3) claims far more entries than the file holds
    const shoff = Number(new DataView(good.buffer).getBigUint64(0x28, true));
    new DataView(badSymtab.buffer).setBigUint64(shoff + 3 * 64 + 32, 24n * 1_000_000n, true);
    const parsed = parseElf(badSymtab, 'f.so');
    expect(() => parsed.symbol('_PyRuntime')).toThrow(/f\.so: \.dynsym \(section 3\) .* runs past the end of the file/);
  });
});
