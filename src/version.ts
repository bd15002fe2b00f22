// pyunwind's version, from package.json (src/ and dist/ both sit one level below it).
import fs from 'node:fs';

export const VERSION: string = (
  JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/** How a capture names the recorder that wrote it. */
export const RECORDER = `pyunwind ${VERSION}`;
