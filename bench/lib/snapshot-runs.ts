/**
 * Snapshots end to end, for `npm run bench` (bench/run.ts): rows in PostgreSQL → events durable
 * in the in-memory KurrentDB (its own process, `appendLatencyMs` per append).
 *
 * - initial: the invoicing tables filled with `rows` invoices (and a tenth as many customers;
 *   bench/lib/reconcile-line.ts `fillInvoices`), the assembler (production build, in this
 *   process) started with `snapshot: { mode: 'initial' }` — timed from `run()` until its snapshot
 *   is finished (every record's events durable).
 * - incremental: the same tables filled before the slot exists (so the rows are not in its
 *   stream), the assembler streaming (`snapshot: never`), then an ad hoc snapshot requested
 *   through the WAL (as `event-assembler snapshot` does) while the latency driver
 *   (latency-driver.ts, a process of its own) writes invoices at `writerRate` per second — timed
 *   from the request to the generation finished; the writer's commit → durable latency alongside.
 * Each with the CPU of this process (the assembler), the walsender and the server (cpu-watch.ts).
 */
import pg from 'pg';
import { newSnapshotRequest, emitSnapshotRequest } from '../../src/source/snapshot/request.js';
import type { Assembler } from '../../src/pipeline/index.js';
import type { EmbeddedPostgres } from '../../src/testing/postgres.js';
import { watchCpu, type RunCpu } from './cpu-watch.js';
import { createBenchDatabase, PUBLICATION, TABLES } from './invoicing-db.js';
import { runLatencyDriver } from './latency-driver.js';
import { BENCH_LIMITS, CONTRACTS_DIR, maxOf, percentile } from './pipeline-run.js';
import { fillInvoices } from './reconcile-line.js';
import { createAssembler, silentLogger } from './subject.js';
import { createInvoicingMappers } from '../../examples/invoicing/index.js';
import type { ServerProcess } from './kurrentdb-server.js';

export interface SnapshotRun {
  readonly kind: 'initial' | 'incremental';
  /** Snapshot rows read and events the snapshot appended (all captured tables). */
  readonly rows: number;
  readonly events: number;
  readonly seconds: number;
  readonly cpu: RunCpu;
  /** Incremental: the paced writer alongside (commit → durable, ms, read back from the destination; first two seconds left out). */
  readonly writer: { readonly rate: number; readonly transactions: number; readonly p50: number; readonly p99: number; readonly max: number; readonly late: number; readonly writeSeconds: number } | null;
}

