// Real pgoutput bytes from PostgreSQL 17 (through pg_logical_slot_get_binary_changes, whose
// output functions run in this test's session, so its TimeZone applies) decoded by
// createPgoutputDecoder and grouped by the transaction buffer.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTransactionBuffer, type CommittedTransaction, type TransactionBuffer } from '../../src/buffer/index.js';
import { createPgoutputDecoder } from '../../src/source/pgoutput/decoder.js';
import type { PgoutputMessage } from '../../src/source/pgoutput/messages.js';
import { UNCHANGED_TOAST, type Change, type DeleteChange, type InsertChange, type UpdateChange } from '../../src/source/types.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';

let db: TestDatabase;
let client: pg.Client;
let spillDir: string;
const buffers: TransactionBuffer[] = [];

beforeAll(async () => {
  db = await createTestDatabase(inject('postgres'), 'pgoutput_real');
  spillDir = await mkdtemp(join(tmpdir(), 'pgoutput-real-'));
  // +05:30: the server prints timestamptz in this zone; the decoder must normalise to UTC.
  client = new pg.Client({ ...db.connectionConfig(), options: '-c TimeZone=Asia/Kolkata -c logical_decoding_work_mem=64kB' });
  await client.connect();
  await client.query(`
    CREATE TYPE status AS ENUM ('draft', 'paid');
    CREATE DOMAIN positive_numeric AS numeric CHECK (VALUE > 0);
    CREATE TABLE t (
      id int8 PRIMARY KEY, i2 int2, i4 int4, o oid, n numeric, nn numeric, f4 float4, f8 float8, b bool,
      tx text, vc varchar(10), bp char(3), nm name, u uuid, st status, sts status[], j json, jb jsonb, by bytea,
      d date, dinf date, ts timestamp, tstz timestamptz, tstz_old timestamptz, tm time, iv interval,
      ia int4[], ta text[], na numeric[], tza timestamptz[], i8a int8[], dom positive_numeric, big text
    );
    -- EXTERNAL: stored out of line uncompressed, so an update that leaves it alone sends 'u'.
    ALTER TABLE t ALTER COLUMN big SET STORAGE EXTERNAL;
    CREATE PUBLICATION pub FOR TABLE t;`);
  await client.query(`SELECT pg_create_logical_replication_slot('s', 'pgoutput')`);
}, 120_000);

afterAll(async () => {
  for (const b of buffers) await b.close();
  await client?.end();
  await db?.drop();
  if (spillDir) await rm(spillDir, { recursive: true, force: true });
});

async function capture(): Promise<{ transactions: CommittedTransaction[]; messages: PgoutputMessage[] }> {
  const { rows } = await client.query<{ lsn: string; data: Buffer }>(
    `SELECT lsn::text, data FROM pg_logical_slot_get_binary_changes('s', NULL, NULL,
       'proto_version', '2', 'publication_names', 'pub', 'messages', 'true', 'streaming', 'on')`,
  );
  const decoder = createPgoutputDecoder();
  const buffer = createTransactionBuffer({
    spillDir, memoryLimitBytes: 16 * 1024,
    makePosition: (commitLsn, xid) => ({ systemId: '0', timeline: 1, slot: 's', commitLsn, xid, checkpoint: `${commitLsn}:${xid}` }),
  });
  const transactions: CommittedTransaction[] = [];
  const messages: PgoutputMessage[] = [];
  for (const row of rows) {
    const message = decoder.decode(row.data);
    messages.push(message);
    const out = await buffer.push(message, row.lsn);
    if (out?.kind === 'transaction') transactions.push(out);
  }
  buffers.push(buffer);
  return { transactions, messages };
}

