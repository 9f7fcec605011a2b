// Capture end to end against PostgreSQL 17, as a least-privilege role: what arrives, in
// which order, and how complete (row ops, key changes, truncate, messages, interleaving,
// unchanged TOAST, schema changes, streamed transactions with aborted subtransactions).
import { tmpdir } from 'node:os';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { createPostgresSource, type PostgresSource, type PostgresSourceOptions } from '../../src/source/index.js';
import { setupCapture } from '../../src/source/setup.js';
import { isUnchangedToast, type Change, type InsertChange, type Row, type UpdateChange } from '../../src/source/types.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { collectTransactions, type Received } from '../support/collect-transactions.js';
import { dropRole } from '../support/roles.js';

type Written = InsertChange | UpdateChange;
/** Inserts and updates (the changes with an `after` row). */
const rows = (r: Received[]): Written[] => r.flatMap((x) => x.changes).filter((c): c is Written => c.op === 'insert' || c.op === 'update');
const after = (c: Change): Row | undefined => (c.op === 'insert' || c.op === 'update' ? c.after : undefined);

describe('capture stream (PostgreSQL 17, least-privilege role)', () => {
  let db: TestDatabase;
  let role: string;
  const sources: PostgresSource[] = [];
  const slots: string[] = [];

  async function capture(name: string, tables: PostgresSourceOptions['tables'], extra: Partial<PostgresSourceOptions> = {}, connectionOptions?: string) {
    const slot = `${name}_${role}`.slice(0, 63);
    await setupCapture({ connection: db.connectionConfig(), publication: `pub_${name}`, slot, tables: tables.map((t) => (typeof t === 'string' ? t : t.table)) });
    slots.push(slot);
    const config: pg.ClientConfig = { ...db.connectionConfig({ user: role }), ...(connectionOptions ? { options: connectionOptions } : {}) };
    const source = createPostgresSource({ connection: config, slot, publication: `pub_${name}`, tables, statusIntervalMs: 1_000, ...extra });
    sources.push(source);
    await source.start();
    return { source, slot, consumer: collectTransactions(source, { acknowledge: true }) };
  }

  beforeAll(async () => {
    db = await createTestDatabase(inject('postgres'), 'capture_stream');
    role = `cap_${db.database}`.slice(0, 63);
    await db.query(`CREATE ROLE ${role} LOGIN REPLICATION PASSWORD '${inject('postgres').password}'`);
    await db.query(`
      CREATE TABLE public.invoice (id int PRIMARY KEY, customer text NOT NULL, total numeric(12,2) NOT NULL, status text);
      CREATE TABLE public.invoice_line (invoice_id int NOT NULL, line int NOT NULL, amount numeric(12,2), PRIMARY KEY (invoice_id, line));
      CREATE TABLE public.doc (id int PRIMARY KEY, title text, body text);
      CREATE TABLE public.doc_full (id int PRIMARY KEY, title text, body text);
      ALTER TABLE public.doc_full REPLICA IDENTITY FULL;
      ALTER TABLE public.doc ALTER COLUMN body SET STORAGE EXTERNAL;
      ALTER TABLE public.doc_full ALTER COLUMN body SET STORAGE EXTERNAL;
      CREATE TABLE public.shape (id int PRIMARY KEY, a text, b text);
      CREATE TABLE public.required_shape (id int PRIMARY KEY, amount int, note text);
      CREATE TABLE public.big (id int PRIMARY KEY, payload text);
    `);
    await db.query(`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${role}`);
  });

  afterAll(async () => {
    for (const s of sources) await s.close();
    await db?.drop();
    await dropRole(role);
  });

  it('delivers inserts, updates (with key changes), deletes, truncate and transactional messages as whole transactions in commit order', async () => {
    const { consumer } = await capture('ops', ['public.invoice', 'public.invoice_line']);
    await db.query(`
      BEGIN;
      INSERT INTO public.invoice VALUES (1, 'acme', 10.00, 'draft');
      INSERT INTO public.invoice_line VALUES (1, 1, 4.00), (1, 2, 6.00);
      SELECT pg_logical_emit_message(true, 'ea.test', 'issued-1');
      COMMIT;`);
    await db.query(`UPDATE public.invoice SET status = 'issued' WHERE id = 1`);
    await db.query(`UPDATE public.invoice SET id = 100 WHERE id = 1`);
    await db.query(`DELETE FROM public.invoice_line WHERE invoice_id = 1 AND line = 2`);
    await db.query(`TRUNCATE public.invoice_line`);
    const received = await consumer.until((r) => r.length >= 5);

    const [first, update, keyChange, del, truncate] = received;
    expect(first?.changes.map((c) => c.op)).toEqual(['insert', 'insert', 'insert', 'message']);
    const insert = first?.changes[0];
    expect(insert).toMatchObject({ op: 'insert', table: 'public.invoice', after: { id: 1, customer: 'acme', total: '10.00', status: 'draft' }, key: { id: 1 } });
    expect(first?.changes[3]).toMatchObject({ op: 'message', prefix: 'ea.test', transactional: true });
    expect((first?.changes[3] as { content: Buffer }).content.toString()).toBe('issued-1');

    expect(update?.changes).toHaveLength(1);
    expect(update?.changes[0]).toMatchObject({ op: 'update', after: { id: 1, status: 'issued' }, key: { id: 1 }, oldKey: null });

    // Primary key change: pgoutput sends the old key ('K') with the new row.
    expect(keyChange?.changes[0]).toMatchObject({ op: 'update', after: { id: 100 }, key: { id: 100 }, oldKey: { id: 1 } });

    expect(del?.changes[0]).toMatchObject({ op: 'delete', table: 'public.invoice_line', key: { invoice_id: 1, line: 2 } });
    expect(truncate?.changes[0]).toMatchObject({ op: 'truncate', tables: ['public.invoice_line'], cascade: false, restartIdentity: false });

    // Commit order, strictly increasing LSNs, positions carry the slot identity.
    const ends = received.map((r) => BigInt(`0x${r.tx.endLsn.replace('/', '').padStart(16, '0')}`));
    expect([...ends].sort((a, b) => (a < b ? -1 : 1))).toEqual(ends);
    for (const r of received) {
      expect(r.tx.position.checkpoint).toMatch(/^v1:\d+:1:ops_/);
      expect(r.tx.position.commitLsn).toBe(r.tx.commitLsn);
      expect(r.tx.position.xid).toBe(r.tx.xid);
    }
  });

  it('orders interleaved concurrent transactions by commit, not by begin', async () => {
    const { consumer } = await capture('interleave', ['public.invoice', 'public.invoice_line']);
    const a = new pg.Client(db.connectionConfig());
    const b = new pg.Client(db.connectionConfig());
    await a.connect();
    await b.connect();
    try {
      await a.query('BEGIN');
      await a.query(`INSERT INTO public.invoice VALUES (201, 'a', 1, 'draft')`); // A begins first
      await b.query('BEGIN');
      await b.query(`INSERT INTO public.invoice VALUES (202, 'b', 2, 'draft')`);
      await a.query(`INSERT INTO public.invoice_line VALUES (201, 1, 1)`);
      await b.query(`INSERT INTO public.invoice_line VALUES (202, 1, 2)`);
      await b.query('COMMIT'); // B commits first
      await a.query(`INSERT INTO public.invoice_line VALUES (201, 2, 1)`);
      await a.query('COMMIT');
    } finally {
      await a.end();
      await b.end();
    }
    const received = await consumer.until((r) => r.length >= 2);
    expect(received).toHaveLength(2);
    expect(received.map((r) => r.changes.map((c) => after(c)?.id ?? after(c)?.invoice_id))).toEqual([
      [202, 202],
      [201, 201, 201],
    ]);
    expect(received[0]!.tx.xid).toBeGreaterThan(received[1]!.tx.xid);
  });

  it('marks unchanged TOAST values, and fills them from the old tuple with REPLICA IDENTITY FULL', async () => {
    const { consumer } = await capture('toast', ['public.doc', 'public.doc_full']);
    // ~8 kB of incompressible text (md5 chain), stored out of line (STORAGE EXTERNAL).
    const body = `(SELECT string_agg(md5(i::text), '') FROM generate_series(1, 250) i)`;
    await db.query(`INSERT INTO public.doc VALUES (1, 'one', ${body}); INSERT INTO public.doc_full VALUES (1, 'one', ${body});`);
    await db.query(`UPDATE public.doc SET title = 'two' WHERE id = 1`);
    await db.query(`UPDATE public.doc_full SET title = 'two' WHERE id = 1`);
    const received = await consumer.until((r) => rows(r).length >= 4);
    const updates = rows(received).filter((c) => c.op === 'update');
    const plain = updates.find((c) => c.table === 'public.doc');
    const full = updates.find((c) => c.table === 'public.doc_full');
    expect(plain?.after.title).toBe('two');
    expect(isUnchangedToast(plain?.after.body)).toBe(true);
    expect(plain?.after.body).not.toBeNull();
    expect(plain?.after.body).not.toBeUndefined();
    expect(full?.after.title).toBe('two');
    expect(typeof full?.after.body).toBe('string');
    expect((full?.after.body as string).length).toBe(8000);
    expect(full?.before).toMatchObject({ id: 1, title: 'one' });
  });

  it('reports schema changes between transactions (add, drop, rename column)', async () => {
    const { consumer } = await capture('schema', ['public.shape']);
    await db.query(`INSERT INTO public.shape VALUES (1, 'a', 'b')`);
    await consumer.until((r) => r.length >= 1);
    await db.query(`ALTER TABLE public.shape ADD COLUMN c int`);
    await db.query(`INSERT INTO public.shape VALUES (2, 'a', 'b', 3)`);
    await db.query(`ALTER TABLE public.shape DROP COLUMN a`);
    await db.query(`INSERT INTO public.shape VALUES (3, 'b', 4)`);
    await db.query(`ALTER TABLE public.shape RENAME COLUMN b TO bee`);
    await db.query(`INSERT INTO public.shape VALUES (4, 'b', 5)`);
    const received = await consumer.until((r) => r.length >= 4);
    const schema = received.flatMap((r) => r.changes).filter((c) => c.op === 'schema');
    expect(schema.map((s) => ({ added: s.added, dropped: s.dropped, renamed: s.renamed }))).toEqual([
      { added: ['c'], dropped: [], renamed: [] },
      { added: [], dropped: ['a'], renamed: [] },
      { added: [], dropped: [], renamed: [{ from: 'b', to: 'bee' }] },
    ]);
    expect(received[3]?.changes.at(-1)).toMatchObject({ op: 'insert', after: { id: 4, bee: 'b', c: 5 } });
  });

  it('stops loudly when a required column is dropped', async () => {
    const { source, consumer } = await capture('required', [{ table: 'public.required_shape', requiredColumns: ['amount'] }]);
    await db.query(`INSERT INTO public.required_shape VALUES (1, 10, 'x')`);
    await consumer.until((r) => r.length >= 1);
    await db.query(`ALTER TABLE public.required_shape DROP COLUMN amount`);
    await db.query(`INSERT INTO public.required_shape VALUES (2, 'y')`);
    await consumer.done;
    expect(consumer.state.error).toMatchObject({ code: 'SCHEMA_REQUIRED_COLUMN_DROPPED', table: 'public.required_shape', column: 'amount' });
    expect(consumer.received).toHaveLength(1);
    expect(source.status().state).toBe('failed');
  });

  it('protocol v2 streaming: a rolled-back subtransaction is absent, an aborted streamed transaction delivers nothing', async () => {
    // 64 kB of decoding memory makes the server stream the big transactions below in chunks.
    const { consumer } = await capture('streaming', ['public.big'], {}, '-c logical_decoding_work_mem=64kB');
    const c = new pg.Client(db.connectionConfig());
    await c.connect();
    try {
      await c.query('BEGIN');
      await c.query(`INSERT INTO public.big SELECT i, repeat('x', 200) FROM generate_series(1, 2000) i`);
      await c.query('SAVEPOINT s');
      await c.query(`INSERT INTO public.big SELECT i, repeat('y', 200) FROM generate_series(2001, 3000) i`);
      await c.query('ROLLBACK TO SAVEPOINT s');
      await c.query(`INSERT INTO public.big SELECT i, repeat('z', 200) FROM generate_series(3001, 4000) i`);
      await c.query('COMMIT');
      // A streamed transaction that aborts: nothing of it may arrive.
      await c.query('BEGIN');
      await c.query(`INSERT INTO public.big SELECT i, repeat('a', 200) FROM generate_series(5001, 7000) i`);
      await c.query('ROLLBACK');
      await c.query(`INSERT INTO public.big VALUES (9999, 'marker')`);
    } finally {
      await c.end();
    }
    const received = await consumer.until((r) => r.some((x) => x.changes.some((ch) => after(ch)?.id === 9999)), 30_000);
    expect(received).toHaveLength(2);
    const ids = rows([received[0]!]).map((ch) => ch.after.id as number);
    expect(ids).toHaveLength(3000);
    expect(ids.filter((id) => id > 2000 && id <= 3000)).toEqual([]);
    expect(ids.filter((id) => id > 5000)).toEqual([]);
    expect(new Set(ids).size).toBe(3000);
    expect(rows([received[1]!]).map((ch) => ch.after.id)).toEqual([9999]);
    // The server really streamed it (otherwise this test proves nothing about stream messages).
    await vi.waitFor(async () => {
      const stats = await db.query<{ stream_txns: string }>(`SELECT stream_txns::text FROM pg_stat_replication_slots WHERE slot_name LIKE 'streaming_%'`);
      expect(Number(stats[0]?.stream_txns)).toBeGreaterThanOrEqual(2);
    }, { timeout: 10_000, interval: 100 });
  });

  it('a transaction that spills to disk mid-way keeps every row in order, and so do the transactions after it', async () => {
    // A small memory limit: the first rows are taken in at once, then a row waits for the spill
    // and the rows behind it queue; none may overtake another.
    const { consumer } = await capture('spill', ['public.invoice_line'], { protocolVersion: 1, streaming: false, memoryLimitBytes: 16 * 1024, spillDir: tmpdir() });
    await db.query(`INSERT INTO public.invoice_line SELECT 900, g, g FROM generate_series(1, 3000) g`);
    await db.query(`INSERT INTO public.invoice_line VALUES (901, 1, 1), (901, 2, 2)`);
    await db.query(`INSERT INTO public.invoice_line SELECT 902, g, g FROM generate_series(1, 500) g`);
    const received = await consumer.until((r) => r.length >= 3);
    expect(received.map((r) => r.changes.length)).toEqual([3000, 2, 500]);
    expect(received[0]!.changes.map((c) => after(c)?.line)).toEqual(Array.from({ length: 3000 }, (_, i) => i + 1));
    expect(received[1]!.changes.map((c) => after(c)?.line)).toEqual([1, 2]);
    expect(received[2]!.changes.map((c) => after(c)?.line)).toEqual(Array.from({ length: 500 }, (_, i) => i + 1));
    expect(received.map((r) => after(r.changes[0]!)?.invoice_id)).toEqual([900, 901, 902]);
  });

  it('hands a non-transactional logical message to onMessage at once, with its walStart', async () => {
    const seen: { prefix: string; lsn: string; walStart: string }[] = [];
    const { consumer } = await capture('nontx', ['public.invoice_line'], { messages: true, onMessage: (message, walStart) => seen.push({ prefix: message.prefix, lsn: message.lsn, walStart }) });
    const rows = await db.query<{ lsn: string }>(`SELECT pg_logical_emit_message(false, 'ea-test', 'hello')::text AS lsn`);
    await db.query(`INSERT INTO public.invoice_line VALUES (950, 1, 1)`);
    await consumer.until((r) => r.length >= 1);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.prefix).toBe('ea-test');
    expect(seen[0]!.lsn).toBe(rows[0]!.lsn);
    // The XLogData walStart of a logical message is the message's own LSN.
    expect(seen[0]!.walStart).toBe(rows[0]!.lsn);
  });

  it('speaks protocol version 1 when asked (no streaming)', async () => {
    const { consumer } = await capture('proto1', ['public.invoice_line'], { protocolVersion: 1, streaming: false });
    await db.query(`INSERT INTO public.invoice_line VALUES (500, 1, 5.00)`);
    const received = await consumer.until((r) => r.length >= 1);
    expect(received[0]?.changes[0]).toMatchObject({ op: 'insert', after: { invoice_id: 500, line: 1, amount: '5.00' } });
  });
});
