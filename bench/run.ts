// End-to-end benchmark: the assembler against a raw replication consumer on the same WAL.
//
//   npm run bench                                  # 50,000 transactions, 3 rounds
//   EA_BENCH_TRANSACTIONS=10000 EA_BENCH_ROUNDS=1 EA_BENCH_LATENCY_SECONDS=0 EA_BENCH_SNAPSHOT_ROWS=0 npm run bench   # quick
//
// 1. An embedded PostgreSQL 17 gets the invoicing schema, 100 customers and a publication; then
//    one logical slot per consumer and round is created at the same point, and N transactions
//    (one draft invoice + three lines each, 4 rows) are written into the WAL before anything is
//    drained. The machine's load average is read before anything starts.
// 2. Each consumer drains its own slot, in EA_BENCH_ROUNDS (default 3) interleaved rounds: the raw
//    reader first in each round, the others in turn, reversed in even rounds (bench/lib/e2e-runs.ts):
//    - raw: a minimal CopyBoth reader that receives the pgoutput stream and discards it;
//    - source only: capture (decode, transaction buffer) + mapping + contract validation, no sink;
//    - assembler with a null sink: `createAssembler(config, { sink: nullSink })`;
//    - assembler with the in-memory KurrentDB (in a process of its own) at 0 ms and 2 ms per append.
//    A consumer is done when its slot is told the last transaction is durable (the assembler's
//    `acknowledgedLsn`), or — raw — when the last commit arrived. Each round's ratios are to that
//    round's raw run; reported: the median and the spread, and the CPU time per transaction of
//    each process — this one (where the consumers run), the walsender, the in-memory KurrentDB.
// 3. Commit-to-append latency at steady rates (EA_BENCH_RATES, default "5000,1000,100" transactions/s,
//    each for EA_BENCH_LATENCY_SECONDS, default 20, after 2,000 warm-up transactions): the assembler with the in-memory KurrentDB runs, and
//    a driver process (bench/lib/latency-driver.ts) has PostgreSQL commit the invoices at that rate
//    (a DO block), then reads every event back from the destination: its commit time there minus
//    the source commit time in its metadata (same machine, same clock); the assembler's own
//    commit → durable percentiles are reported next to it.
// 4. Snapshots end to end (bench/lib/snapshot-runs.ts) over EA_BENCH_SNAPSHOT_ROWS invoices (default
//    200,000; 0 skips them) and a tenth as many customers, into the in-memory KurrentDB at
//    EA_BENCH_SNAPSHOT_APPEND_MS (default 1) per append: the initial snapshot, and an ad hoc
//    (incremental) snapshot while a paced writer commits EA_BENCH_SNAPSHOT_WRITER_RATE (default 200)
//    invoices per second for EA_BENCH_SNAPSHOT_WRITER_SECONDS (default 15): rows/s, CPU per row,
//    the writer's commit → durable latency.
//
// Prints a markdown report and writes bench/results/<date>-e2e.md (EA_BENCH_WRITE=0: prints only).
// EA_BENCH_DEBUG=1 also logs the latency runs' slow samples (index in arrival order: ms).
import { execSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres } from '../src/testing/postgres.js';
import { e2eReport, type LatencyRow } from './lib/e2e-report.js';
import { CONSUMERS, runConsumer, slotOf, summarize, type ConsumerRun, type DrainContext } from './lib/e2e-runs.js';
import { createBenchDatabase, PUBLICATION, writeInvoicesBulk } from './lib/invoicing-db.js';
import { benchAssembler, maxOf, percentile } from './lib/pipeline-run.js';
import { DEFAULT_LATENCY_RATES, runLatencyDriver } from './lib/latency-driver.js';
import { startKurrentDBProcess } from './lib/kurrentdb-server.js';
import { cpuSeconds } from './lib/proc-cpu.js';
import { machinePaceMs } from './lib/machine-pace.js';
import { incrementalSnapshotRun, initialSnapshotRun, type SnapshotRun } from './lib/snapshot-runs.js';

const N = Number(process.env.EA_BENCH_TRANSACTIONS ?? 50_000);
const ROUNDS = Math.max(1, Number(process.env.EA_BENCH_ROUNDS ?? 3));
const RATES = process.env.EA_BENCH_RATES ? process.env.EA_BENCH_RATES.split(',').map(Number).filter((r) => r > 0) : [...DEFAULT_LATENCY_RATES];
const LATENCY_SECONDS = Number(process.env.EA_BENCH_LATENCY_SECONDS ?? 20);
const SNAPSHOT_ROWS = Number(process.env.EA_BENCH_SNAPSHOT_ROWS ?? 200_000);
const SNAPSHOT_APPEND_MS = Number(process.env.EA_BENCH_SNAPSHOT_APPEND_MS ?? 1);
const SNAPSHOT_WRITER = { rate: Number(process.env.EA_BENCH_SNAPSHOT_WRITER_RATE ?? 200), seconds: Number(process.env.EA_BENCH_SNAPSHOT_WRITER_SECONDS ?? 15) };
const MARK = Math.max(1, Math.floor(N / 10));
/** Transactions the assembler's own commit → durable percentiles cover (its lag window). */
const ASSEMBLER_LAG_WINDOW = 10_000;

