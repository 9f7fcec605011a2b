/**
 * The three things bench/reconcile.bench.ts times on the same line: a plain COPY of the columns
 * reconcile reads, a plain read of the events reconcile reads, and `event-assembler reconcile`
 * itself as a child process of the production build.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FORWARDS, KurrentDBClient, START, streamNameFilter } from '@kurrent/kurrentdb-client';
import pg from 'pg';
import type { ReconcileReport } from '../../src/reconcile/index.js';
import { CLI_NODE_FLAGS, REPO_ROOT } from '../../test/resilience/assembler-process.js';

/** What reconcile reads of an invoice (examples/invoicing/reconcilers.ts), in key order. */
export const COPY_SQL = 'COPY (SELECT id, customer_id, status, currency, total FROM invoice ORDER BY id) TO STDOUT';
/** The destination read reconcile does for the invoice reconciler: its prefix and its metastreams'. */
export const EVENT_PREFIXES = ['invoice-', '$$invoice-'];

export interface Timed {
  readonly seconds: number;
  readonly count: number;
}

/**
 * The COPY through node-postgres, counting rows and nothing else: one CopyData message per row
 * (copyto.c), received through the client's submittable extension point — the floor of what
 * reading the table costs a Node process, connection included.
 */
export async function plainCopy(connection: string): Promise<Timed> {
  const started = performance.now();
  const client = new pg.Client({ connectionString: connection });
  await client.connect();
  try {
    let rows = 0;
    await new Promise<void>((resolve, reject) => {
      let failure: Error | null = null;
      const submittable = {
        submit: (con: { query(text: string): void }) => con.query(COPY_SQL),
        handleCopyData: () => void (rows += 1),
        handleError: (error: Error) => void (failure = error),
        handleReadyForQuery: () => (failure ? reject(failure) : resolve()),
        handleCommandComplete() {},
        handleRowDescription() {},
        handleDataRow() {},
        handleEmptyQuery() {},
        handleCopyInResponse() {},
        handlePortalSuspended() {},
      };
      (client as unknown as { query(q: unknown): unknown }).query(submittable);
    });
    return { seconds: (performance.now() - started) / 1000, count: rows };
  } finally {
    await client.end();
  }
}

/** `readAll` forwards from the start, filtered on the server as reconcile filters it, counting events; client set-up included. */
export async function plainRead(kurrentdb: string): Promise<Timed> {
  const started = performance.now();
  // As reconcile's reader (readerConnectionString): the bridge's first read waits one discovery interval.
  const client = KurrentDBClient.connectionString(`${kurrentdb}&discoveryInterval=50`);
  try {
    let events = 0;
    for await (const resolved of client.readAll({ direction: FORWARDS, fromPosition: START, filter: streamNameFilter({ prefixes: EVENT_PREFIXES }) })) {
      if (resolved.event) events += 1;
    }
    return { seconds: (performance.now() - started) / 1000, count: events };
  } finally {
    await client.dispose();
  }
}

export interface ReconcileRun {
  readonly seconds: number;
  /** The report's own duration (cut, wait, both reads, compare), without Node's start and loading the configuration. */
  readonly reportSeconds: number;
  readonly waitedSeconds: number;
  /** Peak resident set size of the reconcile process (its ru_maxrss through /usr/bin/time, or VmHWM sampled), MiB. */
  readonly peakRssMiB: number;
  readonly report: ReconcileReport;
  readonly exitCode: number | null;
}

const TIME = '/usr/bin/time';

/** VmHWM of a running process, kB (0 when it is gone). */
function highWaterKb(pid: number): number {
  try {
    const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : 0;
  } catch {
    return 0;
  }
}

/**
 * `event-assembler reconcile --config <file> <args> --json` as a child process: the CLI of the
 * production build (bench/lib/build-cli.ts on `.tmp/bench-build`, which `npm run bench:reconcile`
 * has just built) with the Node flags of bin/event-assembler.js's shebang. (bin/ itself would run
 * `dist/` when it exists — possibly stale — and the TypeScript sources through tsx when not.)
 */
export async function runReconcileCli(configFile: string, args: readonly string[], env: Record<string, string>): Promise<ReconcileRun> {
  // EA_BENCH_RECONCILE_CPU_PROF=<dir>: a V8 CPU profile of each reconcile process, for finding where its time goes.
  const profile = process.env.EA_BENCH_RECONCILE_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.EA_BENCH_RECONCILE_CPU_PROF}`] : [];
  const cli = [...CLI_NODE_FLAGS, ...profile, '--import', 'tsx', path.join(REPO_ROOT, 'bench/lib/build-cli.ts'), 'reconcile', '--config', configFile, ...args, '--json'];
  const rssFile = path.join(os.tmpdir(), `ea-bench-reconcile-rss-${process.pid}-${Date.now()}`);
  const timed = existsSync(TIME);
  const [command, argv] = timed ? [TIME, ['-f', '%M', '-o', rssFile, process.execPath, ...cli]] : [process.execPath, cli];
  const started = performance.now();
  const child = spawn(command, argv, { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  let sampledKb = 0;
  const sampler = timed ? null : setInterval(() => (sampledKb = Math.max(sampledKb, highWaterKb(child.pid!))), 50);
  const exitCode = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => resolve(code));
  });
  const seconds = (performance.now() - started) / 1000;
  if (sampler) clearInterval(sampler);
  let peakKb = sampledKb;
  if (timed) {
    peakKb = Number(readFileSync(rssFile, 'utf8').trim().split('\n').at(-1));
    rmSync(rssFile, { force: true });
  }
  let report: ReconcileReport;
  try {
    report = JSON.parse(stdout) as ReconcileReport;
  } catch {
    throw new Error(`reconcile ${args.join(' ')} exited ${exitCode} without a JSON report:\n${stderr.slice(-4000)}`);
  }
  return { seconds, reportSeconds: report.durationMs / 1000, waitedSeconds: report.cut.waitedMs / 1000, peakRssMiB: Math.round(peakKb / 1024), report, exitCode };
}
