import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTransactionBuffer, type CommittedTransaction, type TransactionBuffer, type TransactionBufferOptions } from '../../src/buffer/index.js';
import { ProtocolStateError } from '../../src/errors.js';
import type { PgoutputMessage, RelationColumnMessage, TupleValue } from '../../src/source/pgoutput/messages.js';
import { UNCHANGED_TOAST, type Change, type InsertChange, type RowChange, type SourcePosition } from '../../src/source/types.js';

const T = '2024-05-06T07:08:09.123456Z';
const makePosition = (commitLsn: string, xid: number): SourcePosition => ({
  systemId: '7000000000000000001', timeline: 1, slot: 'test', commitLsn, xid, checkpoint: `test:${commitLsn}:${xid}`,
});
const col = (name: string, typeOid: number, key = false): RelationColumnMessage => ({ flags: key ? 1 : 0, name, typeOid, typeModifier: -1 });
const t = (value: string): TupleValue => ({ kind: 'text', value });

const relation = (xid?: number, extra: RelationColumnMessage[] = []): PgoutputMessage => ({
  tag: 'relation', xid, relationId: 16384, schema: 'public', name: 'item', replicaIdentity: 'default',
  columns: [col('id', 20, true), col('label', 25), ...extra],
});
const insert = (id: number, xid?: number, label = `row ${id}`): PgoutputMessage => ({ tag: 'insert', xid, relationId: 16384, newTuple: [t(String(id)), t(label)] });
const begin = (xid: number): PgoutputMessage => ({ tag: 'begin', finalLsn: '0/100', commitTime: T, xid });
const commit = (lsn: string, end = `${lsn}0`): PgoutputMessage => ({ tag: 'commit', flags: 0, commitLsn: lsn, endLsn: end, commitTime: T });
const sStart = (xid: number, firstSegment = false): PgoutputMessage => ({ tag: 'stream-start', xid, firstSegment });
const sStop: PgoutputMessage = { tag: 'stream-stop' };
const sCommit = (xid: number, lsn: string): PgoutputMessage => ({ tag: 'stream-commit', xid, flags: 0, commitLsn: lsn, endLsn: `${lsn}0`, commitTime: T });
const sAbort = (xid: number, subXid: number): PgoutputMessage => ({ tag: 'stream-abort', xid, subXid });

const ids = (changes: Change[]) => changes.map((c) => (c.op === 'insert' ? Number(c.after.id) : c.op));

let dir: string;
let buffers: TransactionBuffer[];
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tb-test-'));
  buffers = [];
});
afterEach(async () => {
  for (const b of buffers) await b.close();
  await rm(dir, { recursive: true, force: true });
});

function buffer(opts: Partial<TransactionBufferOptions> = {}): TransactionBuffer {
  const b = createTransactionBuffer({ makePosition, spillDir: dir, ...opts });
  buffers.push(b);
  return b;
}

/** Pushes all messages; returns what completed, in order. */
async function feed(b: TransactionBuffer, messages: PgoutputMessage[]) {
  const out = [];
  for (const m of messages) {
    const r = await b.push(m, '0/1');
    if (r !== null) out.push(r);
  }
  return out;
}

async function spillFiles(): Promise<string[]> {
  const found: string[] = [];
  for (const d of await readdir(dir)) found.push(...(await readdir(join(dir, d))).map((f) => `${d}/${f}`));
  return found;
}

