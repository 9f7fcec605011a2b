// The chaos run (issue 17): one scripted run of everything that goes wrong at once, scaled by
// CHAOS_SCALE and driven by a seeded schedule (CHAOS_SEED repeats it). Run by
// test/resilience/chaos.test.ts (`npm test`, scale 1) and by `npm run chaos` (default scale 10):
// the same code.
// CHAOS_KEEP_LOG=<file> keeps a copy of the assembler's log (the run's temp dir is removed).
//
// 1. Source: a PostgreSQL of its own, the invoicing schema, 2,000 × scale customers seeded with
//    ≈ 3,000 × scale invoices (lines, payments): the large table the initial snapshot reads (in
//    chunks of 1/25 of it). A reference slot with its own exported snapshot gives the expected
//    history: its snapshot mapped (InvoiceImported) and its stream mapped (everything after).
// 2. The assembler (`event-assembler run`, a child process) starts with `snapshot.mode: initial`.
//    While the invoice table is being read (aimed by the snapshot's progress record, appends held
//    25 ms so a chunk cannot slip past), in the seed's order: a SIGKILL (the next start must
//    resume the same generation) and a PostgreSQL restart, fast or immediate, with the assembler
//    left running (it must notice — its stream reconnects, or the attempt starts over in-process —
//    and resume the snapshot).
// 3. The seeded schedule (chaos-schedule.ts) then runs: per round two more SIGKILLs, a fast and an
//    immediate PostgreSQL restart (the assembler left running: it reconnects), a KurrentDB outage
//    ending in a restart that empties its weak-idempotency cache, a period of slow appends — while
//    the writer (test/support/chaos-writer.ts) writes customers, invoices, lines and payments on
//    several connections (inserts, updates, deletes, two-table transactions, bulk statements),
//    retrying across the restarts and recording only what committed.
//    The writer starts once the assembler's slot exists (its first progress record) and writes
//    every table from then on — through the snapshot, the SIGKILL and the PostgreSQL restart that
//    interrupt it: the plan issues, pays and voids seeded invoices the snapshot has not read yet.
//    That is exact because of "Entity streams begin at their beginning" (docs/snapshots.md): the
//    resumed snapshot takes a not-yet-read invoice's record from the before-image of its first
//    change (REPLICA IDENTITY FULL), i.e. the row at the consistent point, and never reads it
//    again; so the destination equals an uninterrupted snapshot at the consistent point followed
//    by the stream — the reference's history, as nothing commits between the reference slot's
//    creation and the assembler's.
// 4. End: the writer stops; one last transaction marks the source's final position; the run waits
//    (with a deadline) until that commit is in KurrentDB and the slot has confirmed it, stops the
//    assembler with SIGTERM (exit 0), and compares: every expected event exactly once (by event
//    id), nothing extra, per-stream order as the source history has it, the same data, the
//    snapshot's rows imported exactly once; the writer's own history (transactions, events per
//    type) must agree with the reference; and the contract on the invoice streams
//    (chaos-beginnings.ts): every seeded invoice's stream begins with its one InvoiceImported, no
//    InvoiceImported follows another event. Then both checks are shown to fail on doctored copies
//    of the destination (one event removed, one duplicated, two swapped; an import moved behind a
//    change).
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { mappers } from '../../examples/invoicing/index.js';
import { createPrng } from '../../examples/invoicing/workload.js';
import { receiptFromMetadata } from '../../src/sink/receipt.js';
import { formatLsn, parseLsn } from '../../src/source/position.js';
import { compareEvents, expectedFromReference, formatDestinationReport, readDestination, type DestinationEvent, type DestinationReport } from '../../src/testing/verify-destination.js';
import { createChaosWriter, type ChaosWriter, type WriterHistory } from '../support/chaos-writer.js';
import { tailOf, waitFor } from './assembler-process.js';
import { checkStreamBeginnings, formatStreamBeginnings, SNAPSHOT_EVENT, type ImportOrigins, importOrigins, type StreamBeginnings } from './chaos-beginnings.js';
import { ASSEMBLER, GENERATION, PROGRESS_STREAM, PUBLICATION, REFERENCE, startChaosRig, TABLES, type ChaosRig } from './chaos-rig.js';
import { emptyTally, killAssembler, perform, planSchedule, restartPostgres, snapshotFinished, type ChaosTally } from './chaos-schedule.js';

