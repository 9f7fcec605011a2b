// Publication row filters and column lists (PostgreSQL 15+) apply to snapshot reads: the stream
// carries only rows that pass the publication's WHERE and only the listed columns, so the initial
// snapshot (COPY and cursor) and incremental chunks must read exactly those — never a row or a
// column the stream would not. Checked against a real publication
// `FOR TABLE public.doc (region, id, status, amount) WHERE (region = 'eu' AND id >= 10)`
// and against what the stream itself delivers for rows inserted later.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { createPostgresSource, type PostgresSource } from '../../src/source/index.js';
import {
  createIncrementalSnapshot, createMemoryProgressStore, createSlotWithSnapshot, newSnapshotProgress, readInitialSnapshot,
  type IncrementalSnapshot, type SnapshotBatch,
} from '../../src/source/snapshot/index.js';
import type { Change, SnapshotRecord } from '../../src/source/types.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { dropRole } from '../support/roles.js';

const TABLE = 'public.doc';
const PUBLISHED = ['region', 'id', 'status', 'amount'];

describe('publication row filter and column list in snapshot reads', () => {
  let db: TestDatabase;
  let role: string;
  let capture: pg.ClientConfig;
  const sources: PostgresSource[] = [];
  const snapshots: IncrementalSnapshot[] = [];
  const closers: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    db = await createTestDatabase(inject('postgres'), 'snapshot_publication');
    role = `cap_${db.database}`.slice(0, 63);
    await db.query(`CREATE ROLE ${role} LOGIN REPLICATION PASSWORD '${inject('postgres').password}'`);
    capture = db.connectionConfig({ user: role });
    // Composite key: the row filter may only use replica identity columns when updates and deletes are published.
    await db.query(`CREATE TABLE ${TABLE} (region text NOT NULL, id int NOT NULL, status text NOT NULL, amount numeric NOT NULL, secret text, note text, PRIMARY KEY (region, id))`);
    await db.query(`INSERT INTO ${TABLE} SELECT r, i, 'open', i, 'secret-' || i, 'note' FROM unnest(ARRAY['eu', 'us']) r, generate_series(1, 60) i`);
    await db.query(`ANALYZE ${TABLE}`);
    await db.query(`GRANT SELECT ON ${TABLE} TO ${role}`);
    await db.query(`CREATE PUBLICATION pub_doc FOR TABLE ${TABLE} (region, id, status, amount) WHERE (region = 'eu' AND id >= 10)`);
  });

  afterAll(async () => {
    for (const s of snapshots) await s.close();
    for (const s of sources) await s.close();
    for (const c of closers) await c();
    await db?.drop();
    await dropRole(role);
  });

  async function collect(batches: AsyncIterable<SnapshotBatch>): Promise<SnapshotRecord[]> {
    const out: SnapshotRecord[] = [];
    for await (const b of batches) out.push(...b.records);
    return out;
  }

  const expectedIds = Array.from({ length: 51 }, (_, i) => i + 10); // eu, id 10..60

  it('the initial snapshot (COPY and cursor) holds only rows passing the filter, with only the listed columns — as the stream carries them', async () => {
    const slot = await createSlotWithSnapshot({ connection: capture, slot: 'slot_doc_initial' });
    closers.push(async () => {
      await slot.close();
      await db.query(`SELECT pg_drop_replication_slot('slot_doc_initial')`).catch(() => undefined);
    });
    const options = { connection: capture, snapshotName: slot.snapshotName, tables: [TABLE], snapshotGeneration: '1', batchRows: 7, publications: ['pub_doc'] };
    const byCopy = await collect(readInitialSnapshot({ ...options, method: 'copy' }));
    const byCursor = await collect(readInitialSnapshot({ ...options, method: 'cursor' }));
    // Without the publication, everything would be read: the filter is what makes the difference.
    const unfiltered = await collect(readInitialSnapshot({ ...options, publications: [] }));
    await slot.close();
    expect(unfiltered).toHaveLength(120);
    expect(Object.keys(unfiltered[0]!.change.after)).toEqual(['region', 'id', 'status', 'amount', 'secret', 'note']);

    for (const records of [byCopy, byCursor]) {
      expect(records.map((r) => r.change.after['id'])).toEqual(expectedIds);
      expect(new Set(records.map((r) => r.change.after['region']))).toEqual(new Set(['eu']));
      for (const r of records) expect(Object.keys(r.change.after)).toEqual(PUBLISHED);
      expect(records[0]!.change.key).toEqual({ region: 'eu', id: 10 });
    }

    // The stream, for rows inserted after the slot: the same columns, the same filter.
    const source = createPostgresSource({ connection: capture, slot: 'slot_doc_initial', publication: 'pub_doc', tables: [TABLE], statusIntervalMs: 1_000 });
    sources.push(source);
    await source.start();
    await db.query(`INSERT INTO ${TABLE} VALUES ('eu', 100, 'open', 100, 's', 'n'), ('us', 100, 'open', 100, 's', 'n'), ('eu', 0, 'open', 0, 's', 'n')`);
    await db.query(`SELECT pg_logical_emit_message(true, 'test.end.doc', '')`);
    const streamed: Change[] = [];
    const reading = (async () => {
      for await (const tx of source.transactions()) {
        const changes = await tx.toArray();
        streamed.push(...changes);
        source.acknowledge(tx);
        await tx.release();
        if (changes.some((c) => c.op === 'message' && c.prefix === 'test.end.doc')) return;
      }
    })();
    await vi.waitFor(() => expect(streamed.some((c) => c.op === 'message')).toBe(true), { timeout: 30_000, interval: 50 });
    await reading;
    const inserts = streamed.filter((c) => c.op === 'insert');
    expect(inserts).toHaveLength(1);
    const after = inserts[0]!.op === 'insert' ? inserts[0]!.after : {};
    expect(after).toMatchObject({ region: 'eu', id: 100, status: 'open' });
    expect(Object.keys(after)).toEqual(Object.keys(byCopy[0]!.change.after));
    expect(typeof after['amount']).toBe(typeof byCopy[0]!.change.after['amount']);
    await source.close();
  });

  it('incremental chunks (and their maximum key) read only rows passing the filter, with only the listed columns', async () => {
    await db.query(`DELETE FROM ${TABLE} WHERE id >= 100 OR id = 0`);
    const slot = await createSlotWithSnapshot({ connection: capture, slot: 'slot_doc_incr' });
    await slot.close();
    closers.push(async () => {
      await db.query(`SELECT pg_drop_replication_slot('slot_doc_incr')`).catch(() => undefined);
    });
    const source = createPostgresSource({ connection: capture, slot: 'slot_doc_incr', publication: 'pub_doc', tables: [TABLE], statusIntervalMs: 1_000 });
    sources.push(source);
    await source.start();
    const store = createMemoryProgressStore();
    const snapshot = createIncrementalSnapshot({
      connection: capture, store, chunkSize: 8, publications: ['pub_doc'],
      progress: newSnapshotProgress({ generation: '2', kind: 'ad_hoc', mode: 'ad_hoc', tables: [TABLE], reason: 'test' }),
    });
    snapshots.push(snapshot);
    const reads: SnapshotRecord[] = [];
    let failed: unknown = null;
    const driving = (async () => {
      try {
        for await (const tx of source.transactions()) {
          const changes = await tx.toArray();
          for (const out of snapshot.window.accept(tx, changes)) {
            if (out.kind === 'snapshot') reads.push(out.record);
            else if (out.kind === 'chunk-complete') await snapshot.chunkDurable(out.chunk);
          }
          source.acknowledge(tx);
          await tx.release();
          if (changes.some((c) => c.op === 'message' && c.prefix === 'test.end.incr')) return;
        }
      } catch (error) {
        failed = error;
      }
    })();
    const final = await snapshot.run();
    await db.query(`SELECT pg_logical_emit_message(true, 'test.end.incr', '')`);
    await driving;
    expect(failed).toBeNull();
    expect(final.tables[0]).toMatchObject({ status: 'done', rowsDone: expectedIds.length, maxKey: ['eu', '60'] });
    expect(reads.map((r) => r.change.after['id'])).toEqual(expectedIds);
    for (const r of reads) {
      expect(Object.keys(r.change.after)).toEqual(PUBLISHED);
      expect(r.change.after['region']).toBe('eu');
    }
  });
});
