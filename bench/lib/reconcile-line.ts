/**
 * The line `reconcile` is measured on: the invoicing schema filled with `invoices` invoices over
 * invoices / 10 customers (generate_series, one statement each), and the invoicing assembler from
 * the production build (subject.ts) started with `snapshot: { mode: 'initial' }`, so every invoice
 * stream begins with the assembler's own InvoiceImported (receipt included) and its checkpoint
 * stream exists. It keeps running: `reconcile` waits for its checkpoint to pass each cut.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createInvoicingMappers } from '../../examples/invoicing/index.js';
import type { Assembler } from '../../src/pipeline/index.js';
import type { EmbeddedPostgres } from '../../src/testing/postgres.js';
import { createBenchDatabase, CUSTOMERS, PUBLICATION, type BenchDatabase } from './invoicing-db.js';
import { CONTRACTS_DIR } from './pipeline-run.js';
import { compareLsn, createAssembler, silentLogger } from './subject.js';

export const ASSEMBLER_NAME = 'bench-reconcile';
const SLOT = 'bench_reconcile';
const REPO_ROOT = path.resolve(CONTRACTS_DIR, '../..');

export interface ReconcileLine {
  readonly db: BenchDatabase;
  readonly captureUrl: string;
  readonly invoices: number;
  readonly customers: number;
  /** Seconds: filling the tables (and VACUUM ANALYZE); the initial snapshot until the line ran with a checkpoint. */
  readonly fillSeconds: number;
  readonly snapshotSeconds: number;
  /** Snapshot rows read and events the snapshot appended. */
  readonly snapshot: { readonly rows: number; readonly events: number };
  readonly snapshotSettings: { readonly chunkSize: number; readonly parallelism: number };
  /** Throws the assembler's failure, if it failed since. */
  check(): void;
  close(): Promise<void>;
}

/** Snapshot settings: the defaults unless EA_BENCH_RECONCILE_SNAPSHOT says otherwise (JSON, e.g. `{"chunkSize":8192}`). */
function snapshotSettings(): { chunkSize: number; parallelism: number } {
  const override = process.env.EA_BENCH_RECONCILE_SNAPSHOT ? (JSON.parse(process.env.EA_BENCH_RECONCILE_SNAPSHOT) as { chunkSize?: number; parallelism?: number }) : {};
  return { chunkSize: override.chunkSize ?? 1024, parallelism: override.parallelism ?? 1 };
}

/**
 * `invoices` invoices: ids `inv_0000001`…, customers `c1`…`c<invoices/10>` (the first 100 come with
 * the bench database), statuses draft / issued / paid / void in the proportions 1 : 2 : 6 : 1,
 * totals numeric(12,2) from 0.00 to 9,999.99 (zero for drafts, as the schema's default).
 */
export async function fillInvoices(db: BenchDatabase, invoices: number): Promise<number> {
  const customers = Math.max(CUSTOMERS, Math.ceil(invoices / 10));
  await db.query(`INSERT INTO customer (id, name, email, country) SELECT 'c' || i, 'Customer ' || i, 'c' || i || '@example.com', (ARRAY['DE','FR','NL','AT'])[1 + i % 4] FROM generate_series(${CUSTOMERS + 1}, ${customers}) i`);
  await db.query(`INSERT INTO invoice (id, customer_id, number, status, currency, total, issued_at)
    SELECT 'inv_' || lpad(g::text, 7, '0'), 'c' || (1 + (g::bigint * 7919) % ${customers}), 'N-' || g,
           s.status, (ARRAY['EUR','EUR','EUR','USD','GBP'])[1 + g % 5],
           CASE WHEN s.status = 'draft' THEN 0 ELSE ((g::bigint * 104729) % 1000000) / 100.0 END::numeric(12,2),
           CASE WHEN s.status = 'draft' THEN NULL ELSE now() END
    FROM generate_series(1, ${invoices}) g,
         LATERAL (SELECT (ARRAY['draft','issued','issued','paid','paid','paid','paid','paid','paid','void'])[1 + g % 10] AS status) s`);
  // Statistics as a table in service has them: reconcile sizes its key ranges from the planner's row estimate.
  await db.query('VACUUM ANALYZE customer');
  await db.query('VACUUM ANALYZE invoice');
  return customers;
}

