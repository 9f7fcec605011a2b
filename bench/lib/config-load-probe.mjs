// Loads one configuration module the way the CLI does (config/load.ts of the compiled tree,
// bench/tsconfig.package.json) in a process started with the CLI's Node flags, then prints what
// the process holds afterwards as one JSON line: threads, VmRSS and RssAnon (MiB), after a full GC.
// Run by bench/config-load.bench.ts: node --expose-gc <CLI flags> bench/lib/config-load-probe.mjs <config>
import '../../bin/main-thread-heap.js';
import { readdirSync, readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const tree = process.env.EA_BENCH_PACKAGE_DIR ?? '.tmp/bench-package';
const { importConfigModule } = await import(pathToFileURL(path.resolve(tree, 'src/config/load.js')).href);
await importConfigModule(process.argv[2]);
globalThis.gc?.();
await new Promise((resolve) => setTimeout(resolve, 500));
const status = readFileSync('/proc/self/status', 'utf8');
const mib = (field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]) / 1024;
console.log(JSON.stringify({ threads: readdirSync('/proc/self/task').length, rssMiB: Math.round(mib('VmRSS')), anonMiB: Math.round(mib('RssAnon')) }));
