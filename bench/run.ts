// End-to-end benchmark: the assembler against a raw replication consumer on the same WAL.
//
//   npm run bench                                  # 50,000 transactions
//   EA_BENCH_TRANSACTIONS=10000 npm run bench      # smaller
//
// 1. An embedded PostgreSQL 17 gets the invoicing schema, 100 customers and a publication; then
//    one logical slot per consumer is created at the same point, and N transactions (one draft
//    invoice + three lines each, 4 rows) are written into the WAL before anything is drained.
// 2. Each consumer drains its own slot, one after the other:
//    - raw: a minimal CopyBoth reader that receives the pgoutput stream and discards it (run first
//      and last, to see the drift of a shared machine);
//    - source only: capture (decode, transaction buffer) + mapping + contract validation, no sink;
//    - assembler with a null sink: `createAssembler(config, { sink: nullSink })`;
//    - assembler with the in-memory KurrentDB (in a process of its own) at 0 ms and 2 ms per append.
//    A consumer is done when its slot is told the last transaction is durable (the assembler's
//    `acknowledgedLsn`), or — raw — when the last commit arrived.
// 3. Commit-to-append latency at steady rates (EA_BENCH_RATES, default "1000,100" transactions/s,
//    each for EA_BENCH_LATENCY_SECONDS, default 20, after 2,000 warm-up transactions): the assembler with the in-memory KurrentDB runs, and
//    a driver process (bench/lib/latency-driver.ts, off the assembler's event loop) writes the
//    invoices at that rate and subscribes to the destination, noting for each event its arrival
//    time minus the commit time in its metadata (same machine, same clock); the assembler's own
//    commit → durable percentiles are reported next to it.
//
// Prints a markdown table and writes bench/results/<date>-e2e.md. EA_BENCH_DEBUG=1 also logs the
// latency runs' slow samples (index in arrival order: ms), to see when a stall happened.
import { execSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres } from '../src/testing/postgres.js';
import { createBenchDatabase, PUBLICATION, writeInvoicesBulk } from './lib/invoicing-db.js';
import { benchAssembler, drainPipeline, nullSink, percentile, type PipelineDrainResult } from './lib/pipeline-run.js';
import { runLatencyDriver } from './lib/latency-driver.js';
import { drainRaw, type RawDrainResult } from './lib/raw-reader.js';
import { startKurrentDBProcess } from './lib/kurrentdb-server.js';
import { drainSourceOnly } from './lib/source-only.js';

const N = Number(process.env.EA_BENCH_TRANSACTIONS ?? 50_000);
const RATES = (process.env.EA_BENCH_RATES ?? '1000,100').split(',').map(Number).filter((r) => r > 0);
const LATENCY_SECONDS = Number(process.env.EA_BENCH_LATENCY_SECONDS ?? 20);
const MARK = Math.max(1, Math.floor(N / 10));
/** Transactions the assembler's own commit → durable percentiles cover (its lag window). */
const ASSEMBLER_LAG_WINDOW = 10_000;

