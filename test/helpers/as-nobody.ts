// Running code as another user (nobody) for the permission tests, without that user having to
// reach the checkout: the child starts as this (root) user, loads every module it needs, and
// only then gives up its user and group — so a checkout under a private directory (what
// `mktemp -d` makes; many home directories) works as well as a public one.
import { spawnSync } from 'node:child_process';

/** nobody's uid and gid, when this process is root and can become it; else why not. */
export function nobody(): { uid: number; gid: number } | string {
  if (process.getuid?.() !== 0) return 'needs root to run code as another user';
  const id = (flag: string): number => Number(spawnSync('id', [flag, 'nobody'], { encoding: 'utf8' }).stdout.trim());
  const uid = id('-u');
  const gid = id('-g');
  if (!Number.isInteger(uid) || !Number.isInteger(gid) || uid === 0) return 'no user nobody on this machine';
  return { uid, gid };
}

/**
 * Run an ES module program (`load`: its imports, run as this user; then `body`, run as
 * `user`) in a child node, with `node --import tsx` when it imports TypeScript.
 */
export function runAs(user: { uid: number; gid: number }, load: string, body: string, options: { tsx?: boolean } = {}): { code: number | null; stdout: string; stderr: string } {
  const program = `${load}\nprocess.setgroups?.([]);\nprocess.setgid(${user.gid});\nprocess.setuid(${user.uid});\n${body}`;
  const args = [...(options.tsx ? ['--import', 'tsx'] : []), '--input-type=module', '-e', program];
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