describe('transaction buffer: whole transactions', () => {
  it('groups a transaction and emits it at commit with position and metadata', async () => {
    const b = buffer();
    const out = await feed(b, [begin(700), { tag: 'origin', originLsn: '0/5', name: 'upstream' }, relation(), insert(1), insert(2), commit('0/200', '0/230')]);
    expect(out).toHaveLength(1);
    const txn = out[0] as CommittedTransaction;
    expect(txn).toMatchObject({ kind: 'transaction', xid: 700, commitLsn: '0/200', endLsn: '0/230', commitTime: T, origin: 'upstream', changeCount: 2, spilled: false });
    expect(txn.position).toEqual(makePosition('0/200', 700));
    expect(ids(await txn.toArray())).toEqual([1, 2]);
    const streamed: Change[] = [];
    for await (const c of txn.changes()) streamed.push(c);
    expect(ids(streamed)).toEqual([1, 2]);
    expect(b.memoryBytes).toBe(0);
    await txn.release();
    await txn.release();
    await expect(txn.toArray()).rejects.toThrow(/released/);
    await expect((async () => { for await (const _c of txn.changes()) { /* none */ } })()).rejects.toThrow(/released/);
  });

  it('emits transactions in commit order, each with its own changes', async () => {
    const b = buffer();
    const out = await feed(b, [relation(), begin(1), insert(1), commit('0/10'), begin(2), insert(2), insert(3), commit('0/20'), begin(3), commit('0/30')]);
    expect(out.map((o) => (o as CommittedTransaction).xid)).toEqual([1, 2, 3]);
    expect(ids(await (out[1] as CommittedTransaction).toArray())).toEqual([2, 3]);
    expect((out[2] as CommittedTransaction).changeCount).toBe(0);
  });

  it('puts a SchemaChange where the changed Relation message arrived, and none for a repeat', async () => {
    const b = buffer();
    const [first, second] = await feed(b, [
      begin(1), relation(), insert(1), relation(), insert(2), commit('0/10'),
      begin(2), insert(3), relation(undefined, [col('qty', 23)]), { tag: 'insert', relationId: 16384, newTuple: [t('4'), t('x'), t('5')] }, commit('0/20'),
    ]) as CommittedTransaction[];
    expect(ids(await first!.toArray())).toEqual([1, 2]);
    const changes = await second!.toArray();
    expect(ids(changes)).toEqual([3, 'schema', 4]);
    expect(changes[1]).toMatchObject({ op: 'schema', table: 'public.item', added: ['qty'] });
    expect((changes[0] as RowChange).relation.version).toBe(1);
    expect((changes[2] as RowChange).relation.version).toBe(2);
    expect((changes[2] as InsertChange).after).toEqual({ id: 4n, label: 'x', qty: 5 });
  });

  it('truncate, transactional and non-transactional messages', async () => {
    const b = buffer();
    const nonTx = await b.push({ tag: 'message', transactional: false, lsn: '0/50', prefix: 'wm', content: Buffer.from('low') }, '0/48');
    expect(nonTx).toEqual({ kind: 'message', walStart: '0/48', message: { op: 'message', prefix: 'wm', content: Buffer.from('low'), transactional: false, lsn: '0/50' } });
    const [txn] = await feed(b, [begin(5), relation(), { tag: 'truncate', cascade: true, restartIdentity: false, relationIds: [16384] },
      { tag: 'message', transactional: true, lsn: '0/60', prefix: 'p', content: Buffer.from([1]) }, commit('0/70')]) as CommittedTransaction[];
    expect(await txn!.toArray()).toEqual([
      { op: 'truncate', tables: ['public.item'], cascade: true, restartIdentity: false },
      { op: 'message', prefix: 'p', content: Buffer.from([1]), transactional: true, lsn: '0/60' },
    ]);
  });

  it('protocol violations are loud', async () => {
    const b = buffer();
    await b.push(relation(), '0/1');
    await expect(b.push(insert(1), '0/1')).rejects.toThrow(ProtocolStateError);
    await expect(b.push(commit('0/1'), '0/1')).rejects.toThrow(/without Begin/);
    await b.push(begin(1), '0/1');
    await expect(b.push(begin(2), '0/1')).rejects.toThrow(/while xid 1 is open/);
    await expect(b.push({ tag: 'insert', relationId: 999, newTuple: [] }, '0/1')).rejects.toThrow(/before its Relation message/);
    await expect(b.push(insert(1, 55), '0/1')).rejects.toThrow(/outside a Stream Start\/Stop block/);
  });
});

