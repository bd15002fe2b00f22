// The worker test/runtimes.test.ts runs in workerd, bundled with esbuild under the conditions
// wrangler uses (workerd, worker, browser): `pyunwind` resolves to the processing entry. workerd
// compiles no WebAssembly at run time, so the kernel is a module it compiled when it loaded the
// worker (a `wasm` module in the config, `import kernel from 'pyunwind/kernel.wasm'` with
// wrangler). The captures are data bindings: GET /?capture=NAME answers with NAME's JSON export.
import kernel from './kernel.wasm';
import { exportJson, reportCaptureBytes } from 'pyunwind';

export default {
  async fetch(request, env) {
    const name = new URL(request.url).searchParams.get('capture') ?? '';
    const bytes = env[name];
    if (!(bytes instanceof ArrayBuffer)) return new Response(`no capture binding ${JSON.stringify(name)}`, { status: 404 });
    try {
      const { profile } = await reportCaptureBytes(new Uint8Array(bytes), { module: kernel });
      return new Response(exportJson(profile), { headers: { 'content-type': 'application/json' } });
    } catch (e) {
      return new Response(String((e && e.stack) || e), { status: 500 });
    }
  },
};
