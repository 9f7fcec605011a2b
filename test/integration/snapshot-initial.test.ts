// Initial snapshot at a slot's exported snapshot, as a least-privilege capture role
// (LOGIN REPLICATION + SELECT): rows committed before the slot are snapshot records, rows
// committed after are not — they arrive through the stream from consistent_point, which
// is checked end to end with the project's replication reader (no gap, no overlap).
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import type { CommittedTransaction } from '../../src/buffer/index.js';
import { createPostgresSource, type PostgresSource } from '../../src/source/index.js';
import { setupCapture } from '../../src/source/setup.js';
import {
  createSlotWithSnapshot, readInitialSnapshot, snapshotRecords, type ExportedSnapshotSlot, type SnapshotBatch,
} from '../../src/source/snapshot/index.js';
import type { Change, SnapshotRecord } from '../../src/source/types.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { dropRole } from '../support/roles.js';

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

describe('initial snapshot at the exported snapshot (PostgreSQL 17, capture role)', () => {
  let db: TestDatabase;
  let role: string;
  let capture: pg.ClientConfig;
  const slots: ExportedSnapshotSlot[] = [];
  const sources: PostgresSource[] = [];

  beforeAll(async () => {
    db = await createTestDatabase(inject('postgres'), 'snapshot_initial');
    role = `cap_${db.database}`.slice(0, 63);
    await db.query(`CREATE ROLE ${role} LOGIN REPLICATION PASSWORD '${inject('postgres').password}'`);
    await db.query(`
      CREATE TYPE public.status AS ENUM ('draft', 'issued');
      CREATE DOMAIN public.money2 AS numeric(12,2);
      CREATE TABLE public.invoice (
        id int PRIMARY KEY, big bigint, total public.money2, note text, raw bytea, doc jsonb,
        at timestamptz, day date, tags text[], nums int[], status public.status, flag boolean, ratio float8,
        gen int GENERATED ALWAYS AS (id * 2) STORED
      );
      CREATE TABLE public.line (invoice_id int NOT NULL, line int NOT NULL, amount numeric(12,2), PRIMARY KEY (invoice_id, line));
      CREATE TABLE public.empty (id int PRIMARY KEY);
    `);
    await db.query(`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${role}`);
    capture = db.connectionConfig({ user: role });
  });

  afterAll(async () => {
    for (const s of sources) await s.close();
    for (const s of slots) await s.close();
    await db?.drop();
    await dropRole(role);
  });

  const INSERT_INVOICE = `INSERT INTO public.invoice (id, big, total, note, raw, doc, at, day, tags, nums, status, flag, ratio) VALUES
    ($1, 9007199254740993, 12.50, E'tab\\there\\nnewline \\\\ back', '\\x00ff0a09'::bytea, '{"a":[1,2],"b":"x\\ty"}',
     '2024-03-01 10:00:00.123456+01', '2024-03-01', ARRAY['a b', 'c"d', NULL, E'e\\tf'], ARRAY[1,2,3], 'issued', true, 0.1),
    ($2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`;

  it('reads rows committed before the slot (COPY and cursor alike, typed like streamed values); later rows come only from the stream', async () => {
    await db.query(INSERT_INVOICE, [1, 2]);
    await db.query(`INSERT INTO public.line SELECT i / 10, i % 10, i FROM generate_series(10, 2509) i`);
    await setupCapture({ connection: db.connectionConfig(), publication: 'pub_initial', slot: 'unused', tables: ['public.invoice', 'public.line', 'public.empty'], createSlot: false });

    const slot = await createSlotWithSnapshot({ connection: capture, slot: 'snap_initial' });
    slots.push(slot);
    expect(slot.consistentPoint).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
    // PostgreSQL 17: a failover slot by default (docs/failover.md), exported snapshot and all.
    expect(await db.query(`SELECT failover FROM pg_replication_slots WHERE slot_name = 'snap_initial'`)).toEqual([{ failover: true }]);

    // Committed after the slot: must not be in the snapshot.
    await db.query(INSERT_INVOICE, [3, 4]);
    await db.query(`UPDATE public.invoice SET note = 'changed' WHERE id = 1`);
    await db.query(`DELETE FROM public.line WHERE invoice_id = 1`);
    await db.query(`SELECT pg_logical_emit_message(true, 'test.end', 'end')`);

    const options = { connection: capture, snapshotName: slot.snapshotName, tables: ['public.invoice', 'public.line', 'public.empty'], snapshotGeneration: '1', batchRows: 500 };
    const byCopy = await collect(readInitialSnapshot({ ...options, method: 'copy' }));
    const byCursor = await collect(readInitialSnapshot({ ...options, method: 'cursor', parallelism: 3 }));
    const records = (bs: SnapshotBatch[]) => bs.flatMap((b) => b.records);
    const sortByTable = (rs: readonly SnapshotRecord[]) => [...rs].sort((a, b) => a.table.localeCompare(b.table));
    expect(sortByTable(records(byCursor))).toEqual(sortByTable(records(byCopy)));

    const recs = records(byCopy);
    const invoices = recs.filter((r) => r.table === 'public.invoice');
    expect(invoices.map((r) => r.change.key)).toEqual([{ id: 1 }, { id: 2 }]);
    const lines = recs.filter((r) => r.table === 'public.line');
    expect(lines).toHaveLength(2500);
    // Primary-key order on a composite key.
    const keys = lines.map((r) => [r.change.key.invoice_id as number, r.change.key.line as number]);
    expect(keys).toEqual([...keys].sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!));
    expect(recs.some((r) => r.table === 'public.empty')).toBe(false);
    const lastLine = byCopy.filter((b) => b.table === 'public.line' && b.tableDone)[0];
    expect(lastLine).toMatchObject({ rowsDone: 2500, lastKey: ['250', '9'] });

    // Snapshot records are distinguishable from changes.
    expect(invoices[0]).toMatchObject({ kind: 'snapshot', snapshotGeneration: '1', table: 'public.invoice', change: { op: 'read', snapshotGeneration: '1' } });
    expect(invoices[0]!.change.after).toMatchObject({ id: 1, big: 9007199254740993n, total: '12.50', note: 'tab\there\nnewline \\ back', doc: { a: [1, 2], b: 'x\ty' }, at: '2024-03-01T09:00:00.123456Z', day: '2024-03-01', tags: ['a b', 'c"d', null, 'e\tf'], nums: [1, 2, 3], status: 'issued', flag: true, ratio: 0.1 });
    expect(invoices[0]!.change.after).not.toHaveProperty('gen');
    expect((invoices[0]!.change.after.raw as Buffer).equals(Buffer.from([0, 255, 10, 9]))).toBe(true);
    expect(invoices[1]!.change.after).toMatchObject({ id: 2, big: null, note: null, raw: null, doc: null, tags: null });

    await slot.close();

    // The stream from consistent_point has exactly the later changes.
    const source = createPostgresSource({ connection: capture, slot: 'snap_initial', publication: 'pub_initial', tables: ['public.invoice', 'public.line', 'public.empty'], statusIntervalMs: 1_000 });
    sources.push(source);
    const changes: Change[] = [];
    const txs: CommittedTransaction[] = [];
    const done = (async () => {
      for await (const tx of source.transactions()) {
        txs.push(tx);
        changes.push(...(await tx.toArray()));
        source.acknowledge(tx);
        await tx.release();
        if (changes.some((c) => c.op === 'message' && c.prefix === 'test.end')) return;
      }
    })();
    await vi.waitFor(() => {
      if (!changes.some((c) => c.op === 'message' && c.prefix === 'test.end')) throw new Error(`waiting for the end marker, ${changes.length} changes so far`);
    }, { timeout: 30_000, interval: 25 });
    await done;
    const rowChanges = changes.filter((c) => c.op !== 'message');
    expect(rowChanges.map((c) => [c.op, c.op === 'insert' || c.op === 'update' || c.op === 'delete' ? c.key : null])).toEqual([
      ['insert', { id: 3 }], ['insert', { id: 4 }], ['update', { id: 1 }],
      ...Array.from({ length: 10 }, (_, i) => ['delete', { invoice_id: 1, line: i }]),
    ]);
    // Same value typing in the stream as in the snapshot (row 3 has row 1's values).
    const streamed = rowChanges[0]!;
    expect(streamed.op).toBe('insert');
    const { id: _a, ...snapValues } = invoices[0]!.change.after;
    const { id: _b, ...streamValues } = (streamed as { after: Record<string, unknown> }).after;
    expect(streamValues).toEqual(snapValues);
  });

  it('stops reading and closes its connections when the consumer stops early (COPY and cursor)', async () => {
    const slot = await createSlotWithSnapshot({ connection: capture, slot: 'snap_abandon' });
    slots.push(slot);
    for (const method of ['copy', 'cursor'] as const) {
      let batches = 0;
      for await (const batch of readInitialSnapshot({ connection: capture, snapshotName: slot.snapshotName, tables: ['public.line', 'public.invoice'], snapshotGeneration: '1', method, batchRows: 100, parallelism: 2 })) {
        expect(batch.records.length).toBeLessThanOrEqual(100);
        if (++batches === 3) break;
      }
      await vi.waitFor(async () => {
        const open = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid() AND query NOT LIKE 'CREATE_REPLICATION_SLOT%'`, [role]);
        if (open[0]!.n !== 0) throw new Error(`${open[0]!.n} snapshot connection(s) still open`);
      }, { timeout: 10_000, interval: 50 });
    }
    await slot.close();
  });

  it('fails loudly when the exported snapshot is gone (its replication connection closed)', async () => {
    const slot = await createSlotWithSnapshot({ connection: capture, slot: 'snap_gone' });
    slots.push(slot);
    await slot.close();
    await expect(collect(snapshotRecords(readInitialSnapshot({ connection: capture, snapshotName: slot.snapshotName, tables: ['public.invoice'], snapshotGeneration: '1' }))))
      .rejects.toMatchObject({ code: 'SNAPSHOT_IMPORT_FAILED' });
  });
});