export interface ChaosOptions {
  /** 1: the `npm test` run; 10: the large run. */
  readonly scale: number;
  readonly seed: number;
  readonly log?: (line: string) => void;
}

export interface ChaosResult {
  readonly seed: number;
  readonly scale: number;
  readonly durationMs: number;
  readonly seeded: { customers: number; invoices: number; lines: number; payments: number };
  readonly history: WriterHistory;
  readonly tally: ChaosTally;
  readonly report: DestinationReport;
  /** "Entity streams begin at their beginning" on the invoice streams. */
  readonly beginnings: StreamBeginnings;
  /** The checks run on doctored copies of the destination: what they reported for each. */
  readonly selfCheck: { readonly removed: DestinationReport; readonly duplicated: DestinationReport; readonly swapped: DestinationReport; readonly importMoved: StreamBeginnings };
  /** Where each seeded invoice's InvoiceImported came from (its receipt position). */
  readonly origins: ImportOrigins;
  /** Whether the mid-snapshot SIGKILL found the invoice table unfinished (then the resumed snapshot read the rest of it). */
  readonly killedWhileReadingInvoices: boolean;
  /** Logged by the assembler: replication stream reconnects, and run attempts started over after a lost PostgreSQL connection. */
  readonly reconnects: { readonly stream: number; readonly attempts: number };
  readonly summary: string;
}

/** Per-append latency while the mid-snapshot kill is aimed. */
const AIM_LATENCY_MS = 25;
const PLAN_RATE = 100;
const SIDE_RATE = 10;
const FINAL_CUSTOMER = 'chaos_final';

