// The chaos run's parts, each owned by the run so it can be broken on purpose: a PostgreSQL
// server of its own (restarted fast or killed, on the same data directory and port), the
// in-memory KurrentDB (stopped, restarted with its data, slowed), and the assembler as a child
// process (`event-assembler run`, SIGKILLed and started again). Setup mirrors crash.test.ts: a
// least-privilege capture role, a publication, the invoicing schema, a reference slot with its
// own exported snapshot taken right before the assembler's first start.
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { mappers } from '../../examples/invoicing/index.js';
import { parseLsn } from '../../src/source/position.js';
import { captureRoleSql, setupCapture } from '../../src/source/setup.js';
import type { SnapshotProgress } from '../../src/source/snapshot/index.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/testing/postgres.js';
import { createReferenceSlotWithSnapshot, type ExpectedEvent } from '../../src/testing/verify-destination.js';
import { MARKER_TABLE_SQL } from '../support/resilient-transaction.js';
import { REPO_ROOT, startAssemblerProcess, tailOf, waitForStartDecision, writeInvoicingConfig, type AssemblerProcess } from './assembler-process.js';

export const ASSEMBLER = 'chaos';
export const PUBLICATION = 'chaos_pub';
export const SLOT = 'chaos_assembler';
export const REFERENCE = 'chaos_reference';
export const GENERATION = '1';
export const TABLES = ['public.customer', 'public.invoice', 'public.invoice_line', 'public.payment'];
export const PROGRESS_STREAM = `event-assembler.snapshot-${ASSEMBLER}`;
const DATABASE = 'chaos';

export interface StartDecision {
  readonly action: string;
  readonly generation: string | null;
  readonly code: string;
}

export interface ChaosRig {
  readonly pg: EmbeddedPostgres;
  readonly kurrent: InMemoryKurrentDB;
  /** Superuser settings for the chaos database. */
  readonly admin: pg.ClientConfig;
  readonly adminUrl: string;
  readonly logFile: string;
  /** The assembler process now (null before the first start). */
  readonly assembler: AssemblerProcess | null;
  /** Starts an assembler process and resolves with its logged start-up decision. */
  startAssembler(): Promise<StartDecision>;
  /** Throws (with the log's tail) when the assembler process is not running. */
  alive(): Promise<void>;
  /** The last snapshot progress record in the destination. */
  snapshotProgress(): SnapshotProgress | null;
  /** The slot's confirmed_flush_lsn (0n when unknown). */
  confirmedFlush(): Promise<bigint>;
  /** One query as the superuser on the chaos database. */
  query<R extends pg.QueryResultRow>(sql: string, params?: unknown[]): Promise<R[]>;
  note(text: string): Promise<void>;
  /** The assembler log's size now, and its text from an offset. */
  logSize(): Promise<number>;
  logSince(offset: number): Promise<string>;
  close(): Promise<void>;
}

export interface PreparedSource {
  readonly expectedBefore: ExpectedEvent[];
}

const decoder = new TextDecoder();

