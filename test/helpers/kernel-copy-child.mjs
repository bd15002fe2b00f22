// A process that opens the kernel copier on the Python process argv[2] and waits
// (test/kernel-copy.test.ts): it prints "ready" once the program is attached, or the one line
// that says why it cannot be (exit code 3).
import { KernelCopier } from '../../dist/record/linux/kernel-copier.js';
import { openLinuxProcess } from '../../dist/record/linux/process.js';

const source = openLinuxProcess(Number(process.argv[2]));
try {
  KernelCopier.open(source.pid, { rateHz: 100, layout: source.layout, tstateSize: source.layout.tstate.size });
  process.stdout.write('ready\n');
  setInterval(() => {}, 1000);
} catch (e) {
  process.stdout.write(`${e.message}\n`);
  process.exitCode = 3;
} finally {
  source.close();
}
