#!/usr/bin/env -S node --max-semi-space-size=64 --min-semi-space-size=64 --heap-growing-percent=100
// Runs the CLI from TypeScript sources through tsx when no build exists, from dist otherwise.
// Node runs with a 64 MiB young-generation semi-space: the pipeline allocates per transaction
// and keeps up to `limits.maxInFlightTransactions` of them alive, which with V8's default
// (16 MiB) made scavenges several times as costly; and with the old generation let grow to twice
// what is live before it is collected (V8 lets it grow up to four times): a bulk transaction's
// garbage otherwise took the process over 500 MB (see README, Deployment). To choose otherwise,
// run it as `node [flags] bin/event-assembler.js`. The semi-space flags are for this thread only:
// main-thread-heap.js gives threads started later (tsx's module-hooks thread) 1 MiB semi-spaces.
import './main-thread-heap.js';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const built = join(root, 'dist', 'cli', 'main.js');
if (existsSync(built)) {
  const { buildProgram } = await import(pathToFileURL(built).href);
  await (await buildProgram(process.argv)).parseAsync(process.argv);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  const { buildProgram } = await import(pathToFileURL(join(root, 'src', 'cli', 'main.ts')).href);
  await (await buildProgram(process.argv)).parseAsync(process.argv);
}
