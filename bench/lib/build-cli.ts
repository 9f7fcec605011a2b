// The CLI from the production build (`.tmp/bench-build`, as `npm run bench` builds it), for
// benchmarks that run the assembler as a child process: `node --import tsx bench/lib/build-cli.ts run --config …`
// (tsx only for the TypeScript config and mapper modules, as the CLI loads them).
// EA_BENCH_BUILD_DIR (relative to the repository root) runs another build instead, e.g. one of an
// earlier commit, to compare two builds in one bench run (bench/downtime.bench.ts).
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const build = process.env.EA_BENCH_BUILD_DIR ?? '.tmp/bench-build';
const main = fileURLToPath(new URL(`../../${build.replace(/\/?$/, '/')}cli/main.js`, import.meta.url));
if (!existsSync(main)) throw new Error(`no build at ${main} — run "npx tsc -p tsconfig.build.json --outDir .tmp/bench-build" first`);
// buildProgram is async and loads only the subcommand argv names (cli/main.ts), as bin/ calls it.
const { buildProgram } = (await import(pathToFileURL(main).href)) as { buildProgram(argv?: readonly string[]): Promise<{ parseAsync(argv: string[]): Promise<unknown> }> };
await (await buildProgram(process.argv)).parseAsync(process.argv);
