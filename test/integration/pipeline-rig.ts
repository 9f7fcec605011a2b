// Shared rig of the pipeline tests: a database with the invoicing schema, a least-privilege
// capture role, publication and slot(s), an in-memory KurrentDB, the invoicing workload, and
// readers for what landed in KurrentDB and in pg_replication_slots.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { inject, vi } from 'vitest';
import { defineConfig, type AssemblerConfig } from '../../src/config/index.js';
import type { Logger } from '../../src/pipeline/index.js';
import { setupCapture } from '../../src/source/setup.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB, type InMemoryKurrentDBOptions } from '../../src/testing/kurrentdb/index.js';
import { createTestDatabase, type PostgresServerInfo, type TestDatabase } from '../../src/testing/postgres.js';
import { mappers } from '../../examples/invoicing/index.js';
import { cliArgs } from '../resilience/assembler-process.js';

export const TABLES = ['public.customer', 'public.invoice', 'public.invoice_line', 'public.payment'];

export interface StoredBusinessEvent {
  readonly id: string;
  readonly type: string;
  readonly revision: bigint;
  readonly data: Record<string, unknown>;
  readonly metadata: Record<string, string>;
}

export interface LogLine {
  readonly level: 'info' | 'warn' | 'error';
  readonly message: string;
  readonly fields: Record<string, unknown> | undefined;
}

