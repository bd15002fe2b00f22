// Opening a file in the user's browser (`report --open`): $BROWSER when set, else the
// platform's opener where a desktop can show it. Says why when there is none.

import { spawn, spawnSync } from 'node:child_process';

/** The command that would open `file`, or the reason there is none. */
export function browserCommand(file: string, env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): { command: string; args: string[] } | { none: string } {
  if (env.BROWSER) return { command: env.BROWSER, args: [file] };
  if (platform === 'darwin') return { command: 'open', args: [file] };
  if (platform === 'win32') return { command: 'cmd', args: ['/c', 'start', '', file] };
  if (!env.DISPLAY && !env.WAYLAND_DISPLAY) return { none: 'no desktop to show it on (neither DISPLAY nor WAYLAND_DISPLAY is set; set BROWSER to a browser command)' };
  const found = spawnSync('sh', ['-c', 'command -v xdg-open'], { encoding: 'utf8' });
  if (found.status !== 0) return { none: 'xdg-open is not installed (set BROWSER to a browser command)' };
  return { command: 'xdg-open', args: [file] };
}

/** Open `file` in a browser, detached; null when it was started, else why not. */
export function openInBrowser(file: string): string | null {
  const how = browserCommand(file);
  if ('none' in how) return how.none;
  try {
    const child = spawn(how.command, how.args, { detached: true, stdio: 'ignore' });
    child.on('error', () => {});
    child.unref();
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}
