/**
 * The latency run's load and observer, in a process of their own so that neither shares an
 * event loop with the assembler under test (a busy loop would delay the writer's schedule and
 * the subscriber's clock readings, and the figures would measure the harness):
 *
 *   node --import tsx bench/lib/latency-driver.ts <json: { connection, kurrentdb, count, rate, prefix }>
 *
 * Subscribes to `$all` (streams starting with the prefix), writes `count` invoice transactions at
 * `rate` per second, waits until every event arrived (or 300 s), and prints one JSON line:
 * `{ samples: number[] (commit → seen, ms, in arrival order), late, writeSeconds, drainSeconds }`.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { writeInvoicesPaced, type BenchDatabase } from './invoicing-db.js';
import { probeCommitToAppend } from './pipeline-run.js';

/** Steady rates (transactions/s) `npm run bench` measures commit → seen at, unless EA_BENCH_RATES says otherwise. */
export const DEFAULT_LATENCY_RATES: readonly number[] = [5_000, 1_000, 100];

export interface LatencyDriverInput {
  readonly connection: pg.ClientConfig;
  readonly kurrentdb: string;
  readonly count: number;
  readonly rate: number;
  readonly prefix: string;
}

export interface LatencyDriverResult {
  readonly samples: number[];
  readonly late: number;
  readonly writeSeconds: number;
  readonly drainSeconds: number;
}

/** Runs the driver as a child process and resolves with its result. */
export function runLatencyDriver(input: LatencyDriverInput): Promise<LatencyDriverResult> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), JSON.stringify(input)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => {
      const line = out.trim().split('\n').pop() ?? '';
      if (code !== 0 || !line.startsWith('{')) return reject(new Error(`latency driver exited with code ${code}`));
      resolve(JSON.parse(line) as LatencyDriverResult);
    });
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const input = JSON.parse(process.argv[2]!) as LatencyDriverInput;
  const { default: pgModule } = await import('pg');
  const pool = new pgModule.Pool({ ...input.connection, max: 2 });
  const db = { connection: input.connection, query: async (sql: string, params?: unknown[]) => (await pool.query(sql, params)).rows } as unknown as BenchDatabase;
  const probe = await probeCommitToAppend(input.kurrentdb, `invoice-${input.prefix}`);
  try {
    const paced = await writeInvoicesPaced(db, input.count, input.rate, input.prefix, 8);
    const drainStart = Date.now();
    for (const deadline = drainStart + 300_000; probe.samples.length < input.count && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 20));
    const result: LatencyDriverResult = { samples: probe.samples, late: paced.late, writeSeconds: paced.seconds, drainSeconds: (Date.now() - drainStart) / 1000 };
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await probe.stop();
    await pool.end();
  }
}