/** Starts PostgreSQL and KurrentDB; `prepare` seeds the source (before capture) and is given the admin settings. */
export async function startChaosRig(dir: string, chunkSize: (seeded: number) => number, prepare: (admin: pg.ClientConfig) => Promise<number>): Promise<ChaosRig & PreparedSource> {
  const server = await startEmbeddedPostgres();
  let kurrent: InMemoryKurrentDB | null = null;
  let child: AssemblerProcess | null = null;
  const close = async () => {
    if (child?.running) await child.kill('SIGKILL');
    await kurrent?.close();
    await server.destroy();
  };
  try {
    await server.createDatabase(DATABASE);
    const admin = server.connectionConfig({ database: DATABASE });
    const adminUrl = server.connectionString({ database: DATABASE });
    const query = async <R extends pg.QueryResultRow>(sql: string, params?: unknown[]): Promise<R[]> => {
      const client = new pg.Client(admin);
      client.on('error', () => undefined);
      await client.connect();
      try {
        return (await client.query<R>(sql, params)).rows;
      } finally {
        await client.end().catch(() => undefined);
      }
    };
    const role = `chaos_capture`;
    const password = randomBytes(12).toString('hex');
    await query(await fs.readFile(path.join(REPO_ROOT, 'examples/invoicing/schema.sql'), 'utf8'));
    await query(MARKER_TABLE_SQL);
    await query(captureRoleSql({ role, tables: TABLES, database: DATABASE, password }));
    const seededInvoices = await prepare(admin);
    await setupCapture({ connection: adminUrl, publication: PUBLICATION, slot: SLOT, tables: TABLES });
    // The initial snapshot creates its slot itself (with an exported snapshot); setup made one without.
    await query('SELECT pg_drop_replication_slot($1)', [SLOT]);
    // The reference: its own exported snapshot; nothing commits until the assembler's slot exists.
    const reference = await createReferenceSlotWithSnapshot(adminUrl, REFERENCE, { mappers, assembler: ASSEMBLER, generation: GENERATION, tables: TABLES });
    if (reference.expectedBefore.length !== seededInvoices) throw new Error(`the reference snapshot maps ${reference.expectedBefore.length} InvoiceImported, ${seededInvoices} invoices were seeded`);

    kurrent = await startInMemoryKurrentDB();
    const logFile = path.join(dir, 'assembler.log');
    const configFile = await writeInvoicingConfig(path.join(dir, 'assembler.config.ts'), {
      name: ASSEMBLER, slot: SLOT, publication: PUBLICATION, tables: TABLES, captureEnv: 'EA_CHAOS_CAPTURE_URL', kurrentEnv: 'EA_CHAOS_KURRENTDB_URL',
      initialSnapshotChunkSize: chunkSize(seededInvoices),
    });
    const env = {
      EA_CHAOS_CAPTURE_URL: `postgresql://${role}:${password}@${server.host}:${server.port}/${DATABASE}`,
      EA_CHAOS_KURRENTDB_URL: kurrent.connectionString,
    };
    const db = kurrent;

    const alive = async () => {
      if (child?.running) return;
      const exit = child ? await child.exited : null;
      throw new Error(`the assembler exited on its own (code ${exit?.code}, signal ${exit?.signal})\n--- assembler log (tail) ---\n${await tailOf(logFile)}`);
    };
    const note = (text: string) => fs.appendFile(logFile, `\n──── chaos: ${text} ────\n`);

    return {
      pg: server,
      kurrent: db,
      admin,
      adminUrl,
      logFile,
      expectedBefore: reference.expectedBefore,
      get assembler() {
        return child;
      },
      async startAssembler() {
        const offset = await fs.stat(logFile).then((s) => s.size, () => 0);
        child = startAssemblerProcess(configFile, logFile, env);
        await note(`started assembler pid ${child.pid}`);
        return waitForStartDecision(child.pid, logFile, offset, alive, 120_000);
      },
      alive,
      snapshotProgress() {
        const stored = db.readStreamEvents(PROGRESS_STREAM);
        const tail = stored[stored.length - 1];
        return tail ? (JSON.parse(decoder.decode(tail.data)) as { progress: SnapshotProgress }).progress : null;
      },
      async confirmedFlush() {
        const [row] = await query<{ lsn: string | null }>(`SELECT confirmed_flush_lsn::text AS lsn FROM pg_replication_slots WHERE slot_name = $1`, [SLOT]);
        return row?.lsn ? parseLsn(row.lsn) : 0n;
      },
      query,
      note,
      logSize: () => fs.stat(logFile).then((st) => st.size, () => 0),
      logSince: async (offset) => (await fs.readFile(logFile)).subarray(offset).toString('utf8'),
      close,
    };
  } catch (error) {
    await close().catch(() => undefined);
    throw error;
  }
}