describe('transaction buffer: streamed transactions (proto v2)', () => {
  it('accumulates chunks by top-level xid, interleaved with whole transactions', async () => {
    const b = buffer();
    const out = await feed(b, [
      sStart(100, true), relation(100), insert(1, 100), insert(2, 101), sStop,
      begin(200), relation(), insert(50), commit('0/200'),
      sStart(300, true), insert(60, 300), sStop,
      sStart(100), insert(3, 100), sStop,
      sCommit(300, '0/250'),
      sCommit(100, '0/300'),
    ]) as CommittedTransaction[];
    expect(out.map((o) => [o.xid, o.commitLsn])).toEqual([[200, '0/200'], [300, '0/250'], [100, '0/300']]);
    expect(ids(await out[0]!.toArray())).toEqual([50]);
    expect(ids(await out[1]!.toArray())).toEqual([60]);
    expect(ids(await out[2]!.toArray())).toEqual([1, 2, 3]);
    expect(out[2]!.position).toEqual(makePosition('0/300', 100));
    expect(b.openTransactions).toBe(0);
    expect(b.memoryBytes).toBe(0);
  });

  it('a Stream Abort of a subtransaction removes exactly its changes', async () => {
    const b = buffer();
    const out = await feed(b, [
      sStart(100, true), relation(100), insert(1, 100), insert(2, 101), insert(3, 102), sStop,
      sStart(100), insert(4, 101), insert(5, 100), insert(6, 103), sStop,
      sAbort(100, 101), sAbort(100, 103), sAbort(100, 999),
      sStart(100), insert(7, 102), sStop,
      sCommit(100, '0/300'),
    ]) as CommittedTransaction[];
    const txn = out[0]!;
    expect(ids(await txn.toArray())).toEqual([1, 3, 5, 7]);
    expect(txn.changeCount).toBe(4);
  });

  it('a Stream Abort of the top-level xid drops everything', async () => {
    const b = buffer();
    await feed(b, [sStart(100, true), relation(100), insert(1, 100), insert(2, 101), sStop, sAbort(100, 100)]);
    expect(b.openTransactions).toBe(0);
    expect(b.memoryBytes).toBe(0);
    await expect(b.push(sCommit(100, '0/1'), '0/1')).rejects.toThrow(/never streamed/);
  });

  it('origin inside the stream block belongs to the streamed transaction', async () => {
    const b = buffer();
    const [txn] = await feed(b, [sStart(100, true), { tag: 'origin', originLsn: '0/1', name: 'o1' }, relation(100), insert(1, 100), sStop, sCommit(100, '0/9')]) as CommittedTransaction[];
    expect(txn!.origin).toBe('o1');
  });

  it('a schema change inside an aborted subtransaction goes with it', async () => {
    const b = buffer();
    const [txn] = await feed(b, [
      sStart(100, true), relation(100), insert(1, 100), relation(101, [col('qty', 23)]), sStop, sAbort(100, 101), sCommit(100, '0/9'),
    ]) as CommittedTransaction[];
    expect(ids(await txn!.toArray())).toEqual([1]);
  });
});

