// The CLI the tests start as child processes: `src/` transpiled once per vitest run (global setup)
// with esbuild — the transform tsx applies to each file when a child runs `--import tsx`, with the
// same tsconfig — instead of in every child. A start under tsx cost 2.4–2.8 CPU-s (user + system)
// against 1.3–1.4 from transpiled files (`run --help`, this machine), and a run starts about 140
// CLIs on 2 cores. Configuration modules and the examples they import are compiled in the child
// by the CLI's own config loader (src/config/compile-module.ts), as they are for a user.
//
// The output sits one level below the repository (`.test-cli-<pid>/`), as `dist/` does: modules
// find the repository's `contracts/` and `examples/` by relative URLs from their own place.
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/** The directory prefix of the transpiled CLI under the repository (.gitignore lists it). */
export const TEST_CLI_PREFIX = '.test-cli-';
/** The environment variable through which test workers find the transpiled CLI's entry module. */
export const TEST_CLI_ENV = 'EA_TEST_CLI_ENTRY';

export interface TestCli {
  /** The transpiled `src/cli/main.ts`. */
  readonly entry: string;
  remove(): void;
}

/** Transpiles every module of `<root>/src` (tests excluded) into `<root>/.test-cli-<pid>/`. */
export async function buildTestCli(root: string): Promise<TestCli> {
  removeStaleBuilds(root);
  const srcDir = join(root, 'src');
  const outDir = join(root, `${TEST_CLI_PREFIX}${process.pid}`);
  const entryPoints = readdirSync(srcDir, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.test.ts') && !file.endsWith('.d.ts'))
    .map((file) => join(srcDir, file));
  const { build } = await import('esbuild'); // only global setup needs it, not the modules that import the constants
  await build({
    entryPoints,
    outdir: outDir,
    outbase: srcDir,
    bundle: false,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: 'inline',
    tsconfig: join(root, 'tsconfig.json'),
    logLevel: 'error',
  });
  const entry = join(outDir, 'cli', 'main.js');
  if (!existsSync(entry)) throw new Error(`the transpiled CLI has no ${entry}`);
  return { entry, remove: () => rmSync(outDir, { recursive: true, force: true }) };
}

/** Removes what runs killed before their teardown left behind (their process is gone). */
function removeStaleBuilds(root: string): void {
  for (const name of readdirSync(root)) {
    if (!name.startsWith(TEST_CLI_PREFIX)) continue;
    const pid = Number(name.slice(TEST_CLI_PREFIX.length));
    if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) continue;
    rmSync(join(root, name), { recursive: true, force: true });
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
