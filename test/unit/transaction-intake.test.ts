import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTransactionBuffer, type CommittedTransaction, type TransactionBuffer } from '../../src/buffer/index.js';
import type { PgoutputMessage } from '../../src/source/pgoutput/messages.js';
import { createRelationRegistry } from '../../src/source/relations.js';
import { createMessageOrder } from '../../src/source/message-order.js';
import { createTransactionIntake, type TransactionIntake } from '../../src/source/transaction-intake.js';
import type { MessageChange, SourcePosition } from '../../src/source/types.js';

const T = '2024-05-06T07:08:09.123456Z';
const makePosition = (commitLsn: string, xid: number): SourcePosition => ({
  systemId: '7000000000000000001', timeline: 1, slot: 'test', commitLsn, xid, checkpoint: `test:${commitLsn}:${xid}`,
});
const relation: PgoutputMessage = {
  tag: 'relation', relationId: 16384, schema: 'public', name: 'item', replicaIdentity: 'default',
  columns: [{ flags: 1, name: 'id', typeOid: 20, typeModifier: -1 }],
};
const begin = (xid: number): PgoutputMessage => ({ tag: 'begin', finalLsn: '0/100', commitTime: T, xid });
const insert = (id: number): PgoutputMessage => ({ tag: 'insert', relationId: 16384, newTuple: [{ kind: 'text', value: String(id) }] });
const commit = (end: string): PgoutputMessage => ({ tag: 'commit', flags: 0, commitLsn: end, endLsn: end, commitTime: T });

let dir: string;
let buffers: TransactionBuffer[];
let queued: number;
let messages: MessageChange[];
let intake: TransactionIntake;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'intake-test-'));
  buffers = [];
  queued = 0;
  messages = [];
  const relations = createRelationRegistry();
  intake = createTransactionIntake({
    newBuffer() {
      const b = createTransactionBuffer({ makePosition, relations, spillDir: dir });
      buffers.push(b);
      return b;
    },
    onMessage: (m) => messages.push(m),
    onQueued: () => { queued += 1; },
  });
});
afterEach(async () => {
  await intake.close();
  await rm(dir, { recursive: true, force: true });
});

/** Feeds messages of `size` bytes each, waiting where the buffer waits for the disk. */
async function feed(list: PgoutputMessage[], size = 10): Promise<void> {
  for (const m of list) await intake.take(m, 0x10n, size);
}

function drain(): CommittedTransaction[] {
  const out: CommittedTransaction[] = [];
  for (let tx = intake.shift(); tx !== undefined; tx = intake.shift()) out.push(tx);
  return out;
}

describe('transaction intake', () => {
  it('queues committed transactions in order and counts their pgoutput bytes in flight', async () => {
    await feed([relation, begin(1), insert(1), commit('0/200')]);
    await feed([begin(2), insert(2), insert(3), commit('0/300')], 20);
    expect(queued).toBe(2);
    expect(intake.inFlightTransactions).toBe(2);
    expect(intake.inFlightBytes).toBe(30 + 80); // relation before Begin is not counted; Begin to Commit is
    expect(drain().map((tx) => [tx.xid, tx.endLsn])).toEqual([[1, '0/200'], [2, '0/300']]);
    expect(intake.inFlightTransactions).toBe(2); // handed out, still unacknowledged
  });

  it('acknowledges cumulatively, and refuses a position beyond the last transaction taken in', async () => {
    expect(() => intake.acknowledge('0/10')).toThrow(/beyond the last received transaction \(none\)/);
    await feed([relation, begin(1), insert(1), commit('0/200'), begin(2), insert(2), commit('0/300')]);
    intake.acknowledge('0/250');
    expect(intake.inFlightTransactions).toBe(1);
    intake.acknowledge('0/300');
    expect([intake.inFlightTransactions, intake.inFlightBytes]).toEqual([0, 0]);
    expect(() => intake.acknowledge('0/301')).toThrow(RangeError);
  });

  it('drops transactions re-sent after a reconnect that were already taken in', async () => {
    await feed([relation, begin(1), insert(1), commit('0/200'), begin(2), insert(2), commit('0/300')]);
    intake.resetForSession();
    // The server re-sends from the durable position (nothing acknowledged): both again, then a new one.
    await feed([relation, begin(1), insert(1), commit('0/200'), begin(2), insert(2), commit('0/300'), begin(3), insert(3), commit('0/400')]);
    expect(drain().map((tx) => tx.xid)).toEqual([1, 2, 3]);
    expect(intake.inFlightTransactions).toBe(3);
  });

  it('voids a half-received transaction on a new session: a fresh buffer takes the re-sent one whole', async () => {
    await feed([relation, begin(1), insert(1)]);
    expect(intake.openTransactions).toBe(1);
    intake.resetForSession();
    expect(intake.openTransactions).toBe(0);
    expect(buffers).toHaveLength(2);
    await feed([relation, begin(1), insert(1), insert(2), commit('0/200')]);
    const [tx] = drain();
    expect(tx).toMatchObject({ xid: 1, changeCount: 2 });
    expect(intake.inFlightBytes).toBe(40);
  });

  it('keeps the buffer when nothing was open at the reconnect', async () => {
    await feed([relation, begin(1), insert(1), commit('0/200')]);
    intake.resetForSession();
    expect(buffers).toHaveLength(1);
  });

  it('delivers a non-transactional logical message at once, with its walStart', async () => {
    await feed([{ tag: 'message', transactional: false, lsn: '0/50', prefix: 'hb', content: Buffer.from('x') }]);
    expect(messages).toMatchObject([{ op: 'message', prefix: 'hb', transactional: false }]);
    expect(queued).toBe(0);
  });

  // The window the checkpoint writer's idle record must not fall into (pipeline/checkpoint-writer.ts):
  // the commit is received — the source's received position is past it — but not yet taken in.
  it("a spilled transaction's commit waits for its spill file: meanwhile it is neither open nor in flight, only pending in the message order", async () => {
    const relations = createRelationRegistry();
    const spilling = createTransactionIntake({
      newBuffer: () => createTransactionBuffer({ makePosition, relations, spillDir: dir, memoryLimitBytes: 1_024 }),
      onMessage: () => undefined,
      onQueued: () => undefined,
    });
    const errors: unknown[] = [];
    const order = createMessageOrder({ take: (m, walStart, size) => spilling.take(m, walStart, size), failed: () => false, onError: (error) => errors.push(error), onFlowCheck: () => undefined, maxPending: 1_000 });
    try {
      order.push(relation, 0x10n, 10);
      order.push(begin(7), 0x10n, 10);
      for (let id = 1; id <= 500; id++) order.push(insert(id), 0x10n, 10);
      await order.drained();
      expect(spilling.bufferUsage().spills).toBe(1);
      expect({ open: spilling.openTransactions, pending: order.pending }).toEqual({ open: 1, pending: 0 });

      order.push(commit('0/900'), 0x900n, 10);
      expect({ open: spilling.openTransactions, inFlight: spilling.inFlightTransactions, pending: order.pending }).toEqual({ open: 0, inFlight: 0, pending: 1 });
      await order.drained();
      expect({ open: spilling.openTransactions, inFlight: spilling.inFlightTransactions, pending: order.pending }).toEqual({ open: 0, inFlight: 1, pending: 0 });
      expect(errors).toEqual([]);
    } finally {
      await spilling.close();
    }
  });
});