describe('pgoutput from PostgreSQL 17', () => {
  it('decodes every column type of a real row (session TimeZone +05:30)', async () => {
    const big = 'x'.repeat(10_000) + 'é'.repeat(5000); // TOASTed out of line
    await client.query(`INSERT INTO t VALUES (
      9223372036854775807, -32768, 2147483647, 4294967295, 12345678901234567890.000000000000000001, 'NaN', 1.5, 'Infinity', true,
      'quote '' and "double" and \\ backslash', 'varchar', 'ab', 'nm', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'paid', '{draft,paid}',
      '{"a": [1, "x", null]}', '{"b": {"c": true}}', '\\x00ff10', '2024-02-29', 'infinity', '2024-01-02 03:04:05.1',
      '2024-01-02 03:04:05.123456+00', '1900-01-01 00:00:00+00', '10:00:00.5', '1 day 02:00:00',
      '{{1,2},{3,NULL}}', '{"a b","c\\"d",NULL,"NULL",e}', '{1.10,NaN}', '{"2024-06-30 23:59:59.999999+00"}', '{-9223372036854775808}',
      42.5, $1)`, [big]);
    await client.query(`UPDATE t SET i4 = 1 WHERE id = 9223372036854775807`);
    await client.query(`SELECT pg_logical_emit_message(false, 'wm', 'low')`);
    await client.query(`DELETE FROM t`);
    const { transactions, messages } = await capture();
    expect(messages.filter((m) => m.tag === 'message')).toMatchObject([{ transactional: false, prefix: 'wm', content: Buffer.from('low') }]);
    expect(messages.filter((m) => m.tag === 'type').map((m) => m.tag === 'type' && m.name).sort()).toEqual(['_status', 'numeric', 'status']);
    expect(transactions).toHaveLength(3);
    const [ins] = (await transactions[0]!.toArray()) as InsertChange[];
    expect(ins!.after).toStrictEqual({
      id: 9223372036854775807n, i2: -32768, i4: 2147483647, o: 4294967295, n: '12345678901234567890.000000000000000001', nn: 'NaN',
      f4: 1.5, f8: Infinity, b: true, tx: 'quote \' and "double" and \\ backslash', vc: 'varchar', bp: 'ab ', nm: 'nm',
      u: 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', st: 'paid', sts: ['draft', 'paid'], j: { a: [1, 'x', null] }, jb: { b: { c: true } },
      by: Buffer.from([0, 255, 16]), d: '2024-02-29', dinf: 'infinity', ts: '2024-01-02T03:04:05.100000',
      tstz: '2024-01-02T03:04:05.123456Z',
      // Asia/Kolkata in 1900 was local mean time +05:21:10: PostgreSQL prints the offset with seconds.
      tstz_old: '1900-01-01T00:00:00.000000Z',
      tm: '10:00:00.5', iv: '1 day 02:00:00', ia: [[1, 2], [3, null]], ta: ['a b', 'c"d', null, 'NULL', 'e'], na: ['1.10', 'NaN'],
      tza: ['2024-06-30T23:59:59.999999Z'], i8a: [-9223372036854775808n], dom: '42.5', big,
    });
    expect(ins!.key).toEqual({ id: 9223372036854775807n });
    const [upd] = (await transactions[1]!.toArray()) as UpdateChange[];
    expect(upd!.after.big === UNCHANGED_TOAST).toBe(true);
    expect(upd!.after.i4).toBe(1);
    expect(upd!.before).toBeNull();
    const [del] = (await transactions[2]!.toArray()) as DeleteChange[];
    expect(del!.before).toEqual({ id: 9223372036854775807n });
    const tstzRaw = messages.find((m) => m.tag === 'insert');
    expect(tstzRaw?.tag === 'insert' && tstzRaw.newTuple[22]).toEqual({ kind: 'text', value: '2024-01-02 08:34:05.123456+05:30' });
    expect(tstzRaw?.tag === 'insert' && tstzRaw.newTuple[23]).toEqual({ kind: 'text', value: '1900-01-01 05:21:10+05:21:10' });
  });

  it('streams a large transaction (proto v2) and drops a rolled-back subtransaction', async () => {
    await client.query('TRUNCATE t');
    await capture(); // skip the truncate
    await client.query('BEGIN');
    await client.query(`INSERT INTO t (id, tx) SELECT g, repeat('a', 200) FROM generate_series(1, 1000) g`);
    await client.query('SAVEPOINT s1');
    await client.query(`INSERT INTO t (id, tx) SELECT g, 'rolled back' FROM generate_series(1001, 2000) g`);
    await client.query('SAVEPOINT s2');
    await client.query(`INSERT INTO t (id, tx) SELECT g, 'nested, rolled back' FROM generate_series(2001, 2500) g`);
    await client.query('ROLLBACK TO SAVEPOINT s1');
    await client.query('SAVEPOINT s3');
    await client.query(`INSERT INTO t (id, tx) SELECT g, 'kept' FROM generate_series(3001, 3500) g`);
    await client.query('RELEASE SAVEPOINT s3');
    await client.query(`SELECT pg_logical_emit_message(true, 'p', 'in-tx')`);
    await client.query('COMMIT');
    const { transactions, messages } = await capture();
    const tags = new Set(messages.map((m) => m.tag));
    expect(tags.has('stream-start') && tags.has('stream-commit')).toBe(true);
    // ROLLBACK TO s1 (with s2 nested inside) sends one Stream Abort per streamed subtransaction.
    const aborts = messages.filter((m) => m.tag === 'stream-abort');
    expect(aborts).toHaveLength(2);
    expect(aborts.every((a) => a.subXid !== a.xid)).toBe(true);
    expect(transactions).toHaveLength(1);
    const txn = transactions[0]!;
    expect(txn.spilled).toBe(true);
    const changes: Change[] = [];
    for await (const c of txn.changes()) changes.push(c);
    const ids = changes.filter((c): c is InsertChange => c.op === 'insert').map((c) => Number(c.after.id));
    expect(ids).toEqual([...Array.from({ length: 1000 }, (_, i) => i + 1), ...Array.from({ length: 500 }, (_, i) => i + 3001)]);
    expect(changes.at(-1)).toMatchObject({ op: 'message', prefix: 'p', transactional: true });
    expect(txn.changeCount).toBe(1501);
    await txn.release();
  });
});
