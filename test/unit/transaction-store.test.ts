import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTransactionStore, estimateRowBytes, type OpenTransaction, type TransactionStore } from '../../src/buffer/transaction-store.js';
import { createRelationRegistry } from '../../src/source/relations.js';
import type { Change, MessageChange, SourcePosition } from '../../src/source/types.js';

const T = '2024-05-06T07:08:09.123456Z';
const makePosition = (commitLsn: string, xid: number): SourcePosition => ({
  systemId: '7000000000000000001', timeline: 1, slot: 'test', commitLsn, xid, checkpoint: `test:${commitLsn}:${xid}`,
});
const message = (n: number): MessageChange => ({ op: 'message', prefix: 'p', content: Buffer.from(String(n)), transactional: true, lsn: `0/${n}` });
const contents = (changes: Change[]) => changes.map((c) => (c.op === 'message' ? c.content.toString() : c.op));

let dir: string;
let open: OpenTransaction[];
let stores: TransactionStore[];
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'store-test-'));
  open = [];
  stores = [];
});
afterEach(async () => {
  for (const s of stores) await s.close([]);
  await rm(dir, { recursive: true, force: true });
});

function store(limit: number): TransactionStore {
  const s = createTransactionStore({ limit, spillRoot: dir, relations: createRelationRegistry(), makePosition, openTransactions: () => open });
  stores.push(s);
  return s;
}

function openTxn(s: TransactionStore, xid: number, streamed = false): OpenTransaction {
  const txn = s.open(xid, streamed);
  open.push(txn);
  return txn;
}

describe('transaction store: memory accounting', () => {
  it('charges each change its estimate and gives the memory back when the transaction is handed out', async () => {
    const s = store(10_000);
    const txn = openTxn(s, 7);
    expect(s.add(txn, 7, message(1), 100)).toBeUndefined();
    expect(s.add(txn, 7, message(2), 150)).toBeUndefined();
    expect(s.memoryBytes).toBe(250);
    expect(txn).toMatchObject({ bytes: 250, count: 2, spill: null });
    const tx = s.finishInMemory(txn, '0/200', '0/210', T);
    expect(tx).toMatchObject({ kind: 'transaction', xid: 7, commitLsn: '0/200', endLsn: '0/210', changeCount: 2, spilled: false });
    expect(tx!.position).toEqual(makePosition('0/200', 7));
    expect(s.memoryBytes).toBe(0);
    expect(contents(await tx!.toArray())).toEqual(['1', '2']);
  });

  it('estimates a row change from its columns and values', () => {
    const newTuple = [{ kind: 'text' as const, value: 'abcd' }, { kind: 'null' as const }];
    expect(estimateRowBytes({ tag: 'insert', relationId: 1, newTuple })).toBe(300 + 80 + 4 + 80);
    expect(estimateRowBytes({ tag: 'delete', relationId: 1, oldKind: 'old', oldTuple: newTuple })).toBe(300 + 80 + 4 + 80);
  });
});

describe('transaction store: spill decisions', () => {
  it('over the limit, spills the largest open transaction; its later changes go to disk', async () => {
    const s = store(1_000);
    const small = openTxn(s, 1, true);
    const large = openTxn(s, 2, true);
    s.add(small, 1, message(1), 300);
    s.add(large, 2, message(2), 600);
    const wait = s.add(large, 2, message(3), 200);
    expect(wait).toBeInstanceOf(Promise);
    await wait;
    expect(large.spill).not.toBeNull();
    expect(small.spill).toBeNull();
    expect(s.memoryBytes).toBe(300);
    expect(large).toMatchObject({ bytes: 0, changes: [], count: 2 });
    await s.add(large, 2, message(4), 10_000);
    expect(s.memoryBytes).toBe(300);

    const tx = await s.finish(large, '0/300', '0/310', T);
    expect(tx).toMatchObject({ spilled: true, changeCount: 3 });
    expect(contents(await tx.toArray())).toEqual(['2', '3', '4']);
    expect(await readdir(dir)).toHaveLength(1);
    await tx.release();
  });

  it('breaks a tie on size by the order the open transactions are listed in', async () => {
    const s = store(1_000);
    const first = openTxn(s, 1);
    const second = openTxn(s, 2);
    s.add(first, 1, message(1), 501);
    await s.add(second, 2, message(2), 501);
    expect(first.spill).not.toBeNull();
    expect(second.spill).toBeNull();
  });

  it('takes back an aborted subtransaction: from memory, or by skipping it when read from disk', async () => {
    const s = store(1_000);
    const txn = openTxn(s, 10, true);
    s.add(txn, 10, message(1), 100);
    s.add(txn, 11, message(2), 100);
    s.add(txn, 10, message(3), 100);
    s.abortSubtransaction(txn, 11);
    expect(txn).toMatchObject({ count: 2, bytes: 200 });
    expect(s.memoryBytes).toBe(200);

    await s.add(txn, 12, message(4), 900); // spills
    expect(txn.spill).not.toBeNull();
    s.abortSubtransaction(txn, 12);
    const tx = await s.finish(txn, '0/400', '0/410', T);
    expect(tx.changeCount).toBe(2);
    expect(contents(await tx.toArray())).toEqual(['1', '3']);
    await tx.release();
  });

  it('drops what is open and removes its spill directory on close', async () => {
    const s = store(100);
    const txn = openTxn(s, 5);
    await s.add(txn, 5, message(1), 200);
    expect(txn.spill).not.toBeNull();
    expect(await readdir(dir)).toHaveLength(1);
    await s.close([txn]);
    expect(s.memoryBytes).toBe(0);
    expect(await readdir(dir)).toEqual([]);
  });
});
