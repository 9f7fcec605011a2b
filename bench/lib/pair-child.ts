/**
 * One run of bench/pair.bench.ts, in a process of its own with one build (EA_BENCH_BUILD_DIR, read
 * by subject.ts) — two builds in one process disturb each other: the same code ran at 24 and at 39 µs
 * of CPU per snapshot row there, with 0 or 16 mark-compacts, depending on which build it was loaded as.
 * The job comes as JSON in EA_BENCH_PAIR_JOB; one JSON line with the result goes to stdout.
 */
import type pg from 'pg';
import type { EmbeddedPostgres } from '../../src/testing/postgres.js';
import { connectionConfigFor, connectionStringFor, runQuery } from '../../src/testing/postgres-sql.js';
import { watchGc, type RunGc } from './gc-watch.js';
import { drainPipeline } from './pipeline-run.js';
import { cpuSeconds } from './proc-cpu.js';
import { initialSnapshotRun } from './snapshot-runs.js';

export interface PairJob {
  readonly kind: 'stream' | 'snapshot';
  readonly server: { readonly host: string; readonly port: number; readonly superuser: string; readonly password: string };
  readonly kurrent: { readonly connectionString: string; readonly pid: number };
  /** stream: the database, the run's slot and where the pre-written WAL ends. */
  readonly stream?: { readonly database: string; readonly publication: string; readonly slot: string; readonly markLsn: string; readonly lastEndLsn: string; readonly transactions: number };
  /** snapshot: rows, and a suffix that names the run's database. */
  readonly snapshot?: { readonly rows: number; readonly suffix: string };
}

export interface PairResult {
  readonly seconds: number;
  readonly units: number;
  /** CPU seconds over the run alone: this (child) process, and the server process. */
  readonly bench: number;
  readonly server: number;
  readonly gc: RunGc;
}

/** The embedded server started by the parent, as far as the snapshot run uses it. */
function serverHandle(info: PairJob['server']): EmbeddedPostgres {
  const config = (opts?: { database?: string }): pg.ClientConfig => connectionConfigFor(info, opts);
  return {
    ...info,
    connectionString: (opts?: { database?: string }) => connectionStringFor(info, opts),
    connectionConfig: config,
    query: <R>(sql: string, params?: unknown[], opts?: { database?: string }) => runQuery<R>(config({ database: opts?.database }), sql, params),
    async createDatabase(name: string) {
      await runQuery(config(), `CREATE DATABASE "${name.replace(/"/g, '""')}"`);
    },
  } as unknown as EmbeddedPostgres;
}

async function run(job: PairJob): Promise<PairResult> {
  const gcWatch = watchGc();
  if (job.kind === 'stream') {
    const s = job.stream!;
    const serverStart = cpuSeconds(job.kurrent.pid) ?? Number.NaN;
    const self = process.cpuUsage();
    const captureUrl = connectionStringFor(job.server, { database: s.database });
    const r = await drainPipeline({ captureUrl, slot: s.slot, publication: s.publication, destination: job.kurrent.connectionString }, s.markLsn, s.lastEndLsn);
    const used = process.cpuUsage(self);
    const server = (cpuSeconds(job.kurrent.pid) ?? Number.NaN) - serverStart;
    if (r.events !== s.transactions) throw new Error(`bench: ${r.events} events appended, ${s.transactions} expected`);
    return { seconds: r.seconds, units: s.transactions, bench: (used.user + used.system) / 1e6, server, gc: gcWatch.stop() };
  }
  // The run's own database, filled before its clock and CPU watch start (snapshot-runs.ts).
  const r = await initialSnapshotRun(serverHandle(job.server), { ...job.kurrent, stop: async () => undefined }, job.snapshot!.rows, () => undefined, job.snapshot!.suffix);
  return { seconds: r.seconds, units: r.rows, bench: r.cpu.bench, server: r.cpu.server ?? Number.NaN, gc: gcWatch.stop() };
}

const job = JSON.parse(process.env.EA_BENCH_PAIR_JOB ?? 'null') as PairJob | null;
if (!job) throw new Error('bench/lib/pair-child.ts: EA_BENCH_PAIR_JOB (JSON) is missing; bench/pair.bench.ts starts this file');
process.stdout.write(`${JSON.stringify(await run(job))}\n`);