async function until(what: string, timeoutMs: number, check: () => boolean | Promise<boolean>, failed: () => unknown): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const failure = failed();
    if (failure) throw failure;
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`bench:reconcile: ${what} not within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Fills the database, runs the initial snapshot through the assembler and leaves the line running. */
export async function startReconcileLine(server: EmbeddedPostgres, kurrentdb: string, invoices: number, log: (line: string) => void): Promise<ReconcileLine> {
  const db = await createBenchDatabase(server, 'bench_reconcile');
  const captureUrl = server.connectionString({ database: db.name });
  let started = performance.now();
  const customers = await fillInvoices(db, invoices);
  const fillSeconds = (performance.now() - started) / 1000;
  log(`filled ${invoices.toLocaleString('en-US')} invoices over ${customers.toLocaleString('en-US')} customers in ${fillSeconds.toFixed(1)} s`);
  const settings = snapshotSettings();
  const assembler: Assembler = createAssembler(
    {
      name: ASSEMBLER_NAME,
      source: { connection: captureUrl, slot: SLOT, publication: PUBLICATION },
      destination: { connectionString: kurrentdb },
      mappers: createInvoicingMappers(),
      contracts: { dir: CONTRACTS_DIR },
      snapshot: { mode: 'initial', ...settings },
    },
    { logger: silentLogger },
  );
  started = performance.now();
  let failure: unknown = null;
  const running = assembler.run();
  running.catch((error: unknown) => (failure = error ?? new Error('the assembler failed')));
  const progress = setInterval(() => {
    const s = assembler.status();
    log(`initial snapshot: ${s.state}, ${(s.snapshot?.rows ?? 0).toLocaleString('en-US')} rows read, ${(s.snapshot?.events ?? 0).toLocaleString('en-US')} events durable`);
  }, 30_000);
  try {
    await until('the initial snapshot', 3_600_000, () => assembler.status().state === 'running' && assembler.status().snapshot?.finished === true, () => failure);
    // A transaction after the snapshot: once the checkpoint has recorded it, the line streams and its checkpoint stream exists.
    const [mark] = await db.query<{ lsn: string }>(`SELECT pg_logical_emit_message(true, 'bench.reconcile', 'snapshot done')::text AS lsn`);
    await until('the checkpoint past the snapshot', 600_000, () => {
      const recorded = assembler.status().checkpoint.recordedLsn;
      return recorded !== null && compareLsn(recorded, mark!.lsn) >= 0;
    }, () => failure);
  } finally {
    clearInterval(progress);
  }
  const snapshotSeconds = (performance.now() - started) / 1000;
  const status = assembler.status();
  const snapshot = { rows: status.snapshot?.rows ?? 0, events: status.snapshot?.events ?? 0 };
  log(`initial snapshot done in ${snapshotSeconds.toFixed(1)} s: ${snapshot.rows.toLocaleString('en-US')} rows, ${snapshot.events.toLocaleString('en-US')} events (chunkSize ${settings.chunkSize}, parallelism ${settings.parallelism})`);
  return {
    db,
    captureUrl,
    invoices,
    customers,
    fillSeconds,
    snapshotSeconds,
    snapshot,
    snapshotSettings: settings,
    check() {
      if (failure) throw failure;
    },
    async close() {
      await assembler.stop();
      await running.catch(() => undefined);
    },
  };
}

/**
 * The configuration module the CLI loads (TypeScript, as users write it): the running
 * assembler's name, source and destination, and the invoicing reconcilers. Connections come from
 * the environment (EA_BENCH_CAPTURE_URL, EA_BENCH_KURRENTDB_URL).
 */
export function writeReconcileConfig(dir: string): string {
  const src = (file: string) => pathToFileURL(path.join(REPO_ROOT, file)).href;
  writeFileSync(path.join(dir, 'package.json'), '{ "type": "module" }\n');
  const file = path.join(dir, `${ASSEMBLER_NAME}.config.ts`);
  writeFileSync(
    file,
    `import { defineConfig } from '${src('src/config/index.ts')}';
import { createInvoicingMappers, reconcilers } from '${src('examples/invoicing/index.ts')}';
export default defineConfig({
  name: '${ASSEMBLER_NAME}',
  source: { connection: 'env:EA_BENCH_CAPTURE_URL', slot: '${SLOT}', publication: '${PUBLICATION}' },
  destination: { connectionString: 'env:EA_BENCH_KURRENTDB_URL' },
  mappers: createInvoicingMappers(),
  contracts: { dir: '${CONTRACTS_DIR}' },
  reconcilers,
});
`,
  );
  return file;
}
