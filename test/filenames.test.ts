// File names as a person reads them in a terminal (report's text, top, dump): short, as py-spy
// shows them.
import { describe, expect, it } from 'vitest';
import { shortFilename } from '../src/export/filenames.js';

describe('shortFilename', () => {
  it.each([
    ['/usr/lib/python3.15/threading.py', undefined, 'threading.py'],
    ['/root/.pyenv/versions/3.12.1/lib/python3.12/re/__init__.py', undefined, 're/__init__.py'],
    ['/usr/lib/python3/dist-packages/requests/api.py', undefined, 'requests/api.py'],
    // a venv's site-packages lies below its lib/python3.X: the last such directory counts
    ['/home/u/venv/lib/python3.12/site-packages/numpy/core/x.py', undefined, 'numpy/core/x.py'],
    ['/home/u/app/main.py', '/home/u', 'app/main.py'],
    ['/home/u/app/main.py', '/home/u/', 'app/main.py'],
    ['/home/u/app/main.py', '/other', '/home/u/app/main.py'],
    ['/home/u/app/main.py', undefined, '/home/u/app/main.py'],
    ['<frozen runpy>', undefined, '<frozen runpy>'],
    ['app.py', '/home/u', 'app.py'],
    ['/usr/lib/python3.15/', undefined, '/usr/lib/python3.15/'],
  ])('%s (cwd %s) → %s', (filename, cwd, want) => {
    expect(shortFilename(filename, cwd)).toBe(want);
  });
});
