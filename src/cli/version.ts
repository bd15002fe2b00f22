// pyunwind's version, from package.json (src/cli/ and dist/cli/ both sit two levels below it).
import fs from 'node:fs';

export const VERSION: string = (
  JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
