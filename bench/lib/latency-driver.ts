/**
 * The latency run's load and observer, in a process of their own so that neither shares an
 * event loop with the assembler under test:
 *
 *   node --import tsx bench/lib/latency-driver.ts <json: { connection, kurrentdb, count, rate, prefix }>
 *
 * Writes `count` invoice transactions at `rate` per second inside PostgreSQL (a DO block that
 * commits each one on its schedule: `writeInvoicesPaced`), waits until every event is in the
 * destination (or 300 s), reads them back and prints one JSON line:
 * `{ samples: number[] (commit → durable, ms, in the destination's order), late, writeSeconds, drainSeconds }`.
 * Commit → durable is the destination's commit time of the event minus the source's
 * (`commitToDurable`): nothing watches the run while it runs. (Until 2026-12-05 a client wrote each
 * transaction as a round trip and a live subscriber timed the events: on 2 cores the writer then
 * reached ≈ 3,100 of 5,000 tx/s and the subscriber took ≈ 0.2 of a core.)
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { writeInvoicesPaced, type BenchDatabase } from './invoicing-db.js';
import { commitToDurable } from './pipeline-run.js';

/** Steady rates (transactions/s) `npm run bench` measures commit → durable at, unless EA_BENCH_RATES says otherwise. */
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
  const db = { connection: input.connection } as BenchDatabase;
  const paced = await writeInvoicesPaced(db, input.count, input.rate, input.prefix);
  const { samples, drainSeconds } = await commitToDurable(input.kurrentdb, `invoice-${input.prefix}`, input.count, 300_000);
  const result: LatencyDriverResult = { samples, late: paced.late, writeSeconds: paced.seconds, drainSeconds };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
