/**
 * The initial snapshot with the assembler as a child process — the CLI from the build
 * (bench/lib/build-cli.ts, with bin/event-assembler.js's Node flags), as it runs in service — for
 * its peak RSS (VmHWM) and CPU time alone: the bench process (tsx, the harness, the fill) is not
 * in the figure. Timed from the process start (Node start-up and config loading included) until
 * its log says "snapshot: complete"; then stopped with SIGTERM.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT, startAssemblerProcess } from '../../test/resilience/assembler-process.js';
import type { EmbeddedPostgres } from '../../src/testing/postgres.js';
import { COMMAND } from './bulk-drain.js';
import { createBenchDatabase, PUBLICATION, TABLES } from './invoicing-db.js';
import type { ServerProcess } from './kurrentdb-server.js';
import { CONTRACTS_DIR } from './pipeline-run.js';
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

/** The `snapshot` section of the assembler's configuration: an initial snapshot, with EA_BENCH_SNAPSHOT_OPTIONS added. */
const SNAPSHOT_SECTION = JSON.stringify({ mode: 'initial', ...SNAPSHOT_OPTIONS });

export async function initialSnapshotProcessRun(server: EmbeddedPostgres, kurrent: ServerProcess, rows: number, suffix = ''): Promise<SnapshotProcessRun> {
  const db = await createBenchDatabase(server, `bench_snapshot_process${suffix}`);
  await fillInvoices(db, rows);
  const slot = `bench_snapshot_process${suffix}`;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ea-snapshot-'));
  const logFile = path.join(dir, 'assembler.log');
  const src = (file: string): string => pathToFileURL(path.join(REPO_ROOT, file)).href;
  writeFileSync(path.join(dir, 'package.json'), '{ "type": "module" }\n');
  const config = path.join(dir, 'snapshot.config.ts');
  writeFileSync(
    config,
    `import { defineConfig } from '${src('src/config/index.ts')}';
import { createInvoicingMappers } from '${src('examples/invoicing/index.ts')}';
export default defineConfig({
  name: 'bench-snapshot-process',
  source: { connection: process.env.BENCH_CAPTURE_URL, slot: '${slot}', publication: '${PUBLICATION}', tables: ${JSON.stringify(TABLES)} },
  destination: { connectionString: process.env.BENCH_KURRENTDB_URL },
  mappers: createInvoicingMappers(),
  contracts: { dir: ${JSON.stringify(CONTRACTS_DIR)} },
  snapshot: ${SNAPSHOT_SECTION},
});
`,
  );
  const serverStart = cpuSeconds(kurrent.pid);
  const started = performance.now();
  const child = startAssemblerProcess(config, logFile, { BENCH_CAPTURE_URL: server.connectionString({ database: db.name }), BENCH_KURRENTDB_URL: kurrent.connectionString }, COMMAND);
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
