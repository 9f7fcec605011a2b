// The CLI of a compiled tree (bench/tsconfig.package.json) started as bin/event-assembler.js starts
// dist's: no TypeScript loader in the process (a .ts configuration is compiled by the CLI's own
// config loader, src/config/compile-module.ts). EA_BENCH_PACKAGE_DIR picks the tree.
import '../../bin/main-thread-heap.js';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const tree = process.env.EA_BENCH_PACKAGE_DIR ?? '.tmp/bench-package';
const main = fileURLToPath(new URL(`../../${tree.replace(/\/?$/, '/')}src/cli/main.js`, import.meta.url));
if (!existsSync(main)) throw new Error(`no compiled tree at ${main} — run "npx tsc -p bench/tsconfig.package.json" first`);
const { buildProgram } = await import(pathToFileURL(main).href);
await (await buildProgram(process.argv)).parseAsync(process.argv);