/** Waits (polling every 20 ms) until `check` holds; throws on the assembler's failure or at the deadline. */
export async function until(what: string, timeoutMs: number, check: () => boolean, assembler: Assembler, failure: () => unknown): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    const failed = failure();
    if (failed) throw failed;
    if (assembler.status().state === 'failed') throw new Error(`bench: the assembler failed while waiting for ${what}`);
    if (Date.now() > deadline) throw new Error(`bench: ${what} not within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** EA_BENCH_SNAPSHOT_OPTIONS (JSON, e.g. '{"chunkSize":512}'): added to the assembler's `snapshot` section, in every kind (snapshot-process.ts too). */
export const SNAPSHOT_OPTIONS = JSON.parse(process.env.EA_BENCH_SNAPSHOT_OPTIONS || '{}') as { readonly chunkSize?: number; readonly parallelism?: number; readonly readAhead?: number };

function assemblerFor(name: string, captureUrl: string, slot: string, kurrentdb: string, mode: 'initial' | 'never'): Assembler {
  return createAssembler(
    {
      name,
      source: { connection: captureUrl, slot, publication: PUBLICATION, tables: [...TABLES] },
      destination: { connectionString: kurrentdb },
      mappers: createInvoicingMappers(),
      contracts: { dir: CONTRACTS_DIR },
      snapshot: { mode, ...SNAPSHOT_OPTIONS },
      ...(BENCH_LIMITS ? { limits: BENCH_LIMITS } : {}),
    },
    { logger: silentLogger },
  );
}

/**
 * The CPU watch's question (which walsender serves the slot) over one connection: asked every
 * 25 ms until a walsender appears — through the whole initial snapshot, when none does — a new
 * connection each time (SCRAM authentication included) cost this process ~6 µs per snapshot row.
 */
async function watcherQuery(connection: pg.ClientConfig): Promise<{ query: (sql: string, params: unknown[]) => Promise<{ pid: number | null }[]>; end(): Promise<void> }> {
  const client = new pg.Client(connection);
  client.on('error', () => undefined);
  await client.connect();
  return {
    query: async (sql, params) => (await client.query<{ pid: number | null }>(sql, params)).rows,
    end: () => client.end().catch(() => undefined),
  };
}

/** The initial snapshot of `rows` invoices (and their customers) into `kurrent`. */
export async function initialSnapshotRun(server: EmbeddedPostgres, kurrent: ServerProcess, rows: number, log: (line: string) => void, suffix = ''): Promise<SnapshotRun> {
  const db = await createBenchDatabase(server, `bench_snapshot_initial${suffix}`);
  const captureUrl = server.connectionString({ database: db.name });
  await fillInvoices(db, rows);
  const slot = 'bench_snapshot_initial';
  const assembler = assemblerFor('bench-snapshot-initial', captureUrl, slot, kurrent.connectionString, 'initial');
  const watcher = await watcherQuery(db.connection);
  const cpu = watchCpu({ slot, query: watcher.query, serverPid: kurrent.pid });
  const started = performance.now();
  let failure: unknown = null;
  const running = assembler.run();
  running.catch((error: unknown) => (failure = error ?? new Error('the assembler failed')));
  try {
    await until('the initial snapshot', 3_600_000, () => assembler.status().snapshot?.finished === true, assembler, () => failure);
    const seconds = (performance.now() - started) / 1000;
    const used = await cpu.stop();
    const snapshot = assembler.status().snapshot!;
    log(`initial snapshot: ${snapshot.rows.toLocaleString('en-US')} rows, ${snapshot.events.toLocaleString('en-US')} events in ${seconds.toFixed(1)} s`);
    return { kind: 'initial', rows: snapshot.rows, events: snapshot.events, seconds, cpu: used, writer: null };
  } finally {
    await assembler.stop();
    await running.catch(() => undefined);
    await watcher?.end();
    await db.dropSlots([slot]);
  }
}

/** An ad hoc (incremental) snapshot of `rows` invoices while a writer commits `writerRate` invoices per second for `writerSeconds`. */
export async function incrementalSnapshotRun(
  server: EmbeddedPostgres,
  kurrent: ServerProcess,
  rows: number,
  writer: { readonly rate: number; readonly seconds: number },
  log: (line: string) => void,
  suffix = '',
): Promise<SnapshotRun> {
  const db = await createBenchDatabase(server, `bench_snapshot_incremental${suffix}`);
  const captureUrl = server.connectionString({ database: db.name });
  await fillInvoices(db, rows);
  const slot = 'bench_snapshot_incremental';
  await db.createSlots([slot]); // after the fill: the rows reach KurrentDB only through the snapshot
  const name = 'bench-snapshot-incremental';
  const assembler = assemblerFor(name, captureUrl, slot, kurrent.connectionString, 'never');
  let failure: unknown = null;
  let watcher: Awaited<ReturnType<typeof watcherQuery>> | null = null;
  const running = assembler.run();
  running.catch((error: unknown) => (failure = error ?? new Error('the assembler failed')));
  try {
    await until('the assembler running', 120_000, () => assembler.status().state === 'running', assembler, () => failure);
    watcher = await watcherQuery(db.connection);
    const cpu = watchCpu({ slot, query: watcher.query, serverPid: kurrent.pid });
    const client = new pg.Client(db.connection);
    await client.connect();
    const started = performance.now();
    try {
      await emitSnapshotRequest(client, newSnapshotRequest({ assembler: name, tables: ['public.customer', 'public.invoice'], requestedBy: 'bench' }));
    } finally {
      await client.end();
    }
    const driven = runLatencyDriver({ connection: db.connection, kurrentdb: kurrent.connectionString, count: Math.round(writer.rate * writer.seconds), rate: writer.rate, prefix: 'snapw' });
    driven.catch(() => undefined);
    await until('the ad hoc snapshot', 3_600_000, () => assembler.status().snapshot?.action === 'ad-hoc-snapshot' && assembler.status().snapshot?.finished === true, assembler, () => failure);
    const seconds = (performance.now() - started) / 1000;
    const used = await cpu.stop();
    const snapshot = assembler.status().snapshot!;
    const paced = await driven;
    const steady = paced.samples.slice(Math.min(2 * writer.rate, Math.floor(paced.samples.length / 10)));
    log(`incremental snapshot: ${snapshot.rows.toLocaleString('en-US')} rows, ${snapshot.events.toLocaleString('en-US')} events in ${seconds.toFixed(1)} s; writer p50 / p99 / max ${percentile(steady, 50)} / ${percentile(steady, 99)} / ${maxOf(steady)} ms`);
    return {
      kind: 'incremental',
      rows: snapshot.rows,
      events: snapshot.events,
      seconds,
      cpu: used,
      writer: { rate: writer.rate, transactions: paced.samples.length, p50: percentile(steady, 50), p99: percentile(steady, 99), max: maxOf(steady), late: paced.late, writeSeconds: paced.writeSeconds },
    };
  } finally {
    await assembler.stop();
    await running.catch(() => undefined);
    await watcher?.end();
    await db.dropSlots([slot]);
  }
}
