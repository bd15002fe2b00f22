#!/usr/bin/env node
// The pyunwind command (built from src/cli/ into dist/cli/ by `npm run build`).
import('../dist/cli/main.js')
  .then((m) => m.main(process.argv.slice(2)))
  .then((code) => {
    process.exitCode = code;
  })
  .catch((e) => {
    process.stderr.write(`pyunwind: ${e && e.message ? e.message : e}\n`);
    process.exitCode = 1;
  });