/** Units per append call between two `status().batching` readings. */
function unitsPerCallSince(before: { calls: number; unitsPerCall: number | null }, after: { calls: number; unitsPerCall: number | null }): number {
  const units = (b: { calls: number; unitsPerCall: number | null }) => b.calls * (b.unitsPerCall ?? 0);
  const calls = after.calls - before.calls;
  return calls > 0 ? (units(after) - units(before)) / calls : Number.NaN;
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const log = (line: string) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}`);
const loadText = (load: number[]) => load.map((l) => l.toFixed(2)).join(' / ');

// Before anything of the bench starts: figures are for a quiet machine (load below 0.5).
const loadAtStart = os.loadavg();
const paceAtStart = machinePaceMs();
log(`load average at start ${loadText(loadAtStart)}; ${fmt(N)} transactions, ${ROUNDS} round(s)`);
const server = await startEmbeddedPostgres();
const runs: ConsumerRun[] = [];
const latencies: LatencyRow[] = [];
const snapshots: SnapshotRun[] = [];
let pgoutputBytes: number | null = null;
const notes: string[] = [];
try {
  const db = await createBenchDatabase(server, 'bench');
  const captureUrl = server.connectionString({ database: db.name });
  const slots = Array.from({ length: ROUNDS }, (_, r) => CONSUMERS.map((c) => slotOf(c.kind, r + 1))).flat();
  await db.createSlots(slots);
  const t0 = performance.now();
  await writeInvoicesBulk(db, N);
  log(`wrote ${fmt(N)} transactions (${fmt(4 * N)} rows) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  const ctx: DrainContext = { db, captureUrl, transactions: N, mark: MARK };
  const others = CONSUMERS.map((c) => c.kind).filter((kind) => kind !== 'raw');
  for (let round = 1; round <= ROUNDS; round++) {
    for (const kind of ['raw' as const, ...(round % 2 === 1 ? others : [...others].reverse())]) {
      try {
        const run = await runConsumer(kind, round, ctx);
        runs.push(run);
        pgoutputBytes ??= run.raw?.bytes ?? null;
        log(`round ${round}, ${kind}: ${run.seconds.toFixed(2)} s; CPU s: bench process ${run.cpu.bench.toFixed(2)}, walsender ${run.cpu.walsender?.toFixed(2) ?? '—'}, server ${run.cpu.server?.toFixed(2) ?? '—'}`);
      } catch (error) {
        notes.push(`round ${round}, ${kind}: failed — ${error instanceof Error ? error.message : String(error)}`);
        log(`round ${round}, ${kind}: FAILED ${error instanceof Error ? error.stack : String(error)}`);
        if (kind === 'raw' && !ctx.lsns) throw error;
      }
    }
  }
  await db.dropSlots(slots);

  // ── commit-to-append latency at steady rates ──
  for (const rate of LATENCY_SECONDS > 0 ? RATES : []) {
    const slot = `latency_${rate}`;
    const kurrent = await startKurrentDBProcess(0);
    await db.createSlots([slot]);
    const assembler = benchAssembler({ captureUrl, slot, publication: PUBLICATION, destination: kurrent.connectionString });
    const running = assembler.run();
    running.catch(() => undefined);
    try {
      for (const deadline = Date.now() + 60_000; assembler.status().state !== 'running'; ) {
        if (assembler.status().state === 'failed' || Date.now() > deadline) throw new Error(`latency run: assembler is ${assembler.status().state}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // Warm-up: 2,000 invoices through the whole path first (connections, the client's bridge, and
      // V8 optimising the hot paths — without it the first ~1,200 paced transactions queue behind
      // unoptimised code), so the paced run measures the steady state.
      const WARM_UP = 2_000;
      await writeInvoicesBulk(db, WARM_UP, `w${rate}x`);
      for (const deadline = Date.now() + 120_000; assembler.status().events.appended < WARM_UP; ) {
        if (assembler.status().state === 'failed' || Date.now() > deadline) throw new Error(`latency run: no warm-up event appended (${assembler.status().state})`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const count = Math.round(rate * LATENCY_SECONDS);
      // The writer runs in PostgreSQL, its driver in a process of its own (latency-driver.ts): not on the assembler's event loop.
      const cpuBefore = cpuSeconds(process.pid);
      const batchingBefore = assembler.status().batching;
      const driven = await runLatencyDriver({ connection: db.connection, kurrentdb: kurrent.connectionString, count, rate, prefix: `l${rate}x` });
      // The first two seconds are the paced writer's ramp (the machine's 2 cores saturate briefly):
      // left out, at most a tenth of the samples.
      const steady = driven.samples.slice(Math.min(2 * rate, Math.floor(driven.samples.length / 10)));
      if (process.env.EA_BENCH_DEBUG) log(`slow samples (index:ms): ${driven.samples.map((v, i) => [i, v]).filter(([, v]) => v! > 300).map(([i, v]) => `${i}:${v}`).filter((_, k, all) => k % 20 === 0 || k === all.length - 1).slice(0, 60).join(" ")}`);
      // The assembler's own percentiles cover its last 10,000 transactions: with fewer paced ones,
      // the warm-up burst (queued, so late by design) would be part of them — not reported then.
      const own = count >= ASSEMBLER_LAG_WINDOW ? assembler.status().lag.commitToAppendPercentiles : null;
      const result = {
        rate,
        transactions: count,
        events: driven.samples.length,
        p50: percentile(steady, 50),
        p99: percentile(steady, 99),
        max: maxOf(steady),
        late: driven.late,
        writeSeconds: driven.writeSeconds,
        drainSeconds: driven.drainSeconds,
        assemblerP50: own?.p50Ms ?? Number.NaN,
        assemblerP99: own?.p99Ms ?? Number.NaN,
        assemblerCpuUs: cpuBefore === null ? Number.NaN : (((cpuSeconds(process.pid) ?? Number.NaN) - cpuBefore) * 1e6) / count,
        unitsPerCall: unitsPerCallSince(batchingBefore, assembler.status().batching),
      };
      latencies.push(result);
      log(`latency at ${rate}/s: ${JSON.stringify({ ...result, batching: assembler.status().batching })}`);
      await db.dropSlots([slot]).catch(() => undefined);
    } catch (error) {
      notes.push(`latency at ${rate}/s: failed — ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      await assembler.stop();
      await kurrent.stop();
    }
  }

  // ── snapshots end to end ──
  if (SNAPSHOT_ROWS > 0) {
    for (const kind of ['initial', 'incremental'] as const) {
      const kurrent = await startKurrentDBProcess(SNAPSHOT_APPEND_MS);
      try {
        snapshots.push(kind === 'initial' ? await initialSnapshotRun(server, kurrent, SNAPSHOT_ROWS, log) : await incrementalSnapshotRun(server, kurrent, SNAPSHOT_ROWS, SNAPSHOT_WRITER, log));
      } catch (error) {
        notes.push(`${kind} snapshot: failed — ${error instanceof Error ? error.message : String(error)}`);
        log(`${kind} snapshot: FAILED ${error instanceof Error ? error.stack : String(error)}`);
      } finally {
        await kurrent.stop();
      }
    }
  }
} finally {
  await server.destroy();
}

// ── report ──
const env = ['EA_BENCH_TRANSACTIONS', 'EA_BENCH_ROUNDS', 'EA_BENCH_RATES', 'EA_BENCH_LATENCY_SECONDS', 'EA_BENCH_SNAPSHOT_ROWS', 'EA_BENCH_SNAPSHOT_APPEND_MS', 'EA_BENCH_SNAPSHOT_WRITER_RATE', 'EA_BENCH_SNAPSHOT_WRITER_SECONDS'];
const command = `${env.filter((name) => process.env[name] !== undefined).map((name) => `${name}=${process.env[name]} `).join('')}npm run bench`;
let cpu = os.cpus()[0]?.model ?? 'unknown CPU';
try {
  cpu = `${execSync('nproc').toString().trim()} × ${cpu}`;
} catch {
  cpu = `${os.cpus().length} × ${cpu}`;
}
const machine = `${cpu}; Node ${process.version}; ${os.platform()}/${os.arch()}; load average at the start ${loadText(loadAtStart)}, at the end ${loadText(os.loadavg())}; a fixed workload took ${paceAtStart} ms of CPU at the start, ${machinePaceMs()} at the end (the machine's pace: lower is faster)`;
const summary = e2eReport({
  transactions: N,
  rounds: ROUNDS,
  pgoutputBytes,
  runs,
  summaries: summarize(runs, N),
  latencies,
  assemblerLagWindow: ASSEMBLER_LAG_WINDOW,
  snapshots,
  snapshotAppendMs: SNAPSHOT_APPEND_MS,
  notes,
});
console.log(`${machine}\n\n${summary}`);
if (process.env.EA_BENCH_WRITE === '0') process.exit(0);

const date = new Date().toISOString().slice(0, 10);
const resultsDir = fileURLToPath(new URL('./results/', import.meta.url));
mkdirSync(resultsDir, { recursive: true });
const file = `${resultsDir}${date}-e2e.md`;
writeFileSync(
  file,
  [
    '# End-to-end throughput and latency',
    '',
    'Command (from the repository root):',
    '',
    '```bash',
    command,
    '```',
    '',
    `Machine: ${machine}. Compare ratios within one run, not absolute figures across runs; record figures from a quiet machine (load below 0.5 at the start).`,
    `Run at ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC.`,
    '',
    summary,
    '',
  ].join('\n'),
);
console.error(`written: bench/results/${date}-e2e.md`);
