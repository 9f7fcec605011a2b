// Whether a streamed row lies at or before a resumed snapshot's `lastKey` must follow the table's
// key order as PostgreSQL sorts it (the chunk reader's ORDER BY): integer keys are compared in the
// process, every other key type by PostgreSQL. Checked against the order of a real ORDER BY.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { describeTable, hasIntegerKey, keyAtOrBefore, type SnapshotTable } from '../../src/source/snapshot/index.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';

describe('keyAtOrBefore follows the table key order', () => {
  let db: TestDatabase;
  let client: pg.Client;
  beforeAll(async () => {
    db = await createTestDatabase(inject('postgres'), 'snapshot_key_order');
    client = new pg.Client(db.connectionConfig());
    await client.connect();
    await client.query(`CREATE TABLE public.txt (region text NOT NULL, n numeric NOT NULL, PRIMARY KEY (region, n))`);
    await client.query(`INSERT INTO public.txt VALUES ('a', 2), ('a', 10), ('B', 1), ('b', 1), ('é', 3), ('z', 0.5)`);
    await client.query(`CREATE TABLE public.ints (a int8 NOT NULL, b int4 NOT NULL, PRIMARY KEY (a, b))`);
    await client.query(`INSERT INTO public.ints VALUES (9007199254740993, 1), (2, 30), (2, 4), (-5, 7)`);
  });
  afterAll(async () => {
    await client?.end().catch(() => undefined);
    await db?.drop();
  });

  async function check(t: SnapshotTable, table: string, decode: (r: Record<string, string>) => Record<string, unknown>): Promise<void> {
    // Text form of each key, in PostgreSQL's ORDER BY order (of the columns, not of their text aliases).
    const text = await client.query<Record<string, string>>({ text: `SELECT ${t.keyColumns.map((c) => `t.${c}::text AS ${c}`).join(', ')} FROM ${table} t ORDER BY ${t.keyColumns.map((c) => `t.${c}`).join(', ')}` });
    const ordered = text.rows;
    for (let i = 0; i < ordered.length; i++) {
      const lastKey = t.keyColumns.map((c) => ordered[i]![c]!);
      for (let j = 0; j < ordered.length; j++) {
        expect(await keyAtOrBefore(async () => client, t, decode(ordered[j]!), lastKey), `${JSON.stringify(ordered[j])} <= ${JSON.stringify(lastKey)}`).toBe(j <= i);
      }
    }
  }

  it('text and numeric keys: compared by PostgreSQL (collation, numeric order)', async () => {
    const t = await describeTable(client, 'public.txt');
    expect(hasIntegerKey(t)).toBe(false);
    await check(t, 'public.txt', (r) => ({ region: r['region'], n: r['n'] }));
  });

  it('integer keys (int8 beyond 2^53 included): compared in the process, the same order', async () => {
    const t = await describeTable(client, 'public.ints');
    expect(hasIntegerKey(t)).toBe(true);
    await check(t, 'public.ints', (r) => ({ a: BigInt(r['a']!), b: Number(r['b']) }));
  });
});