describe('transaction buffer: spilling', () => {
  const richRelation: PgoutputMessage = {
    tag: 'relation', relationId: 16500, schema: 'public', name: 'rich', replicaIdentity: 'full',
    columns: [col('id', 20, true), col('blob', 17, true), col('doc', 3802, true), col('tags', 1009, true), col('grid', 1016, true), col('note', 25, true), col('n', 1700, true), col('f', 701, true)],
  };
  const richInsert = (i: number): PgoutputMessage => ({ tag: 'insert', relationId: 16500, newTuple: richTuple(i) });
  const richTuple = (i: number): TupleValue[] => [
      t(String(BigInt(i) + 9007199254740993n)), t(`\\x00ff${(i % 256).toString(16).padStart(2, '0')}`),
      t(JSON.stringify({ i, nested: { list: [1, 'two', null, { three: [true] }], relation: { op: 'x', table: 'y' } }, big: 1.5e300 })),
      t(`{"a,b","c\\"d",NULL,"é${i}"}`), t(`{{${i},NULL},{-9223372036854775808,9223372036854775807}}`),
      i % 3 === 0 ? { kind: 'null' } : t(`ünïcödé ${'x'.repeat(i % 50)}`), t('123456789012345678901234567890.123456789'), t(i % 2 === 0 ? 'NaN' : '-0'),
  ];
  const richUpdate = (i: number): PgoutputMessage => ({
    // The old row lacks the TOASTed value too, so the marker stays in `after` (and `before`).
    tag: 'update', relationId: 16500, oldKind: 'old', oldTuple: richTuple(i).map((v, c) => (c === 1 ? { kind: 'unchanged-toast' } : v)),
    newTuple: [t(String(i)), { kind: 'unchanged-toast' }, t('[]'), t('{}'), t('{}'), { kind: 'null' }, t('0'), t('Infinity')],
  });
  const messages = (xid: number): PgoutputMessage[] => [
    begin(xid), richRelation,
    ...Array.from({ length: 60 }, (_, i) => (i % 4 === 3 ? richUpdate(i) : richInsert(i))),
    { tag: 'delete', relationId: 16500, oldKind: 'old', oldTuple: richTuple(1) },
    { tag: 'message', transactional: true, lsn: '0/77', prefix: 'm', content: Buffer.from([0, 1, 2]) },
    { tag: 'relation', relationId: 16500, schema: 'public', name: 'rich', replicaIdentity: 'default', columns: [col('id', 20, true)] },
    { tag: 'insert', relationId: 16500, newTuple: [t('1')] },
    { tag: 'truncate', cascade: false, restartIdentity: true, relationIds: [16500] },
    commit('0/900'),
  ];

  it('round-trips every value kind exactly (bigint, Buffer, TOAST marker, null, nested arrays, JSON, NaN, -0)', async () => {
    const [inMemory] = await feed(buffer(), messages(1)) as CommittedTransaction[];
    const spilling = buffer({ memoryLimitBytes: 1 });
    const [spilled] = await feed(spilling, messages(1)) as CommittedTransaction[];
    expect(inMemory!.spilled).toBe(false);
    expect(spilled!.spilled).toBe(true);
    expect(spilled!.changeCount).toBe(inMemory!.changeCount);
    expect(spilling.memoryBytes).toBe(0);
    const expected = await inMemory!.toArray();
    const actual = await spilled!.toArray();
    expect(actual).toHaveLength(65);
    expect(actual).toStrictEqual(expected);
    // The TOAST marker survives as the very symbol, relation versions as shared references.
    const upd = actual.find((c) => c.op === 'update');
    expect(upd?.op === 'update' && upd.after.blob).toBe(UNCHANGED_TOAST);
    const rows = actual.filter((c): c is InsertChange => c.op === 'insert');
    expect(rows[0]!.relation).toBe(rows[1]!.relation);
    expect(Object.is(rows[1]!.after.f, -0)).toBe(true);
    // Streaming read gives the same, and can be repeated.
    const again: Change[] = [];
    for await (const c of spilled!.changes()) again.push(c);
    expect(again).toStrictEqual(expected);
    expect(await spillFiles()).toHaveLength(1);
    await spilled!.release();
    await spilled!.release();
    expect(await spillFiles()).toHaveLength(0);
  });

  it('spills the largest open transaction once the limit is exceeded and keeps order', async () => {
    const b = buffer({ memoryLimitBytes: 20_000 });
    const out = await feed(b, [
      sStart(100, true), relation(100), ...Array.from({ length: 50 }, (_, i) => insert(i, i % 2 === 0 ? 100 : 101)), sStop,
      begin(200), insert(1000), commit('0/200'),
      sStart(100), ...Array.from({ length: 50 }, (_, i) => insert(50 + i, 100)), sStop,
      sAbort(100, 101),
      sCommit(100, '0/300'),
    ]) as CommittedTransaction[];
    expect(out[0]).toMatchObject({ xid: 200, spilled: false });
    expect(out[1]).toMatchObject({ xid: 100, spilled: true, changeCount: 75 });
    const expected = [...Array.from({ length: 25 }, (_, i) => i * 2), ...Array.from({ length: 50 }, (_, i) => 50 + i)];
    expect(ids(await out[1]!.toArray())).toEqual(expected);
    expect(b.memoryBytes).toBe(0);
  });

  it('drops the spill file of an aborted streamed transaction, and close() removes unreleased ones', async () => {
    const b = buffer({ memoryLimitBytes: 1 });
    await feed(b, [sStart(100, true), relation(100), insert(1, 100), sStop]);
    expect(await spillFiles()).toHaveLength(1);
    await feed(b, [sAbort(100, 100)]);
    expect(await spillFiles()).toHaveLength(0);
    const [txn] = await feed(b, [begin(5), insert(1), commit('0/5')]) as CommittedTransaction[];
    await feed(b, [begin(6), insert(2)]);
    expect(txn!.spilled).toBe(true);
    expect(await spillFiles()).toHaveLength(2);
    await b.close();
    expect(await readdir(dir)).toEqual([]);
    await expect(b.push(begin(7), '0/1')).rejects.toThrow(/closed/);
  });

  it('value decoding errors: at push in memory, at read-back once spilled', async () => {
    const tsRelation: PgoutputMessage = { tag: 'relation', relationId: 16600, schema: 'public', name: 'ts', replicaIdentity: 'default', columns: [col('id', 20, true), col('at', 1184)] };
    const bad: PgoutputMessage = { tag: 'insert', relationId: 16600, newTuple: [t('1'), t('Tue Jan 02 03:04:05 2024 CET')] };
    const inMemory = buffer();
    await feed(inMemory, [begin(1), tsRelation]);
    await expect(inMemory.push(bad, '0/1')).rejects.toThrow(/DateStyle must be ISO/);
    const spilling = buffer({ memoryLimitBytes: 1 });
    const [txn] = await feed(spilling, [begin(1), tsRelation, { tag: 'insert', relationId: 16600, newTuple: [t('0'), t('2024-01-02 03:04:05+00')] }, bad, commit('0/5')]) as CommittedTransaction[];
    await expect(txn!.toArray()).rejects.toMatchObject({ code: 'VALUE_DECODE_FAILED' });
  });

  it('a repeated first segment restarts the streamed transaction', async () => {
    const b = buffer();
    const [txn] = await feed(b, [sStart(100, true), relation(100), insert(1, 100), sStop, sStart(100, true), insert(2, 100), sStop, sCommit(100, '0/3')]) as CommittedTransaction[];
    expect(ids(await txn!.toArray())).toEqual([2]);
  });
});

