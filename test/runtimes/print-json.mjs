// Run by test/runtimes.test.ts in Deno and Bun (from the package root): processes a capture with
// the built package and prints its JSON export to stdout, nothing else.
//
//   print-json.mjs FILE          the processing entry (dist/processing.js): reportCaptureBytes
//                                on the file's bytes, the kernel from its default place
//   print-json.mjs FILE --root   the package's root, imported by name ('pyunwind', resolved by the
//                                runtime's export conditions): reportCapture(FILE) where the root
//                                is Node's (it has files and worker threads), else as above.
//                                Which root it was goes to stderr ("root: node" / "root: processing").
const args = typeof Deno !== 'undefined' ? Deno.args : process.argv.slice(2);
const [file, mode] = args;
const cwd = typeof Deno !== 'undefined' ? Deno.cwd() : process.cwd();
const url = new URL(file, `file://${cwd}/`);

const entry = mode === '--root' ? await import('pyunwind') : await import('../../dist/processing.js');
let report;
if ('reportCapture' in entry) {
  console.error('root: node');
  report = await entry.reportCapture(decodeURIComponent(url.pathname), { workers: 2 });
} else {
  if (mode === '--root') console.error('root: processing');
  // fetch reads file: URLs in Deno and Bun
  const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
  report = await entry.reportCaptureBytes(bytes);
}
const out = entry.exportJson(report.profile);
// stdout may be a pipe: write it all before the runtime exits
if (typeof Deno !== 'undefined') await Deno.stdout.write(new TextEncoder().encode(out));
else await new Promise((resolve, reject) => process.stdout.write(out, (e) => (e ? reject(e) : resolve())));
