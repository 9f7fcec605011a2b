// `event-assembler reconcile` against a plain COPY of the table and a plain read of the events,
// on the same line in the same run (issue 16):
//
//   npm run bench:reconcile                                          # 1,000,000 invoices, 3 rounds
//   EA_BENCH_RECONCILE_INVOICES=50000 EA_BENCH_RECONCILE_ROUNDS=1 npm run bench:reconcile   # a quick run
//
// 1. An embedded PostgreSQL 17 gets the invoicing schema and EA_BENCH_RECONCILE_INVOICES (default
//    1,000,000) invoices over a tenth as many customers, filled with generate_series; the
//    invoicing assembler (production build, in this process) takes its initial snapshot into the
//    in-memory KurrentDB (a process of its own), so each invoice stream holds the assembler's own
//    InvoiceImported, and keeps running: reconcile waits for its checkpoint to pass each cut
//    (bench/lib/reconcile-line.ts). EA_BENCH_RECONCILE_SNAPSHOT='{"chunkSize":8192}' changes the
//    snapshot's settings.
// 2. Once the 1-minute load is below EA_BENCH_MAX_LOAD (0.5; waiting at most EA_BENCH_QUIET_WAIT_S,
//    1,200 s, over the whole run, then recording anyway), after an unrecorded warm-up of the two
//    plain reads, EA_BENCH_RECONCILE_ROUNDS (3) rounds, each after waiting for quiet again, the
//    order reversed in even rounds: a plain COPY of the columns reconcile reads, a plain read of
//    the events it reads (bench/lib/reconcile-runs.ts), `reconcile --tables public.invoice`
//    (CLI, child process, production build) with the default range size, with
//    --range-size EA_BENCH_RECONCILE_SMALL_RANGE (10,000), and with --sample
//    EA_BENCH_RECONCILE_SAMPLE (1,000; 0 leaves it out). Every run is checked: the row and event
//    counts, and each report agrees on every invoice.
// 3. One more reconcile, in this process (from the build), timing its phases by its progress
//    callback: where the time goes.
//
// Prints a markdown report and writes bench/results/<date>-reconcile.md.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../src/testing/postgres.js';
import { PUBLICATION } from './lib/invoicing-db.js';
import { startKurrentDBProcess } from './lib/kurrentdb-server.js';
import { measurePhases, type Phases } from './lib/reconcile-phases.js';
import { writeReport, type Measured } from './lib/reconcile-report.js';
import { ASSEMBLER_NAME, startReconcileLine, writeReconcileConfig, type ReconcileLine } from './lib/reconcile-line.js';
import { plainCopy, plainRead, runReconcileCli } from './lib/reconcile-runs.js';

const INVOICES = Number(process.env.EA_BENCH_RECONCILE_INVOICES ?? 1_000_000);
const ROUNDS = Number(process.env.EA_BENCH_RECONCILE_ROUNDS ?? 3);
const SMALL_RANGE = Number(process.env.EA_BENCH_RECONCILE_SMALL_RANGE ?? 10_000);
const SAMPLE = Number(process.env.EA_BENCH_RECONCILE_SAMPLE ?? 1_000);
const MAX_LOAD = Number(process.env.EA_BENCH_MAX_LOAD ?? 0.5);
let quietBudgetMs = Number(process.env.EA_BENCH_QUIET_WAIT_S ?? 1_200) * 1000;

const log = (line: string) => console.error(`[bench:reconcile ${new Date().toISOString().slice(11, 19)}] ${line}`);
const load = () => os.loadavg().map((l) => l.toFixed(2)).join(' / ');

/** Waits until the 1-minute load is below MAX_LOAD, out of the run's budget; says how it went. */
async function waitForQuiet(what: string): Promise<{ quiet: boolean; waitedSeconds: number; load: string }> {
  const started = Date.now();
  while (os.loadavg()[0]! >= MAX_LOAD && Date.now() - started < quietBudgetMs) await new Promise((resolve) => setTimeout(resolve, 10_000));
  quietBudgetMs = Math.max(0, quietBudgetMs - (Date.now() - started));
  const quiet = os.loadavg()[0]! < MAX_LOAD;
  const waitedSeconds = Math.round((Date.now() - started) / 1000);
  log(`${what}: load ${load()} after ${waitedSeconds} s${quiet ? '' : ` — not below ${MAX_LOAD}, measuring anyway`}`);
  return { quiet, waitedSeconds, load: load() };
}

type Kind = Measured['kind'];

