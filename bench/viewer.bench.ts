// How fast the viewer processes a capture in Chromium, in its own worker against spread over
// processing workers — in a cross-origin-isolated page (pyunwind view: the capture in one
// SharedArrayBuffer, the kernel's shared-memory build) and in a page that is not (a plain
// server: each block copied to its worker, the plain build). The time is the viewer's own
// (file bytes in the worker → profile and everything the page shows); the cases alternate, round
// after round, in one browser, so they meet the same machine.
//
//   node --import tsx bench/viewer.bench.ts CAPTURE.pyuw [ROUNDS] [WORKERS]
//
// ROUNDS (default 3); WORKERS (default: the browser's navigator.hardwareConcurrency). Needs
// `npm run build` (dist/web) and Chromium (npm run provision:browser). A capture worth it is
// large: bench/big-capture.ts makes one from any recording.
import path from 'node:path';
import { launchOffline, plainServer } from '../harness/browser.js';
import { defaultWebDir, startViewServer } from '../src/cli/view.js';
import type { Processing } from '../web/protocol.js';

const [file, roundsArg, workersArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: node --import tsx bench/viewer.bench.ts CAPTURE.pyuw [ROUNDS] [WORKERS]');
  process.exit(2);
}
const rounds = Number(roundsArg ?? 3);

const browser = await launchOffline();
const view = await startViewServer({ file: path.resolve(file) });
const plain = await plainServer(defaultWebDir(), path.resolve(file));
try {
  const probe = await browser.page([new URL(view.base).origin]);
  await probe.goto(view.base);
  const workers = Number(workersArg ?? (await probe.evaluate(() => navigator.hardwareConcurrency)));
  await probe.close();
  const cases = [
    { name: 'isolated, this worker', url: `${view.url}&workers=0`, origin: new URL(view.base).origin },
    { name: `isolated, ${workers} workers`, url: `${view.url}&workers=${workers}`, origin: new URL(view.base).origin },
    { name: 'not isolated, this worker', url: `${plain.origin}/index.html?file=capture.pyuw&workers=0`, origin: plain.origin },
    { name: `not isolated, ${workers} workers`, url: `${plain.origin}/index.html?file=capture.pyuw&workers=${workers}`, origin: plain.origin },
  ];
  const times = new Map<string, number[]>(cases.map((c) => [c.name, []]));
  let samples = 0;
  for (let r = 0; r < rounds; r++) {
    for (const c of cases) {
      const page = await browser.page([c.origin]);
      await page.goto(c.url);
      await page.waitForSelector('body[data-state="ready"], body[data-state="error"]', { timeout: 600_000 });
      const got = await page.evaluate(() => {
        const r = (window as unknown as { __pyunwindViewer: { result: { millis: number; processing: Processing; stats: { attempted: number } } | null } }).__pyunwindViewer.result;
        return r && { millis: r.millis, processing: r.processing, samples: r.stats.attempted };
      });
      await page.close();
      if (!got) throw new Error(`${c.name}: the viewer showed an error`);
      if (samples && got.samples !== samples) throw new Error(`${c.name}: ${got.samples} samples, another case ${samples}`);
      samples = got.samples;
      times.get(c.name)!.push(got.millis);
      process.stderr.write(`\rround ${r + 1}/${rounds}: ${c.name} ${got.millis} ms          `);
    }
  }
  process.stderr.write('\n');
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  const base = median(times.get(cases[0]!.name)!);
  console.log(`${path.basename(file)}: ${samples.toLocaleString('en')} samples; median of ${rounds} rounds, Chromium ${browser.browser.version()}`);
  console.log('case                          ms   samples/s   × this worker (isolated)');
  for (const c of cases) {
    const m = median(times.get(c.name)!);
    console.log(`${c.name.padEnd(26)} ${String(m).padStart(6)} ${Math.round(samples / (m / 1000)).toLocaleString('en').padStart(11)}   ${(base / m).toFixed(2)}   (${times.get(c.name)!.join(', ')})`);
  }
} finally {
  await view.close();
  await plain.close();
  await browser.close();
}
