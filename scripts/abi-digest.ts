// Writes assembly/abi-digest.ts: the digest of the WebAssembly ABI (src/kernel/abi.ts and the
// capture codes the engine decodes, src/capture/codes.ts), compiled into the kernel, which
// exports it as abiDigest(). The host computes the same digest from the same modules and
// refuses a kernel whose digest is not its own: a build/ left from before a change to the ABI
// (src/kernel/digest.ts). Run by `npm run build:wasm` before asc; the file is not committed.
import fs from 'node:fs';
import path from 'node:path';
import { abiDigest } from '../src/kernel/digest.js';

const out = path.resolve('assembly/abi-digest.ts');
const digest = abiDigest();
fs.writeFileSync(
  out,
  `// Written by scripts/abi-digest.ts (npm run build:wasm): the digest of src/kernel/abi.ts and\n// src/capture/codes.ts this kernel was built from. Not committed.\nexport const ABI_DIGEST: u32 = 0x${digest.toString(16).padStart(8, '0')};\n`,
);
