// Headless Chromium for tests: Debian's chromium driven by playwright-core, offline. Every page
// a test opens gets no network: requests to anything but the test's own origins are aborted
// and counted, so a page that would fetch from the internet is caught, not just slow.

import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';

/** Where Chromium is looked for: $CHROMIUM, then Debian's path. */
export function chromiumPath(): string | null {
  for (const p of [process.env.CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser']) if (p && fs.existsSync(p)) return p;
  return null;
}

/** Why browser tests cannot run here (null: they can). */
export function browserMissing(): string | null {
  return chromiumPath() ? null : 'Chromium is not installed (Debian package chromium; npm run provision:browser, or set CHROMIUM)';
}

export interface OfflineBrowser {
  browser: Browser;
  context: BrowserContext;
  /** a new page whose requests outside `allow` (URL prefixes; file: and data: always allowed) are aborted */
  page(allow?: string[]): Promise<Page>;
  /** requests that were aborted, across every page */
  blocked: string[];
  close(): Promise<void>;
}

export async function launchOffline(): Promise<OfflineBrowser> {
  const executablePath = chromiumPath();
  if (!executablePath) throw new Error(browserMissing()!);
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'],
    // (playwright gives every launch a fresh, empty profile of its own)
  });
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const blocked: string[] = [];
  return {
    browser,
    context,
    blocked,
    async page(allow: string[] = []) {
      const page = await context.newPage();
      await page.route('**/*', (route) => {
        const url = route.request().url();
        if (url.startsWith('file:') || url.startsWith('data:') || url.startsWith('blob:') || allow.some((a) => url.startsWith(a))) return route.continue();
        blocked.push(url);
        return route.abort();
      });
      return page;
    },
    async close() {
      await browser.close();
    },
  };
}

/** The folder for files tests leave for a person to look at (screenshots): test-output/ in the checkout. */
export function testOutputDir(): string {
  const dir = path.resolve('test-output');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

/**
 * The built viewer and one capture from a plain static server (127.0.0.1): no COOP/COEP, so the
 * page is not cross-origin isolated — as where a user hosts the viewer's files themselves. The
 * capture is /capture.pyuw; a viewer file is /NAME.
 */
export async function plainServer(webDir: string, capture: string): Promise<{ origin: string; close(): Promise<void> }> {
  const types: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm' };
  const server = http.createServer((req, res) => {
    const name = new URL(req.url ?? '/', 'http://x').pathname.slice(1);
    const file = name === 'capture.pyuw' ? capture : fs.readdirSync(webDir).includes(name) ? path.join(webDir, name) : null;
    if (!file) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': types[path.extname(file)] ?? 'application/octet-stream' }).end(fs.readFileSync(file));
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return { origin: `http://127.0.0.1:${port}`, close: () => new Promise<void>((ok) => server.close(() => ok())) };
}
