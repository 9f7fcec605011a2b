// What the configuration module's language costs in memory for the life of the process: the
// invoicing example's configuration as `.ts` (compiled as the CLI compiles it: on its main thread
// since 2026-12-06, through tsx before) and as `.mjs`, each loaded by a fresh process with the CLI's Node flags
// (bench/lib/config-load-probe.mjs), interleaved; the mappers and the library from the compiled
// tree (bench/tsconfig.package.json), as a deployment imports them from the package.
//
//   npx tsc -p bench/tsconfig.package.json && node --import tsx bench/config-load.bench.ts    # EA_BENCH_ROUNDS (default 5)
//
// Prints only; record figures by hand.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { CLI_NODE_FLAGS, REPO_ROOT } from '../test/resilience/assembler-process.js';

const ROUNDS = Math.max(1, Number(process.env.EA_BENCH_ROUNDS ?? 5));
const TREE = process.env.EA_BENCH_PACKAGE_DIR ?? '.tmp/bench-package';
const fromTree = (file: string): string => pathToFileURL(path.join(REPO_ROOT, TREE, file)).href;

const dir = mkdtempSync(path.join(os.tmpdir(), 'ea-config-load-'));
try {
  writeFileSync(path.join(dir, 'package.json'), '{ "type": "module" }\n');
  const body = `import { defineConfig } from '${fromTree('src/config/index.js')}';
import { createInvoicingMappers } from '${fromTree('examples/invoicing/index.js')}';
export default defineConfig({
  name: 'config-load',
  source: { connection: 'postgres://capture@localhost/app', slot: 'probe', publication: 'probe', tables: ['public.invoice', 'public.customer'] },
  destination: { connectionString: 'kurrentdb://localhost:2113?tls=false' },
  mappers: createInvoicingMappers(),
});
`;
  for (const ext of ['ts', 'mjs']) writeFileSync(path.join(dir, `config.${ext}`), body);
  const figures: Record<string, string[]> = { ts: [], mjs: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const ext of round % 2 === 0 ? ['ts', 'mjs'] : ['mjs', 'ts']) {
      const out = execFileSync(process.execPath, ['--expose-gc', ...CLI_NODE_FLAGS, path.join(REPO_ROOT, 'bench/lib/config-load-probe.mjs'), path.join(dir, `config.${ext}`)], { cwd: REPO_ROOT, encoding: 'utf8' });
      const { threads, rssMiB, anonMiB } = JSON.parse(out.trim().split('\n').pop()!) as { threads: number; rssMiB: number; anonMiB: number };
      figures[ext]!.push(`${rssMiB} (anon ${anonMiB}, ${threads} threads)`);
    }
  }
  for (const ext of ['ts', 'mjs']) console.log(`config .${ext}: RSS MiB after loading, per run: ${figures[ext]!.join(' · ')}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
