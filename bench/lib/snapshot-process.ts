/**
 * The initial snapshot with the assembler as a child process — the CLI from the build
 * (bench/lib/build-cli.ts, with bin/event-assembler.js's Node flags), as it runs in service — for
 * its peak RSS (VmHWM) and CPU time alone: the bench process (tsx, the harness, the fill) is not
 * in the figure. Timed from the process start (Node start-up and config loading included) until
 * its log says "snapshot: complete"; then stopped with SIGTERM.
 *
 * EA_BENCH_SNAPSHOT_SHAPE, how the process is put together:
 * - `dev` (default, as every record before 2026-12-06's config-language one): the CLI from the build
 *   under `--import tsx`, its configuration importing `src/` and the example's TypeScript sources — a
 *   second copy of the library, compiled with the configuration, which no deployment loads;
 * - `ts`: a deployment with a TypeScript configuration — the CLI, the library and the example's
 *   mappers from one compiled tree (bench/tsconfig.package.json, `.tmp/bench-package`), the
 *   `.ts` configuration compiled by the CLI (src/config/compile-module.ts; through tsx until 2026-12-06);
 * - `mjs`: the same with the configuration in JavaScript: no TypeScript loader in the process.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT, startAssemblerProcess } from '../../test/resilience/assembler-process.js';
import type { EmbeddedPostgres } from '../../src/testing/postgres.js';
import { COMMAND, NODE_ARGS } from './bulk-drain.js';
import { createBenchDatabase, PUBLICATION, TABLES } from './invoicing-db.js';
import type { ServerProcess } from './kurrentdb-server.js';
import { BENCH_LIMITS, CONTRACTS_DIR } from './pipeline-run.js';
import { cpuSeconds, mainThreadCpuSeconds } from './proc-cpu.js';
import { fillInvoices } from './reconcile-line.js';
import { SNAPSHOT_OPTIONS } from './snapshot-runs.js';

export interface SnapshotProcessRun {
  readonly rows: number;
  readonly events: number;
  readonly seconds: number;
  /** CPU seconds of the assembler process (start-up included), of its main thread (where the pipeline runs) and of the server over the run. */
  readonly cpu: { readonly assembler: number | null; readonly mainThread: number | null; readonly server: number | null };
  readonly peakRssMiB: number;
}

function vmHwmKiB(pid: number): number {
  try {
    return Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? Number.NaN);
  } catch {
    return Number.NaN;
  }
}

const SHAPES = ['dev', 'ts', 'mjs'] as const;
const SHAPE = (process.env.EA_BENCH_SNAPSHOT_SHAPE ?? 'dev') as (typeof SHAPES)[number];
if (!SHAPES.includes(SHAPE)) throw new Error(`EA_BENCH_SNAPSHOT_SHAPE: use ${SHAPES.join(', ')} (got "${SHAPE}")`);
const PACKAGE_DIR = process.env.EA_BENCH_PACKAGE_DIR ?? '.tmp/bench-package';
/** `ts` and `mjs`: the compiled tree's CLI (bench/lib/package-cli.mjs) with the CLI's Node flags. */
const PACKAGE_COMMAND = [...NODE_ARGS, path.join(REPO_ROOT, 'bench/lib/package-cli.mjs')];

/** The URL the configuration imports `file` (a TypeScript source of the repository) from, in {@link SHAPE}. */
function moduleUrl(file: string): string {
  const inTree = SHAPE === 'dev' ? file : path.join(PACKAGE_DIR, file.replace(/\.ts$/, '.js'));
  return pathToFileURL(path.join(REPO_ROOT, inTree)).href;
}

/** The `snapshot` section of the assembler's configuration: an initial snapshot, with EA_BENCH_SNAPSHOT_OPTIONS added. */
const SNAPSHOT_SECTION = JSON.stringify({ mode: 'initial', ...SNAPSHOT_OPTIONS });
/** EA_BENCH_LIMITS (e.g. '{"maxCachedStreams":20000}'): the configuration's `limits`, the defaults otherwise. */
const LIMITS_LINE = BENCH_LIMITS ? `\n  limits: ${JSON.stringify(BENCH_LIMITS)},` : '';

export async function initialSnapshotProcessRun(server: EmbeddedPostgres, kurrent: ServerProcess, rows: number, suffix = ''): Promise<SnapshotProcessRun> {
  const db = await createBenchDatabase(server, `bench_snapshot_process${suffix}`);
  await fillInvoices(db, rows);
  const slot = `bench_snapshot_process${suffix}`;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ea-snapshot-'));
  const logFile = path.join(dir, 'assembler.log');
  writeFileSync(path.join(dir, 'package.json'), '{ "type": "module" }\n');
  const config = path.join(dir, `snapshot.config.${SHAPE === 'mjs' ? 'mjs' : 'ts'}`);
  writeFileSync(
    config,
    `import { defineConfig } from '${moduleUrl('src/config/index.ts')}';
import { createInvoicingMappers } from '${moduleUrl('examples/invoicing/index.ts')}';
export default defineConfig({
  name: 'bench-snapshot-process',
  source: { connection: process.env.BENCH_CAPTURE_URL, slot: '${slot}', publication: '${PUBLICATION}', tables: ${JSON.stringify(TABLES)} },
  destination: { connectionString: process.env.BENCH_KURRENTDB_URL },
  mappers: createInvoicingMappers(),
  contracts: { dir: ${JSON.stringify(CONTRACTS_DIR)} },
  snapshot: ${SNAPSHOT_SECTION},${LIMITS_LINE}
});
`,
  );
  const serverStart = cpuSeconds(kurrent.pid);
  const started = performance.now();
  const child = startAssemblerProcess(config, logFile, { BENCH_CAPTURE_URL: server.connectionString({ database: db.name }), BENCH_KURRENTDB_URL: kurrent.connectionString }, SHAPE === 'dev' ? COMMAND : PACKAGE_COMMAND);
  let peak = 0;
  try {
    for (const deadline = Date.now() + 3_600_000; ; ) {
      peak = Math.max(peak, vmHwmKiB(child.pid) || 0);
      let log = '';
      try {
        log = readFileSync(logFile, 'utf8');
      } catch {
        // not written yet
      }
      const complete = log.split('\n').find((line) => line.includes('"msg":"snapshot: complete"'));
      if (complete) {
        const seconds = (performance.now() - started) / 1000;
        const line = JSON.parse(complete) as { rows: number; events: number };
        const cpu = { assembler: cpuSeconds(child.pid), mainThread: mainThreadCpuSeconds(child.pid), server: serverStart === null ? null : (cpuSeconds(kurrent.pid) ?? Number.NaN) - serverStart };
        peak = Math.max(peak, vmHwmKiB(child.pid) || 0);
        return { rows: line.rows, events: line.events, seconds, cpu, peakRssMiB: Math.round(peak / 1024) };
      }
      if (log.includes('"level":"fatal"') || log.includes('"msg":"assembler failed"')) throw new Error(`bench: the assembler failed:\n${log.slice(-3000)}`);
      if (Date.now() > deadline) throw new Error('bench: the initial snapshot did not complete within an hour');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    await child.kill('SIGTERM').catch(() => undefined);
    await db.dropSlots([slot]);
    rmSync(dir, { recursive: true, force: true });
  }
}