export interface PipelineRig {
  readonly name: string;
  readonly db: TestDatabase;
  readonly kdb: InMemoryKurrentDB;
  readonly publication: string;
  readonly slots: readonly string[];
  /** Capture role's connection string. */
  readonly captureUrl: string;
  config(overrides?: Partial<AssemblerConfig> & { slot?: string; name?: string }): AssemblerConfig;
  logger(): Logger & { readonly lines: LogLine[] };
  events(stream: string): StoredBusinessEvent[];
  businessStreams(): string[];
  slot(slot: string): Promise<{ confirmed_flush_lsn: string; active: boolean }>;
  /** Creates another slot now: it starts at the current WAL position (sees only later transactions). */
  createSlot(suffix: string): Promise<string>;
  currentWalLsn(): Promise<string>;
  sql(text: string, params?: unknown[]): Promise<unknown[]>;
  /** Waits until `check` stops throwing (deadline, never a fixed sleep). */
  until(check: () => void | Promise<void>, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

function decode(bytes: Uint8Array): unknown {
  const text = Buffer.from(bytes).toString('utf8');
  return text === '' ? {} : JSON.parse(text);
}

export async function createPipelineRig(name: string, options: { slots?: number; kurrent?: InMemoryKurrentDBOptions; /** Default: the run's shared server. */ server?: PostgresServerInfo } = {}): Promise<PipelineRig> {
  const server = options.server ?? inject('postgres');
  const db = await createTestDatabase(server, `pl_${name}`);
  const role = `cap_${db.database}`.slice(0, 63);
  const publication = `pub_${name}`;
  const slots = Array.from({ length: options.slots ?? 1 }, (_, i) => `${name}_s${i + 1}_${db.database.slice(-8)}`.slice(0, 63));
  await db.query(readFileSync(new URL('../../examples/invoicing/schema.sql', import.meta.url), 'utf8'));
  await db.query(`CREATE ROLE ${role} LOGIN REPLICATION PASSWORD '${server.password}'`);
  await db.query(`GRANT SELECT ON ${TABLES.join(', ')} TO ${role}`);
  for (const slot of slots) await setupCapture({ connection: db.connectionConfig(), publication, slot, tables: TABLES });
  const kdb = await startInMemoryKurrentDB(options.kurrent ?? {});
  const captureUrl = `postgresql://${encodeURIComponent(role)}:${encodeURIComponent(server.password)}@${server.host}:${server.port}/${db.database}`;

  return {
    name,
    db,
    kdb,
    publication,
    slots,
    captureUrl,
    config(overrides = {}) {
      const { slot, name: assembler, ...rest } = overrides;
      return defineConfig({
        name: assembler ?? name,
        source: { connection: () => captureUrl, slot: slot ?? slots[0]!, publication, statusIntervalMs: 500 },
        destination: { connectionString: kdb.connectionString, retry: { initialDelayMs: 50, maxDelayMs: 500 }, timeoutMs: 5_000 },
        mappers,
        contracts: { dir: 'contracts/invoicing' },
        ...rest,
      });
    },
    logger() {
      const lines: LogLine[] = [];
      const push = (level: LogLine['level'], message: string, fields: Record<string, unknown> | undefined): void => {
        lines.push({ level, message, fields });
        if (process.env['EA_TEST_LOG']) process.stderr.write(`${level} ${message} ${JSON.stringify(fields, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))}\n`);
      };
      return {
        lines,
        info: (message, fields) => push('info', message, fields),
        warn: (message, fields) => push('warn', message, fields),
        error: (message, fields) => push('error', message, fields),
      };
    },
    events(stream) {
      return kdb.readStreamEvents(stream).map((e) => ({
        id: e.id,
        type: e.type,
        revision: e.revision,
        data: decode(e.data) as Record<string, unknown>,
        metadata: decode(e.metadata) as Record<string, string>,
      }));
    },
    businessStreams() {
      return kdb.streamNames().filter((s) => !s.startsWith('$') && !s.startsWith('event-assembler.')).sort();
    },
    async slot(slot) {
      const [row] = await db.query<{ confirmed_flush_lsn: string; active: boolean }>(
        'SELECT confirmed_flush_lsn::text AS confirmed_flush_lsn, active FROM pg_replication_slots WHERE slot_name = $1',
        [slot],
      );
      if (!row) throw new Error(`slot ${slot} is missing`);
      return row;
    },
    async createSlot(suffix) {
      const slot = `${name}_${suffix}_${db.database.slice(-8)}`.slice(0, 63);
      await setupCapture({ connection: db.connectionConfig(), publication, slot, tables: TABLES });
      return slot;
    },
    async currentWalLsn() {
      const [row] = await db.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
      return row!.lsn;
    },
    sql: (text, params) => db.query(text, params),
    async until(check, timeoutMs = 20_000) {
      await vi.waitFor(check, { timeout: timeoutMs, interval: 50 });
    },
    async close() {
      await kdb.close().catch(() => undefined);
      await db.drop().catch(() => undefined);
      await db.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
    },
  };
}

/**
 * `n` customers with one draft invoice each (`<prefix>c<g>`, `<prefix>i<g, 5 digits>`), then the
 * rig's slot re-created: rows from before the slot, which only a snapshot carries to the stream.
 */
export async function seedBeforeSlot(rig: Pick<PipelineRig, 'sql' | 'slots'>, n: number, prefix: string): Promise<void> {
  await rig.sql(`INSERT INTO customer (id, name, email, card_number, country) SELECT '${prefix}c' || g, 'Customer ' || g, g || '@secret.example', NULL, 'NL' FROM generate_series(1, $1::int) g`, [n]);
  await rig.sql(`INSERT INTO invoice (id, customer_id, status, currency, total) SELECT '${prefix}i' || lpad(g::text, 5, '0'), '${prefix}c' || g, 'draft', 'EUR', g FROM generate_series(1, $1::int) g`, [n]);
  await rig.sql('SELECT pg_drop_replication_slot($1)', [rig.slots[0]]);
  await rig.sql(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [rig.slots[0]]);
}

/** The invoicing workload, one application transaction per call. */
export function workload(rig: Pick<PipelineRig, 'sql'>) {
  return {
    customer: (id: string, name = `Customer ${id}`) =>
      rig.sql(`INSERT INTO customer (id, name, email, card_number, country) VALUES ($1, $2, $3, $4, 'NL')`, [id, name, `${id}@secret.example`, `4111-${id}-9999`]),
    draft: (id: string, customer: string) => rig.sql(`INSERT INTO invoice (id, customer_id, status, currency) VALUES ($1, $2, 'draft', 'EUR')`, [id, customer]),
    /** Lines and the status flip in one transaction, as the application issues invoices. */
    issue: (id: string, lines = 2) =>
      rig.sql(
        `WITH l AS (INSERT INTO invoice_line (invoice_id, line_no, description, quantity, unit_price, amount)
                    SELECT $1, n, 'item ' || n, n, 10.00, n * 10.00 FROM generate_series(1, $2::int) n RETURNING amount)
         UPDATE invoice SET status = 'issued', number = 'N-' || $1, issued_at = '2026-01-02T03:04:05Z', due_date = '2026-02-01',
                total = (SELECT sum(amount) FROM l) WHERE id = $1`,
        [id, lines],
      ),
    pay: (id: string, paymentId: string) =>
      rig.sql(
        `WITH p AS (INSERT INTO payment (id, invoice_id, amount, currency, paid_at) SELECT $2, id, total, currency, '2026-01-05T00:00:00Z' FROM invoice WHERE id = $1 RETURNING 1)
         UPDATE invoice SET status = 'paid' WHERE id = $1`,
        [id, paymentId],
      ),
    void: (id: string, reason = 'duplicate') => rig.sql(`UPDATE invoice SET status = 'void', void_reason = $2 WHERE id = $1`, [id, reason]),
  };
}

/**
 * Writes a TypeScript config module for `event-assembler run --config` into `dir`, as a user
 * would: the invoicing mappers and contracts, the rig's slot and publication. Connection strings
 * are never literal: `process-env` reads `<envPrefix>_CAPTURE_URL` / `<envPrefix>_KURRENTDB_URL`
 * in the module, `env-reference` writes `'env:<envPrefix>_…'` for the config loader to resolve.
 * Start the CLI with `rigEnv(rig, envPrefix)` in its environment.
 */
export function writeRigConfig(
  dir: string,
  rig: Pick<PipelineRig, 'slots' | 'publication'>,
  options: {
    readonly name: string;
    readonly file?: string;
    readonly envPrefix: string;
    readonly connections?: 'process-env' | 'env-reference';
    readonly statusIntervalMs?: number;
    /** The `snapshot` field as TypeScript source, e.g. `{ mode: 'initial', chunkSize: 50 }`. */
    readonly snapshot?: string;
    /** The `lifecycle` field as TypeScript source, e.g. `{ drainTimeoutMs: 2000 }`. */
    readonly lifecycle?: string;
    /** The `observability` field as TypeScript source, e.g. `{ port: 0 }`. */
    readonly observability?: string;
    /** Adds the invoicing example's reconcilers (`event-assembler reconcile`). */
    readonly reconcilers?: boolean;
  },
): string {
  const src = (path: string) => pathToFileURL(join(process.cwd(), path)).href;
  const ref = (variable: string) => (options.connections === 'env-reference' ? `'env:${options.envPrefix}_${variable}'` : `process.env.${options.envPrefix}_${variable}`);
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
  const file = join(dir, options.file ?? `${options.name}.config.ts`);
  writeFileSync(
    file,
    `import { defineConfig } from '${src('src/config/index.ts')}';
import { mappers${options.reconcilers ? ', reconcilers' : ''} } from '${src('examples/invoicing/index.ts')}';
export default defineConfig({
  name: '${options.name}',
  source: { connection: ${ref('CAPTURE_URL')}, slot: '${rig.slots[0]}', publication: '${rig.publication}'${options.statusIntervalMs !== undefined ? `, statusIntervalMs: ${options.statusIntervalMs}` : ''} },
  destination: { connectionString: ${ref('KURRENTDB_URL')} },
  mappers,
  contracts: { dir: '${join(process.cwd(), 'contracts/invoicing')}' },${options.snapshot ? `\n  snapshot: ${options.snapshot},` : ''}${options.lifecycle ? `\n  lifecycle: ${options.lifecycle},` : ''}${options.observability ? `\n  observability: ${options.observability},` : ''}${options.reconcilers ? '\n  reconcilers,' : ''}
});
`,
  );
  return file;
}

/** The environment a CLI started on `writeRigConfig`'s file needs. */
export function rigEnv(rig: Pick<PipelineRig, 'captureUrl' | 'kdb'>, envPrefix: string): Record<string, string> {
  return { [`${envPrefix}_CAPTURE_URL`]: rig.captureUrl, [`${envPrefix}_KURRENTDB_URL`]: rig.kdb.connectionString };
}

export interface CliProcess {
  readonly child: ChildProcess;
  /** The exit code, or `'timeout'` when it has not exited within `timeoutMs`. */
  exit(timeoutMs?: number): Promise<number | null | 'timeout'>;
  /** The JSON log lines so far (the logger writes them to stderr). */
  lines(): Record<string, unknown>[];
  stdout(): string;
  stderr(): string;
  /** stdout and stderr together. */
  output(): string;
}

/** `event-assembler <args>` as a child process (the tests' CLI, `cliArgs`), with `env` added. */
export function startCli(args: readonly string[], env: Record<string, string>): CliProcess {
  const child = spawn(process.execPath, [...cliArgs(), ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    exit: (timeoutMs = 60_000) => Promise.race([exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), timeoutMs).unref())]),
    lines: () =>
      stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    stdout: () => stdout,
    stderr: () => stderr,
    output: () => `${stdout}\n${stderr}`,
  };
}
