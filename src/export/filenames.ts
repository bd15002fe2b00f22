// Short file names for what a person reads in a terminal (report's text, top, dump), as py-spy
// shows them: a module of the standard library or of site-packages by its path below that
// directory (threading.py, re/__init__.py, requests/api.py), the program's own files relative to
// the working directory; anything else whole. The formats read by other tools keep whole paths.

/** What a module path starts past: a packages directory, or the standard library's. */
const PACKAGES = ['/site-packages/', '/dist-packages/'];
const STDLIB = /\/lib\/python3\.\d+\//g;

/** `filename` shortened (see the top of the file); `cwd`: the directory the program's own files are shown relative to. */
export function shortFilename(filename: string, cwd?: string): string {
  if (!filename.startsWith('/')) return filename;
  // the last such directory in the path (a venv's site-packages lies below its lib/python3.X)
  let end = -1;
  for (const p of PACKAGES) {
    const at = filename.lastIndexOf(p);
    if (at >= 0) end = Math.max(end, at + p.length);
  }
  for (const m of filename.matchAll(STDLIB)) end = Math.max(end, m.index + m[0].length);
  if (end > 0 && end < filename.length) return filename.slice(end);
  if (cwd) {
    const dir = cwd.endsWith('/') ? cwd : `${cwd}/`;
    if (filename.startsWith(dir) && filename.length > dir.length) return filename.slice(dir.length);
  }
  return filename;
}