const decoder = new TextDecoder();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  const { scale, seed } = options;
  const started = Date.now();
  const random = createPrng(seed);
  const schedule = planSchedule(scale, random);
  const snapshotFaults = random() < 0.5 ? (['kill', random() < 0.5 ? 'pg-fast' : 'pg-immediate'] as const) : ([random() < 0.5 ? 'pg-fast' : 'pg-immediate', 'kill'] as const);
  const aimFractions = [0.1 + random() * 0.3, 0.5 + random() * 0.4];
  log(`chaos run: seed ${seed} (CHAOS_SEED=${seed} repeats it), scale ${scale} (CHAOS_SCALE), mid-snapshot ${snapshotFaults.join(' and ')}, then ${schedule.length} scheduled faults: ${schedule.map((a) => a.kind).join(', ')}`);

  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'event-assembler-chaos-'));
  let writer: ChaosWriter | null = null;
  let seeded = { customers: 0, invoices: 0, lines: 0, payments: 0 };
  let rig: (ChaosRig & { expectedBefore: Awaited<ReturnType<typeof startChaosRig>>['expectedBefore'] }) | null = null;
  const tally = emptyTally();
  let killedWhileReadingInvoices = false;
  try {
    rig = await startChaosRig(
      dir,
      (invoices) => Math.max(50, Math.floor(invoices / 25)),
      async (admin) => {
        writer = createChaosWriter({ connection: admin, seed, rate: PLAN_RATE, sideRate: SIDE_RATE });
        seeded = await writer.seed(2_000 * scale);
        return seeded.invoices;
      },
    );
    const r = rig;
    const w = writer!;
    log(`chaos run: seeded ${seeded.customers} customers, ${seeded.invoices} invoices, ${seeded.lines} lines, ${seeded.payments} payments (${((Date.now() - started) / 1000).toFixed(1)} s)`);

    // ── the initial snapshot, killed while it reads the invoices ──
    r.kurrent.setAppendLatency(AIM_LATENCY_MS);
    const first = await r.startAssembler();
    if (first.action !== 'initial-snapshot' || first.generation !== GENERATION) throw new Error(`the first start must take the initial snapshot: ${JSON.stringify(first)}`);
    // The slot exists once the first progress record is there: only now may anything commit (the
    // reference's snapshot and the assembler's consistent point see the same rows).
    await waitFor('the initial snapshot to record its start', async () => (await r.alive(), r.snapshotProgress() ?? false), { timeoutMs: 120_000 });
    w.start(); // every table, invoices too, from here to the end
    // Two faults while the snapshot reads the invoices, in the seed's order: a SIGKILL, and a
    // PostgreSQL restart (fast or immediate) with the assembler left running; both must resume it.
    for (const [i, fault] of snapshotFaults.entries()) {
      const target = Math.max(1, Math.floor(seeded.invoices * aimFractions[i]!));
      await waitFor(
        `the snapshot to read ${target} invoices`,
        async () => {
          await r.alive();
          const invoice = r.snapshotProgress()?.tables.find((t) => t.table === 'public.invoice');
          return invoice?.status === 'done' || (invoice?.status === 'running' && invoice.rowsDone >= target);
        },
        { timeoutMs: 300_000, intervalMs: 5 },
      );
      if (fault === 'kill') {
        // Judged by what was durable once the kill's appends in flight had landed, not by the saved
        // progress: chunks run ahead of it, so 'running' may already hold every invoice's record.
        const readingInvoices = r.snapshotProgress()?.tables.find((t) => t.table === 'public.invoice')?.status === 'running';
        const killed = await killAssembler(r, tally, () => w.seededInvoiceIds().filter((id) => r.kurrent.readStreamEvents(`invoice-${id}`).length > 0).length);
        if (!killed.midSnapshot) throw new Error(`the kill missed the snapshot: ${tally.lines.join('\n')}`);
        killedWhileReadingInvoices = readingInvoices && killed.seenAtKill! < seeded.invoices;
        log(`chaos run: invoice streams durable at the kill: ${killed.seenAtKill} of ${seeded.invoices}`);
      } else {
        await restartPostgres(r, fault, tally);
        if (tally.pgMidSnapshot === 0) throw new Error(`the PostgreSQL restart missed the snapshot: ${tally.lines.join('\n')}`);
      }
      log(`chaos run: ${tally.lines[tally.lines.length - 1]}`);
    }
    r.kurrent.setAppendLatency(0);

    // ── the schedule, beside the writer ──
    const chaos = (async () => {
      for (const action of schedule) {
        await sleep(action.delayMs);
        await perform(r, action, tally);
        log(`chaos run: ${tally.lines[tally.lines.length - 1]}`);
      }
    })();
    chaos.catch(() => undefined); // awaited below
    let snapshotMs = 0;
    let ended = false;
    // (Between a kill and the next start no process runs: the wait does not ask `alive()`; the schedule does.)
    const snapshotDone = waitFor(
      'the snapshot to finish',
      () => {
        if (ended) throw new Error('the schedule ended first');
        return snapshotFinished(r.snapshotProgress());
      },
      { timeoutMs: 600_000, intervalMs: 50 },
    ).then(() => {
      snapshotMs = Date.now() - started;
      log(`chaos run: snapshot finished after ${(snapshotMs / 1000).toFixed(1)} s`);
    });
    snapshotDone.catch(() => undefined);
    try {
      await chaos;
      await snapshotDone;
    } finally {
      ended = true;
    }
    await sleep(2_000); // the last fault's recovery overlaps some writing at any scale
    const history = await w.stop();

    // ── the end: the source's final position reached, a graceful stop, the comparison ──
    const caughtUp = await catchUp(r, history);
    const exit = await r.assembler!.kill('SIGTERM');
    if (exit.code !== 0) throw new Error(`the assembler did not stop cleanly on SIGTERM (code ${exit.code}, signal ${exit.signal})\n${await tailOf(r.logFile)}`);
    const logText = await fs.readFile(r.logFile, 'utf8');
    const count = (msg: string) => logText.split('\n').filter((line) => line.includes(`"msg":"${msg}`)).length;
    const reconnects = { stream: count('source: connection lost, reconnecting'), attempts: count('PostgreSQL connection lost outside the replication stream') };
    const consistentPoint = r.snapshotProgress()?.consistentPoint;
    if (!consistentPoint) throw new Error('the snapshot progress record names no consistent point');
    const origins = importOrigins((stream) => r.kurrent.readStreamEvents(stream), w.seededInvoiceIds(), parseLsn(consistentPoint));
    const { report, beginnings, selfCheck } = await compare(r, w.seededInvoiceIds());
    const durationMs = Date.now() - started;
    const events = report.expectedEvents;
    const summary =
      `chaos run: seed ${seed}, scale ${scale}: ${history.transactions + 1} transactions, ${events} events (${report.byType['InvoiceImported']?.expected ?? 0} imported by the snapshot), ` +
      `kills ${tally.kills} (${tally.midSnapshotKills} mid-snapshot), PostgreSQL restarts ${tally.pgFast} fast / ${tally.pgImmediate} immediate (${tally.pgMidSnapshot} mid-snapshot, the assembler left running), ` +
      `destination outages ${tally.outages} (each ending in a restart), slow-append periods ${tally.slowPeriods}; ` +
      `the assembler reconnected its stream ${reconnects.stream} times and started over in-process ${reconnects.attempts} times; ` +
      `writer retries ${history.stats.retries} (commits in doubt: ${history.stats.unknownCommitted} committed, ${history.stats.unknownAborted} not), ` +
      `duration ${(durationMs / 1000).toFixed(1)} s (snapshot done at ${(snapshotMs / 1000).toFixed(1)} s, caught up in ${(caughtUp / 1000).toFixed(1)} s) — ${report.ok ? 'destination OK' : 'destination DIFFERS'}; ` +
      `invoice streams: ${beginnings.beginWithImport} of ${beginnings.seeded} seeded begin with their one ${SNAPSHOT_EVENT} (${beginnings.changedAfterImport} changed after it), ${beginnings.importAfterOther.length} with one after another event` +
      ` — imported by the exported snapshot ${origins.exportedSnapshot}, by resumed chunks ${origins.resumedChunk}, from first changes' before-images ${origins.beforeImage}`;
    log(formatDestinationReport(report, { maxListed: 10 }));
    log(formatStreamBeginnings(beginnings));
    log(summary);
    const problems = checkAgainstHistory(report, history, seeded.invoices, r.expectedBefore.length);
    if (!report.ok || !beginnings.ok || problems.length > 0) {
      throw new Error(
        `chaos run (seed ${seed}, scale ${scale}) failed:\n${formatDestinationReport(report, { maxListed: 10 })}\n${formatStreamBeginnings(beginnings)}\n${problems.join('\n')}\nfaults:\n  ${tally.lines.join('\n  ')}\n${summary}`,
      );
    }
    return { seed, scale, durationMs, seeded, history, tally, report, beginnings, selfCheck, origins, killedWhileReadingInvoices, reconnects, summary };
  } catch (error) {
    if (error instanceof Error && rig) error.message += `\nfaults so far:\n  ${tally.lines.join('\n  ')}\n--- assembler log (tail) ---\n${await tailOf(rig.logFile, 4_000)}`;
    throw error;
  } finally {
    await (writer as ChaosWriter | null)?.stop().catch(() => undefined);
    await rig?.close().catch((error: unknown) => log(`chaos run: cleanup failed: ${String(error)}`));
    if (process.env['CHAOS_KEEP_LOG']) await fs.copyFile(rig?.logFile ?? path.join(dir, 'assembler.log'), process.env['CHAOS_KEEP_LOG']).catch(() => undefined);
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/**
 * Commits the last transaction (a customer registered) and waits until its event is in KurrentDB
 * and the slot confirms its commit: the assembler has caught up to the source's final position.
 * Returns how long that took.
 */
async function catchUp(r: ChaosRig, history: WriterHistory): Promise<number> {
  const from = Date.now();
  await r.query(`INSERT INTO customer (id, name, email, card_number, country) VALUES ($1, 'Final', 'final@example.com', NULL, 'SE')`, [FINAL_CUSTOMER]);
  const commitLsn = await waitFor(
    `the final transaction in KurrentDB (after ${history.transactions} transactions)`,
    async () => {
      await r.alive();
      const [event] = r.kurrent.readStreamEvents(`customer-${FINAL_CUSTOMER}`);
      if (!event) return false;
      const receipt = receiptFromMetadata(JSON.parse(decoder.decode(event.metadata)));
      if (receipt?.kind !== 'transaction') throw new Error(`customer-${FINAL_CUSTOMER}: its event carries no transaction receipt`);
      return parseLsn(receipt.commitLsn);
    },
    { timeoutMs: 300_000, intervalMs: 50 },
  );
  await waitFor(`the slot to confirm the final commit ${formatLsn(commitLsn)}`, async () => (await r.alive(), (await r.confirmedFlush()) > commitLsn), { timeoutMs: 120_000, intervalMs: 50 });
  return Date.now() - from;
}

/** The destination against the reference and the stream-beginning contract, and the same checks on doctored copies (they must see each change). */
async function compare(r: ChaosRig & { expectedBefore: Parameters<typeof expectedFromReference>[0]['expectedBefore'] }, seededInvoiceIds: readonly string[]): Promise<Pick<ChaosResult, 'report' | 'beginnings' | 'selfCheck'>> {
  const ignore = (stream: string) => stream.startsWith('$') || stream === `event-assembler.checkpoint-${ASSEMBLER}` || stream === PROGRESS_STREAM || stream === `event-assembler.streams-${ASSEMBLER}`;
  const { events, transactions } = await expectedFromReference({
    source: { connection: r.adminUrl, slot: REFERENCE, publication: PUBLICATION, tables: TABLES.map((table) => ({ table, needsOldValues: table === 'public.invoice' })) },
    destination: { connectionString: r.kurrent.connectionString },
    mappers,
    assembler: ASSEMBLER,
    expectedBefore: r.expectedBefore,
    timeoutMs: 600_000,
  });
  const expected = events.filter((e) => !ignore(e.stream));
  const actual = await readDestination(r.kurrent.connectionString, ignore);
  const report = compareEvents(expected, actual, transactions);
  // Doctored copies: the first event of the longest stream removed; one duplicated; two swapped.
  const byStream = new Map<string, DestinationEvent[]>();
  for (const e of actual) byStream.set(e.stream, [...(byStream.get(e.stream) ?? []), e]);
  const longest = [...byStream.values()].sort((a, b) => b.length - a.length)[0] ?? [];
  const [a, b] = longest;
  const removed = compareEvents(expected, actual.filter((e) => e !== a), transactions);
  const duplicated = compareEvents(expected, [...actual, ...(a ? [a] : [])], transactions);
  const swapped = compareEvents(expected, actual.map((e) => (e === a ? b! : e === b ? a! : e)), transactions);
  // A seeded invoice's stream with its InvoiceImported moved behind the change that follows it.
  const changed = seededInvoiceIds.map((id) => byStream.get(`invoice-${id}`) ?? []).find((events) => events.length > 1) ?? [];
  const [imported, change] = changed;
  const importMoved = checkStreamBeginnings(actual.map((e) => (e === imported ? change! : e === change ? imported! : e)), seededInvoiceIds);
  return { report, beginnings: checkStreamBeginnings(actual, seededInvoiceIds), selfCheck: { removed, duplicated, swapped, importMoved } };
}

/** What the writer recorded as committed must be what the reference read, type by type. */
function checkAgainstHistory(report: DestinationReport, history: WriterHistory, seededInvoices: number, expectedBefore: number): string[] {
  const problems: string[] = [];
  const transactions = history.transactions + 1; // + the final transaction
  if (report.referenceTransactions !== transactions) problems.push(`the reference read ${report.referenceTransactions} source transactions; the writer recorded ${transactions} as committed`);
  const implied: Record<string, number> = { ...history.events, InvoiceImported: seededInvoices };
  implied['CustomerRegistered'] = (implied['CustomerRegistered'] ?? 0) + 1;
  for (const type of new Set([...Object.keys(implied), ...Object.keys(report.byType)])) {
    const expected = report.byType[type]?.expected ?? 0;
    if (expected !== (implied[type] ?? 0)) problems.push(`${type}: the reference expects ${expected}, the writer's history implies ${implied[type] ?? 0}`);
  }
  if (expectedBefore !== seededInvoices) problems.push(`the snapshot should import ${seededInvoices} invoices; the reference snapshot mapped ${expectedBefore}`);
  return problems;
}
