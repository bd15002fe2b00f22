// Writes package.json's version into src/version.ts (run by `npm version`, through the
// "version" script, after package.json is bumped and before the commit).
import fs from 'node:fs';

const { version } = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const file = new URL('../src/version.ts', import.meta.url);
const source = fs.readFileSync(file, 'utf8');
const next = source.replace(/^export const VERSION = '[^']*';$/m, `export const VERSION = '${version}';`);
if (!next.includes(`export const VERSION = '${version}';`)) throw new Error('src/version.ts: no `export const VERSION = ...;` line to rewrite');
fs.writeFileSync(file, next);
