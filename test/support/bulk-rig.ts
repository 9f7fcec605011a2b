// The bulk-transaction rig: a database with the orders table (test/support/orders), a
// least-privilege capture role, publication and slot, an in-memory KurrentDB in this process,
// and the assembler as a child process (`event-assembler run`, as a user runs it) that can be
// killed and restarted. Bulk statements run as one transaction each; the destination is checked
// against what they must have produced, stream by stream and transaction by transaction.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { setupCapture } from '../../src/source/setup.js';
import { checkpointStreamName } from '../../src/sink/index.js';
import { receiptFromMetadata } from '../../src/sink/receipt.js';
import { compareLsn } from '../../src/source/position.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB, type InMemoryKurrentDBOptions } from '../../src/testing/kurrentdb/index.js';
import { createTestDatabase, type PostgresServerInfo, type TestDatabase } from '../../src/testing/postgres.js';
import { REPO_ROOT, startAssemblerProcess, tailOf, waitFor, type AssemblerProcess } from '../resilience/assembler-process.js';
import { ORDERS_SCHEMA } from './orders/mapper.js';

/** Log lines a failed check prints (see `diagnosis`), the last MILESTONE_LINES of them, each cut at MILESTONE_CHARS. */
const MILESTONE = /"msg":"(assembler started|assembler stopped|assembler stopped after a fatal error|large unit[^"]*|sink: [^"]*)"|"level":"(warn|error)"/;
const MILESTONE_LINES = 60;
const MILESTONE_CHARS = 2_000;

export interface BulkAssembler extends AssemblerProcess {
  /** Peak resident set size of the process so far, MiB (VmHWM; read while it runs). */
  peakRssMiB(): Promise<number>;
}

export interface BulkRigOptions {
  /** Options of the in-memory KurrentDB started in this process. */
  readonly kurrent?: InMemoryKurrentDBOptions;
  /** A KurrentDB elsewhere (e.g. the in-memory server in a process of its own): then none starts here, and `records`/`check` are not served. */
  readonly destination?: string;
  /** What runs the assembler before `run --config …` (default: the tests' CLI, see `startAssemblerProcess`). */
  readonly command?: readonly string[];
}

export interface BulkRig {
  readonly db: TestDatabase;
  /** The in-memory KurrentDB in this process (`null` with `destination`). */
  readonly kdb: InMemoryKurrentDB | null;
  readonly logFile: string;
  /** The replication slot the assembler streams from. */
  readonly slot: string;
  /** Starts the assembler (a new process: nothing cached), with `limits` overrides. */
  start(limits?: Record<string, number>): BulkAssembler;
  /** Runs `sql` as one transaction; resolves with the WAL position right after its commit. */
  bulk(sql: string): Promise<string>;
  /** Waits until the slot confirmed `lsn`: everything committed before it is durable in KurrentDB. */
  acknowledged(lsn: string, process: AssemblerProcess, timeoutMs?: number): Promise<void>;
  /** The slot's confirmed_flush_lsn now (`null`: none). */
  confirmed(): Promise<string | null>;
  /** The last position in the assembler's checkpoint stream (`null`: none): a restart streams from it when the slot lags. */
  recorded(): string | null;
  /**
   * The log's milestones across every process the rig ran (starts with their positions, stops
   * with their counts, large units, warnings and errors): what a failed check prints, since the
   * rig's directory goes with it.
   */
  diagnosis(): Promise<string>;
  /** Records in KurrentDB (all streams): a cheap progress measure. */
  records(): number;
  /** Reads every order stream and checks it against `history` (see {@link checkOrders}). */
  check(history: readonly BulkStep[]): OrdersReport;
  close(): Promise<void>;
}

/** One bulk statement over orders `from`…`to`: the event each of them must get. */
export interface BulkStep {
  readonly type: 'OrderPlaced' | 'OrderStatusChanged' | 'OrderRemoved';
  readonly from: number;
  readonly to: number;
  /** The status the event carries (`OrderPlaced`, `OrderStatusChanged`). */
  readonly status?: string;
}

export interface OrdersReport {
  readonly streams: number;
  readonly events: number;
  /** Streams whose events differ from the history (first few, described). */
  readonly wrongStreams: readonly string[];
  readonly wrongStreamCount: number;
  /** Event ids present more than once. */
  readonly duplicateIds: number;
  /** Per bulk transaction (source.commitLsn/xid): events, and whether transaction.index covers 0…count-1 exactly once. */
  readonly transactions: readonly { readonly transaction: string; readonly events: number; readonly count: number; readonly indexesExact: boolean; readonly unitScoped: number }[];
}

/** The assembler's name in the rig's config (its state stream, its checkpoint stream). */
export const BULK_ASSEMBLER = 'bulk';

export async function createBulkRig(server: PostgresServerInfo, name: string, options: BulkRigOptions = {}): Promise<BulkRig> {
  const db = await createTestDatabase(server, `bk_${name}`);
  const role = `cap_${db.database}`.slice(0, 63);
  const slot = `bulk_${db.database.slice(-12)}`;
  const publication = `bulk_pub`;
  await db.query(ORDERS_SCHEMA);
  await db.query(`CREATE ROLE ${role} LOGIN REPLICATION PASSWORD '${server.password}'`);
  await db.query(`GRANT SELECT ON public.orders TO ${role}`);
  await setupCapture({ connection: db.connectionConfig(), publication, slot, tables: ['public.orders'] });
  const kdb = options.destination ? null : await startInMemoryKurrentDB(options.kurrent ?? {});
  const destination = options.destination ?? kdb!.connectionString;
  const local = (): InMemoryKurrentDB => {
    if (!kdb) throw new Error('the bulk rig reads the destination only when it runs the in-memory KurrentDB itself');
    return kdb;
  };
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ea-bulk-'));
  const logFile = path.join(dir, 'assembler.log');
  const captureUrl = `postgresql://${encodeURIComponent(role)}:${encodeURIComponent(server.password)}@${server.host}:${server.port}/${db.database}`;
  const src = (file: string): string => pathToFileURL(path.join(REPO_ROOT, file)).href;
  writeFileSync(path.join(dir, 'package.json'), '{ "type": "module" }\n');
  let configs = 0;
  const processes: AssemblerProcess[] = [];

  function writeConfig(limits: Record<string, number>): string {
    const file = path.join(dir, `bulk-${++configs}.config.ts`);
    writeFileSync(
      file,
      `import { defineConfig } from '${src('src/config/index.ts')}';
import { orders, ORDERS_CONTRACTS } from '${src('test/support/orders/mapper.ts')}';
export default defineConfig({
  name: '${BULK_ASSEMBLER}',
  // Spill files in the rig's directory: a process killed with SIGKILL cannot remove its own.
  source: { connection: process.env.BULK_CAPTURE_URL, slot: '${slot}', publication: '${publication}', statusIntervalMs: 500, spillDir: ${JSON.stringify(dir)} },
  destination: { connectionString: process.env.BULK_KURRENTDB_URL, retry: { initialDelayMs: 50, maxDelayMs: 500 } },
  mappers: [orders],
  contracts: { dir: ORDERS_CONTRACTS },
  limits: ${JSON.stringify(limits)},
});
`,
    );
    return file;
  }

  const rig: BulkRig = {
    db,
    kdb,
    logFile,
    slot,
    start(limits = {}) {
      const child = startAssemblerProcess(writeConfig(limits), logFile, { BULK_CAPTURE_URL: captureUrl, BULK_KURRENTDB_URL: destination }, options.command);
      processes.push(child);
      return Object.assign(child, {
        async peakRssMiB() {
          const status = await readFile(`/proc/${child.pid}/status`, 'utf8');
          const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN);
          return Math.round(kb / 1024);
        },
      });
    },
    async bulk(sql) {
      const client = new pg.Client(db.connectionConfig());
      await client.connect();
      try {
        await client.query(sql);
        const { rows } = await client.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
        return rows[0]!.lsn;
      } finally {
        await client.end();
      }
    },
    // A deadline, not a duration: a replay of 150,000 first touches after a kill takes 35–60 s on a
    // quiet 2-core machine, but over 240 s once that machine runs five other test processes.
    async acknowledged(lsn, child, timeoutMs = 480_000) {
      await waitFor(
        `slot ${slot} to confirm ${lsn}`,
        async () => {
          if (!child.running) throw new Error(`the assembler exited before acknowledging ${lsn}:\n${await tailOf(logFile)}`);
          const confirmed = await rig.confirmed();
          return confirmed ? compareLsn(confirmed, lsn) >= 0 : false;
        },
        { timeoutMs, intervalMs: 100 },
      ).catch(async (error: unknown) => {
        throw new Error(`${(error as Error).message}\n--- assembler log tail ---\n${await tailOf(logFile)}`);
      });
    },
    async confirmed() {
      const [row] = await db.query<{ confirmed: string | null }>('SELECT confirmed_flush_lsn::text AS confirmed FROM pg_replication_slots WHERE slot_name = $1', [slot]);
      return row?.confirmed ?? null;
    },
    recorded() {
      const last = local().readStreamEvents(checkpointStreamName(BULK_ASSEMBLER)).at(-1);
      return last ? (decode(last.data) as { position: { endLsn: string } }).position.endLsn : null;
    },
    async diagnosis() {
      const text = await readFile(logFile, 'utf8').catch(() => '');
      const milestones = text.split('\n').filter((line) => MILESTONE.test(line));
      return milestones.slice(-MILESTONE_LINES).map((line) => (line.length > MILESTONE_CHARS ? `${line.slice(0, MILESTONE_CHARS)}…` : line)).join('\n');
    },
    records: () => local().recordCount(),
    check: (history) => checkOrders(local(), history),
    async close() {
      await Promise.all(processes.map((p) => p.kill('SIGKILL')));
      await kdb?.close().catch(() => undefined);
      await db.drop().catch(() => undefined);
      await db.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return rig;
}

function decode(bytes: Uint8Array): Record<string, unknown> {
  return JSON.parse(Buffer.from(bytes).toString('utf8')) as Record<string, unknown>;
}

/**
 * Every order stream must hold exactly the events `history` gives it, in order (type, and the
 * status an update carries); no event id twice anywhere; and each bulk transaction's events
 * must carry `transaction.index` 0 … count-1 exactly once across all its streams.
 */
export function checkOrders(kdb: InMemoryKurrentDB, history: readonly BulkStep[]): OrdersReport {
  const expected = (id: number): BulkStep[] => history.filter((step) => id >= step.from && id <= step.to);
  const ids = new Set<string>();
  let duplicateIds = 0;
  let events = 0;
  const wrong: string[] = [];
  let wrongStreamCount = 0;
  const perTransaction = new Map<string, { count: number; seen: Uint8Array; events: number; repeated: number; unitScoped: number }>();
  const maxId = Math.max(0, ...history.map((step) => step.to));
  let streams = 0;
  for (let id = 1; id <= maxId; id++) {
    const want = expected(id);
    const stored = kdb.readStreamEvents(`order-${id}`);
    if (want.length === 0 && stored.length === 0) continue;
    streams += 1;
    events += stored.length;
    const got: string[] = [];
    for (const event of stored) {
      if (ids.has(event.id)) duplicateIds += 1;
      ids.add(event.id);
      const metadata = decode(event.metadata) as Record<string, string>;
      const data = decode(event.data);
      got.push(`${event.type}${data['status'] !== undefined && event.type !== 'OrderRemoved' ? `:${String(data['status'])}` : ''}`);
      const key = `${metadata['source.commitLsn']}/${metadata['source.xid']}`;
      const count = Number(metadata['transaction.count']);
      let t = perTransaction.get(key);
      if (!t) perTransaction.set(key, (t = { count, seen: new Uint8Array(count), events: 0, repeated: 0, unitScoped: 0 }));
      const index = Number(metadata['transaction.index']);
      if (t.seen[index]) t.repeated += 1;
      t.seen[index] = 1;
      t.events += 1;
      if (receiptFromMetadata(metadata)?.scope === 'unit') t.unitScoped += 1;
    }
    const wanted = want.map((step) => `${step.type}${step.status !== undefined ? `:${step.status}` : ''}`);
    if (JSON.stringify(got) !== JSON.stringify(wanted)) {
      wrongStreamCount += 1;
      if (wrong.length < 5) wrong.push(`order-${id}: expected [${wanted.join(', ')}], found [${got.join(', ')}]`);
    }
  }
  return {
    streams,
    events,
    wrongStreams: wrong,
    wrongStreamCount,
    duplicateIds,
    transactions: [...perTransaction].map(([transaction, t]) => ({
      transaction,
      events: t.events,
      count: t.count,
      indexesExact: t.repeated === 0 && t.events === t.count && t.seen.every((s) => s === 1),
      unitScoped: t.unitScoped,
    })),
  };
}