interface Row {
  readonly consumer: string;
  readonly seconds: number;
  readonly target?: string;
  /** Assembler: seconds until it was running (contracts loaded, source checks passed). */
  readonly startupSeconds?: number;
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const log = (line: string) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}`);

const server = await startEmbeddedPostgres();
const rows: Row[] = [];
const latencies: { rate: number; transactions: number; events: number; p50: number; p99: number; max: number; late: number; writeSeconds: number; drainSeconds: number; assemblerP50: number; assemblerP99: number; batching: unknown }[] = [];
let rawA: RawDrainResult | null = null;
const notes: string[] = [];
try {
  const db = await createBenchDatabase(server, 'bench');
  const captureUrl = server.connectionString({ database: db.name });
  const slots = ['raw_a', 'source_only', 'null_sink', 'memory_0ms', 'memory_2ms', 'raw_b'];
  await db.createSlots(slots);
  const t0 = performance.now();
  await writeInvoicesBulk(db, N);
  log(`wrote ${fmt(N)} transactions (${fmt(4 * N)} rows) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  rawA = await drainRaw(db.connection, 'raw_a', PUBLICATION, N, MARK);
  rows.push({ consumer: 'raw pgoutput reader (receive + discard), first', seconds: rawA.seconds });
  log(`raw: ${rawA.seconds.toFixed(2)} s, ${fmt(rawA.bytes)} bytes`);
  const markLsn = rawA.markLsn;
  const lastLsn = rawA.lastEndLsn;

  const src = await drainSourceOnly(db.connection, 'source_only', PUBLICATION, N, MARK);
  rows.push({ consumer: 'source only: decode + buffer + map + validate, no sink', seconds: src.seconds });
  log(`source only: ${src.seconds.toFixed(2)} s`);

  const runPipeline = async (label: string, slot: string, latencyMs: number | null, target: string): Promise<PipelineDrainResult | null> => {
    const kurrent = latencyMs === null ? null : await startKurrentDBProcess(latencyMs);
    try {
      const result = await drainPipeline(
        { captureUrl, slot, publication: PUBLICATION, ...(kurrent ? { destination: kurrent.connectionString } : { sink: nullSink }) },
        markLsn,
        lastLsn,
      );
      rows.push({ consumer: label, seconds: result.seconds, target, startupSeconds: result.runningSeconds });
      log(`${label}: ${result.seconds.toFixed(2)} s (running after ${result.runningSeconds.toFixed(2)} s, first ack ${result.firstAckSeconds.toFixed(2)} s, 10 % at ${result.markSeconds.toFixed(2)} s), ${fmt(result.events)} events, mode ${result.mode}`);
      return result;
    } catch (error) {
      notes.push(`${label}: failed — ${error instanceof Error ? error.message : String(error)}`);
      log(`${label}: FAILED ${error instanceof Error ? error.stack : String(error)}`);
      return null;
    } finally {
      await kurrent?.stop();
    }
  };
  await runPipeline('assembler, null sink', 'null_sink', null, '≥ 0.8');
  await runPipeline('assembler → in-memory KurrentDB, 0 ms per append', 'memory_0ms', 0, '—');
  await runPipeline('assembler → in-memory KurrentDB, 2 ms per append', 'memory_2ms', 2, '≥ 0.5');

  const rawB = await drainRaw(db.connection, 'raw_b', PUBLICATION, N, MARK);
  rows.push({ consumer: 'raw pgoutput reader (receive + discard), last', seconds: rawB.seconds });
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
      // Writer and subscriber run in a process of their own (latency-driver.ts): not on the assembler's event loop.
      const driven = await runLatencyDriver({ connection: db.connection, kurrentdb: kurrent.connectionString, count, rate, prefix: `l${rate}x` });
      // The first two seconds are the paced writer's ramp (new connections; the machine's 2 cores
      // saturate briefly): left out, at most a tenth of the samples.
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
        max: Math.max(...steady),
        late: driven.late,
        writeSeconds: driven.writeSeconds,
        drainSeconds: driven.drainSeconds,
        assemblerP50: own?.p50Ms ?? Number.NaN,
        assemblerP99: own?.p99Ms ?? Number.NaN,
        batching: assembler.status().batching,
      };
      latencies.push(result);
      log(`latency at ${rate}/s: ${JSON.stringify(result)}`);
      await db.dropSlots([slot]).catch(() => undefined);
    } catch (error) {
      notes.push(`latency at ${rate}/s: failed — ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      await assembler.stop();
      await kurrent.stop();
    }
  }
} finally {
  await server.destroy();
}

// ── report ──
const rawRows = rows.filter((r) => r.consumer.startsWith('raw'));
const rawSeconds = rawRows.reduce((a, r) => a + r.seconds, 0) / rawRows.length;
const table = [
  `| consumer | seconds | transactions/s | ratio to raw | target | start-up (s) |`,
  `|---|---:|---:|---:|---|---:|`,
  ...rows.map((r) => `| ${r.consumer} | ${r.seconds.toFixed(2)} | ${fmt(N / r.seconds)} | ${(rawSeconds / r.seconds).toFixed(2)} | ${r.target ?? ''} | ${r.startupSeconds === undefined ? '' : r.startupSeconds.toFixed(2)} |`),
].join('\n');
const latencyTable = latencies.length
  ? [
      `| rate (transactions/s) | transactions | events seen | commit → seen p50 | p99 | max | commit → durable p50 (assembler) | p99 | writer behind schedule (>100 ms) | seconds after the last write until all seen |`,
      `|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|`,
      ...latencies.map(
        (l) =>
          `| ${fmt(l.rate)} for ${l.writeSeconds.toFixed(1)} s | ${fmt(l.transactions)} | ${fmt(l.events)} | ${fmt(l.p50)} ms | ${fmt(l.p99)} ms | ${fmt(l.max)} ms | ${Number.isNaN(l.assemblerP50) ? 'n/a ¹' : `${fmt(l.assemblerP50)} ms`} | ${Number.isNaN(l.assemblerP99) ? 'n/a ¹' : `${fmt(l.assemblerP99)} ms`} | ${l.late} | ${l.drainSeconds.toFixed(1)} |`,
      ),
    ].join('\n')
  : '(latency runs skipped: EA_BENCH_LATENCY_SECONDS=0)';

const command = `${process.env.EA_BENCH_TRANSACTIONS ? `EA_BENCH_TRANSACTIONS=${N} ` : ''}npm run bench`;
let cpu = os.cpus()[0]?.model ?? 'unknown CPU';
try {
  cpu = `${execSync('nproc').toString().trim()} × ${cpu}`;
} catch {
  cpu = `${os.cpus().length} × ${cpu}`;
}
const machine = `${cpu}; Node ${process.version}; ${os.platform()}/${os.arch()}; load average at the end ${os.loadavg().map((l) => l.toFixed(1)).join(' / ')}`;
const summary = [
  `Transactions: ${fmt(N)} (1 draft invoice + 3 lines each; ${rawA ? `${fmt(rawA.bytes)} bytes of pgoutput` : ''}), pre-written into the WAL; raw = mean of the first and last raw run.`,
  '',
  table,
  '',
  'Commit-to-append latency (assembler → in-memory KurrentDB at 0 ms). "Seen": a `$all` subscriber in a separate process (with the paced writer, 8 connections) notes arrival − commit time, first two seconds left out; "durable (assembler)": the pipeline\'s own measure when each append resolves (its last 10,000 transactions):',
  '',
  latencyTable,
  ...(latencies.some((l) => Number.isNaN(l.assemblerP50))
    ? ['', `¹ Fewer paced transactions than the ${fmt(ASSEMBLER_LAG_WINDOW)} the assembler's own percentiles cover: they would include the 2,000 warm-up transactions, written at once and queued.`]
    : []),
  ...(notes.length ? ['', 'Notes:', ...notes.map((n) => `- ${n}`)] : []),
].join('\n');
console.log(summary);

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
    `Machine: ${machine}. Other processes shared the 2 cores during the run: compare ratios within one run, not absolute figures across runs.`,
    `Run at ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC.`,
    '',
    summary,
    '',
  ].join('\n'),
);
console.error(`written: bench/results/${date}-e2e.md`);
