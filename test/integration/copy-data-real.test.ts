// CopyData read off the socket in place (src/source/copy-data.ts) against PostgreSQL 17: a COPY's
// rows and a replication stream's messages arrive whole and in order — rows over several socket
// reads included — pg's client never sees a CopyData message (the fast path is in use, not the
// fallback), and the connection answers queries afterwards, also after a COPY that failed.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { createPostgresSource, type PostgresSource } from '../../src/source/index.js';
import { setupCapture } from '../../src/source/setup.js';
import { copyOut } from '../../src/source/snapshot/copy.js';
import type { InsertChange } from '../../src/source/types.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { collectTransactions } from '../support/collect-transactions.js';

/** Counts the CopyData messages pg's connections emit while `run` runs. */
async function pgCopyDataEvents<T>(run: () => Promise<T>): Promise<{ result: T; events: number }> {
  let events = 0;
  const prototype = (pg as unknown as { Connection: { prototype: { emit(name: string, ...args: unknown[]): boolean } } }).Connection.prototype;
  const emit = prototype.emit;
  const spy = vi.spyOn(prototype, 'emit').mockImplementation(function (this: unknown, name: string, ...args: unknown[]) {
    if (name === 'copyData') events += 1;
    return emit.call(this, name, ...args);
  });
  try {
    return { result: await run(), events };
  } finally {
    spy.mockRestore();
  }
}

const BIG = 200_000; // characters: a row over several 64 KiB socket reads

describe('CopyData off the socket (PostgreSQL 17)', () => {
  let db: TestDatabase;
  let client: pg.Client;
  const sources: PostgresSource[] = [];

  beforeAll(async () => {
    db = await createTestDatabase(inject('postgres'), 'copy_data_real');
    await db.query(`
      CREATE TABLE public.doc (id int PRIMARY KEY, title text, body text);
      INSERT INTO public.doc SELECT g, 'title ' || g || E'\\ttab\\\\slash', CASE WHEN g % 500 = 0 THEN repeat('x', ${BIG}) ELSE NULL END
        FROM generate_series(1, 5000) g;`);
    client = new pg.Client(db.connectionConfig());
    await client.connect();
  });

  afterAll(async () => {
    for (const s of sources) await s.close();
    await client?.end();
    await db?.drop();
  });

  it('a COPY: every row, in order, pg sees no CopyData, and the connection goes on', async () => {
    const { result: rows, events } = await pgCopyDataEvents(async () => {
      const all: (string | null)[][] = [];
      for await (const batch of copyOut(client, 'COPY (SELECT id, title, body FROM public.doc ORDER BY id) TO STDOUT', { batchRows: 256 })) all.push(...batch);
      return all;
    });
    expect(events).toBe(0);
    expect(rows).toHaveLength(5000);
    rows.forEach((row, i) => {
      const id = i + 1;
      expect(row[0]).toBe(String(id));
      expect(row[1]).toBe(`title ${id}\ttab\\slash`);
      expect(row[2]).toBe(id % 500 === 0 ? 'x'.repeat(BIG) : null);
    });
    expect((await client.query('SELECT 41 + 1 AS n')).rows[0]).toEqual({ n: 42 });
  });

  it('a COPY that fails half way rejects with the server error, and the connection goes on', async () => {
    const read = async () => {
      let n = 0;
      for await (const batch of copyOut(client, 'COPY (SELECT 1 / (g - 3000) FROM generate_series(1, 5000) g) TO STDOUT', { batchRows: 100 })) n += batch.length;
      return n;
    };
    await expect(read()).rejects.toThrow(/division by zero/);
    expect((await client.query('SELECT 2 AS n')).rows[0]).toEqual({ n: 2 });
  });

  it('a replication stream: every transaction, whole, pg sees no CopyData', async () => {
    const slot = 'copy_data_real';
    await setupCapture({ connection: db.connectionConfig(), publication: 'pub_copy_data', slot, tables: ['public.doc'] });
    const source = createPostgresSource({ connection: db.connectionConfig(), slot, publication: 'pub_copy_data', tables: ['public.doc'], statusIntervalMs: 1_000 });
    sources.push(source);
    const { result: received, events } = await pgCopyDataEvents(async () => {
      await source.start();
      const consumer = collectTransactions(source, { acknowledge: true });
      for (let i = 0; i < 50; i++) {
        await db.query(`INSERT INTO public.doc SELECT 10000 + ${i} * 10 + g, 'stream ' || g, CASE WHEN g = 3 THEN repeat('y', ${BIG}) END FROM generate_series(1, 5) g`);
      }
      return consumer.until(50);
    });
    expect(events).toBe(0);
    expect(received).toHaveLength(50);
    received.forEach((r, i) => {
      const inserts = r.changes as InsertChange[];
      expect(inserts.map((c) => c.after.id)).toEqual([1, 2, 3, 4, 5].map((g) => 10000 + i * 10 + g));
      expect(inserts[2]!.after.body).toBe('y'.repeat(BIG));
    });
  });
});