async function measure(kind: Kind, round: number, line: ReconcileLine, configFile: string, env: Record<string, string>, kurrentdb: string): Promise<Measured> {
  const loadAtStart = load();
  log(`round ${round}, ${kind}: start, load ${loadAtStart}`);
  let measured: Measured;
  if (kind === 'copy') {
    const run = await plainCopy(line.captureUrl);
    if (run.count !== INVOICES) throw new Error(`COPY gave ${run.count} rows, expected ${INVOICES}`);
    measured = { kind, round, loadAtStart, seconds: run.seconds, count: run.count, reconcile: null };
  } else if (kind === 'read') {
    const run = await plainRead(kurrentdb);
    if (run.count !== INVOICES) throw new Error(`the read gave ${run.count} events, expected ${INVOICES} (one InvoiceImported per invoice)`);
    measured = { kind, round, loadAtStart, seconds: run.seconds, count: run.count, reconcile: null };
  } else {
    const args = ['--tables', 'public.invoice', ...(kind === 'reconcile-small' ? ['--range-size', String(SMALL_RANGE)] : []), ...(kind === 'sample' ? ['--sample', String(SAMPLE)] : [])];
    const run = await runReconcileCli(configFile, args, env);
    const summary = run.report.summaries[0];
    const rows = kind === 'sample' ? summary?.rows ?? 0 : INVOICES;
    if (run.exitCode !== 0 || !run.report.ok || summary?.rows !== rows || summary.agreeing !== rows || (kind === 'sample' && rows === 0)) {
      throw new Error(`reconcile ${args.join(' ')}: exit ${run.exitCode}, ok ${run.report.ok}, summary ${JSON.stringify(summary)} (expected ${kind === 'sample' ? 'some' : INVOICES} rows, all agreeing)`);
    }
    measured = { kind, round, loadAtStart, seconds: run.seconds, count: summary.rows, reconcile: run };
  }
  line.check();
  const extra = measured.reconcile ? ` (report ${measured.reconcile.reportSeconds.toFixed(2)} s, waited ${measured.reconcile.waitedSeconds.toFixed(2)} s for the checkpoint, peak RSS ${measured.reconcile.peakRssMiB} MiB, ${measured.reconcile.report.ranges.total} ranges)` : '';
  log(`round ${round}, ${kind}: ${measured.seconds.toFixed(2)} s, ${measured.count.toLocaleString('en-US')}${extra}`);
  return measured;
}

// Before anything of the bench starts: figures are for a quiet machine (load below 0.5).
const loadBeforeStart = load();
log(`load before start ${loadBeforeStart}; ${INVOICES.toLocaleString('en-US')} invoices, ${ROUNDS} round(s)`);
const server = await startEmbeddedPostgres();
const kurrent = await startKurrentDBProcess(0);
const dir = mkdtempSync(path.join(os.tmpdir(), 'ea-bench-reconcile-'));
const runs: Measured[] = [];
const quietChecks: { what: string; quiet: boolean; waitedSeconds: number; load: string }[] = [];
let line: ReconcileLine | null = null;
let phases: Phases | null = null;
try {
  line = await startReconcileLine(server, kurrent.connectionString, INVOICES, log);
  const configFile = writeReconcileConfig(dir);
  const env = { EA_BENCH_CAPTURE_URL: line.captureUrl, EA_BENCH_KURRENTDB_URL: kurrent.connectionString };
  // Warm-up, not recorded: the first COPY and read in this process pay for the JIT of pg and the client.
  for (const run of [plainCopy(line.captureUrl), plainRead(kurrent.connectionString)]) log(`warm-up: ${(await run).seconds.toFixed(2)} s (not recorded)`);
  const kinds: Kind[] = ['copy', 'read', 'reconcile', 'reconcile-small', ...(SAMPLE > 0 ? (['sample'] as const) : [])];
  for (let round = 1; round <= ROUNDS; round++) {
    quietChecks.push({ what: `round ${round}`, ...(await waitForQuiet(`round ${round}`)) });
    for (const kind of round % 2 === 1 ? kinds : [...kinds].reverse()) runs.push(await measure(kind, round, line, configFile, env, kurrent.connectionString));
  }
  quietChecks.push({ what: 'phases', ...(await waitForQuiet('phases')) });
  phases = await measurePhases({ assembler: ASSEMBLER_NAME, captureUrl: line.captureUrl, publication: PUBLICATION, kurrentdb: kurrent.connectionString });
  log(`phases: ${phases.lines.join('; ')}`);
} finally {
  await line?.close();
  await kurrent.stop();
  await server.destroy();
  rmSync(dir, { recursive: true, force: true });
}

writeReport({ invoices: INVOICES, customers: line!.customers, rounds: ROUNDS, smallRange: SMALL_RANGE, sample: SAMPLE, maxLoad: MAX_LOAD, loadBeforeStart, loadAtEnd: load(), quietChecks, line: line!, runs, phases }, log);