describe('transaction buffer: pushNow', () => {
  /** Feeds with pushNow, noting which messages needed a promise. */
  async function feedNow(b: TransactionBuffer, messages: PgoutputMessage[]) {
    const out = [];
    const waited: string[] = [];
    for (const m of messages) {
      let r = b.pushNow(m, '0/1');
      if (r instanceof Promise) {
        waited.push(m.tag);
        r = await r;
      }
      if (r !== null) out.push(r);
    }
    return { out, waited };
  }

  const messages = (): PgoutputMessage[] => [
    relation(), begin(1), insert(1), insert(2), commit('0/A'),
    begin(2), insert(3), { tag: 'truncate', relationIds: [16384], cascade: false, restartIdentity: false }, commit('0/B'),
    { tag: 'message', transactional: false, lsn: '0/C', prefix: 'p', content: Buffer.from('x') },
  ];

  it('gives what push gives, with no promise for rows, Begin and an in-memory Commit', async () => {
    const viaPush = await feed(buffer(), messages());
    const { out, waited } = await feedNow(buffer(), messages());
    expect(out).toHaveLength(viaPush.length);
    for (let i = 0; i < out.length; i++) {
      const a = out[i]!;
      const b = viaPush[i]!;
      expect(a.kind).toBe(b.kind);
      if (a.kind === 'transaction' && b.kind === 'transaction') {
        expect({ ...a.position, commitLsn: a.commitLsn, endLsn: a.endLsn, xid: a.xid }).toEqual({ ...b.position, commitLsn: b.commitLsn, endLsn: b.endLsn, xid: b.xid });
        expect(await a.toArray()).toEqual(await b.toArray());
      } else expect(a).toEqual(b);
    }
    // Only what is not on the hot path goes through the promise-returning path.
    expect(waited).toEqual(['relation', 'truncate', 'message']);
  });

  it('waits for the disk when a transaction spills, and its Commit then waits too', async () => {
    const b = buffer({ memoryLimitBytes: 1 });
    const { out, waited } = await feedNow(b, [relation(), begin(7), insert(1), insert(2), insert(3), commit('0/D')]);
    expect(waited).toContain('insert');
    expect(waited[waited.length - 1]).toBe('commit');
    const tx = out[0] as CommittedTransaction;
    expect(tx.spilled).toBe(true);
    expect(ids(await tx.toArray())).toEqual([1, 2, 3]);
    await tx.release();
  });

  it('is as strict as push about the protocol', () => {
    const b = buffer();
    expect(() => b.pushNow(insert(1), '0/1')).toThrow(ProtocolStateError);
    expect(b.pushNow(begin(1), '0/1')).toBeNull();
    return expect(b.pushNow(begin(2), '0/1')).rejects.toThrow(ProtocolStateError);
  });
});
