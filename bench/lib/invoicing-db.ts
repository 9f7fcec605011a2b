/**
 * The benchmark's source database: the invoicing schema, a publication of its four tables,
 * replication slots created before any change is written (so every consumer reads the very
 * same WAL), and two ways of writing invoices — pre-written in bulk (one transaction per
 * invoice, committed in a loop inside the server) or paced at a fixed rate, also inside the server.
 */
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import type { EmbeddedPostgres } from '../../src/testing/postgres.js';

export const PUBLICATION = 'bench_pub';
export const TABLES = ['public.customer', 'public.invoice', 'public.invoice_line', 'public.payment'] as const;
export const CUSTOMERS = 100;

export interface BenchDatabase {
  readonly name: string;
  readonly connection: pg.ClientConfig;
  query<R = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<R[]>;
  /** Creates logical slots (pgoutput) at the current end of WAL, all at the same point: nothing is written in between. */
  createSlots(names: readonly string[]): Promise<void>;
  dropSlots(names: readonly string[]): Promise<void>;
}

export async function createBenchDatabase(server: EmbeddedPostgres, name: string): Promise<BenchDatabase> {
  await server.createDatabase(name);
  const connection = server.connectionConfig({ database: name });
  const query = <R>(sql: string, params?: unknown[]) => server.query<R>(sql, params, { database: name });
  const schema = await readFile(new URL('../../examples/invoicing/schema.sql', import.meta.url), 'utf8');
  await query(schema);
  // Customers exist before the slots: the measured stream holds invoices only.
  await query(`INSERT INTO customer (id, name, email, country) SELECT 'c' || i, 'Customer ' || i, 'c' || i || '@example.com', 'DE' FROM generate_series(1, ${CUSTOMERS}) i`);
  await query(`CREATE PUBLICATION ${PUBLICATION} FOR TABLE ${TABLES.join(', ')}`);
  return {
    name,
    connection,
    query,
    async createSlots(names) {
      for (const slot of names) await query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slot]);
    },
    async dropSlots(names) {
      for (const slot of names) {
        await query(`SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, [slot]);
        await query(`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, [slot]).catch(() => undefined);
      }
    },
  };
}

/**
 * `count` transactions, each inserting one draft invoice and its three lines (4 rows; the
 * invoice-lifecycle mapper turns each into one `InvoiceDrafted`). Committed one by one inside a
 * DO block, so writing is not limited by client round trips. Returns the WAL end afterwards.
 */
export async function writeInvoicesBulk(db: BenchDatabase, count: number, prefix = 'b'): Promise<string> {
  const batch = 10_000;
  for (let from = 1; from <= count; from += batch) {
    const to = Math.min(count, from + batch - 1);
    await db.query(`DO $$
      BEGIN
        FOR i IN ${from}..${to} LOOP
          INSERT INTO invoice (id, customer_id, status, currency, total) VALUES ('${prefix}' || i, 'c' || (i % ${CUSTOMERS} + 1), 'draft', 'EUR', 60.00);
          INSERT INTO invoice_line (invoice_id, line_no, description, quantity, unit_price, amount)
            VALUES ('${prefix}' || i, 1, 'Consulting', 1, 10.00, 10.00), ('${prefix}' || i, 2, 'Travel', 2, 10.00, 20.00), ('${prefix}' || i, 3, 'Licence', 3, 10.00, 30.00);
          COMMIT;
        END LOOP;
      END $$`);
  }
  const [row] = await db.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
  return row!.lsn;
}

export interface PacedResult {
  readonly transactions: number;
  readonly seconds: number;
  /** Transactions that started more than 100 ms behind their schedule. */
  readonly late: number;
}

/**
 * `count` invoice transactions at `ratePerSecond`, each committed on its own inside one DO block
 * in the server: transaction `i` is due at `start + i / rate` (the server's clock), and the loop
 * sleeps (`pg_sleep`, 1 ms at the least) whenever it is ahead, so at high rates it commits in
 * bursts of a millisecond's share. Written in the server because a client that sends each
 * transaction as a round trip cannot keep 5,000 per second on two cores next to the assembler,
 * the walsender and the destination (it reached ≈ 3,100 tx/s, every one of them late).
 */
export async function writeInvoicesPaced(db: BenchDatabase, count: number, ratePerSecond: number, prefix: string): Promise<PacedResult> {
  const client = new pg.Client(db.connection);
  await client.connect();
  const start = performance.now();
  try {
    await client.query(`DO $$
      DECLARE
        started timestamptz := clock_timestamp();
        due timestamptz;
        late integer := 0;
        id text;
      BEGIN
        FOR i IN 0..${count - 1} LOOP
          due := started + make_interval(secs => i::float8 / ${ratePerSecond});
          IF due > clock_timestamp() THEN
            PERFORM pg_sleep(extract(epoch FROM due - clock_timestamp()));
          ELSIF clock_timestamp() - due > interval '100 milliseconds' THEN
            late := late + 1;
          END IF;
          id := '${prefix}' || (i + 1);
          INSERT INTO invoice (id, customer_id, status, currency, total) VALUES (id, 'c' || (i % ${CUSTOMERS} + 1), 'draft', 'EUR', 60.00);
          INSERT INTO invoice_line (invoice_id, line_no, description, quantity, unit_price, amount)
            VALUES (id, 1, 'Consulting', 1, 10.00, 10.00), (id, 2, 'Travel', 2, 10.00, 20.00), (id, 3, 'Licence', 3, 10.00, 30.00);
          COMMIT;
        END LOOP;
        PERFORM set_config('bench.late', late::text, false);
      END $$`);
    const { rows } = await client.query<{ late: string }>(`SELECT current_setting('bench.late') AS late`);
    return { transactions: count, seconds: (performance.now() - start) / 1000, late: Number(rows[0]!.late) };
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Polls until the slot's confirmed_flush_lsn reaches `lsn`; returns when it did. */
export async function waitForSlotFlush(db: BenchDatabase, slot: string, lsn: string, timeoutMs: number, intervalMs = 10): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [row] = await db.query<{ reached: boolean }>(`SELECT confirmed_flush_lsn >= $2::pg_lsn AS reached FROM pg_replication_slots WHERE slot_name = $1`, [slot, lsn]);
    if (row?.reached) return;
    if (Date.now() > deadline) throw new Error(`slot ${slot} did not confirm ${lsn} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
