// Transaction handling: map → validate (park or halt) → queue; the checkpoint advances only over what is durable.
import { beforeEach, describe, expect, it } from 'vitest';
import { InMemoryTransaction } from '../../src/buffer/committed-transaction.js';
import { createRedactor } from '../../src/config/redact.js';
import { contractViolationRecord, defineMapper } from '../../src/mapping/index.js';
import type { Appender, AppendReceiver } from '../../src/pipeline/appender.js';
import { createCheckpointCoordinator, type CheckpointCoordinator } from '../../src/pipeline/checkpoint-coordinator.js';
import type { ContractCheck } from '../../src/pipeline/contract-check.js';
import { ContractViolationHaltError } from '../../src/pipeline/errors.js';
import { silentLogger, type Logger } from '../../src/pipeline/logger.js';
import { createRunControl, type RunControl } from '../../src/pipeline/run-control.js';
import { createRunStats, type RunStats } from '../../src/pipeline/run-stats.js';
import { createTransactionHandler, type TransactionHandler } from '../../src/pipeline/transaction-handler.js';
import type { TxPayload } from '../../src/pipeline/types.js';
import type { AppendOutcome, SinkBatch } from '../../src/sink/index.js';
import type { Change } from '../../src/source/types.js';
import { insert, transaction } from '../../src/testing/mapper-kit.js';

const SYSTEM_ID = '7000000000000000001';
const MAX_IN_FLIGHT = 2;

const drafts = defineMapper({
  name: 'drafts',
  tables: { 'public.invoice': { columns: ['id', 'status'] } },
  map: (tx) =>
    tx.inserts('public.invoice').map(({ after }) => ({
      stream: `invoice-${String(after.id)}`,
      type: 'InvoiceDrafted',
      version: 1,
      data: { invoiceId: after.id },
    })),
});

const invoice = (id: string): Change => insert('public.invoice', { id, status: 'draft' });
const payment = (id: string): Change => insert('public.payment', { id });

/** A committed transaction held in memory, as the buffer hands it out; `endLsn` 0/<xid>00. */
function committed(xid: number, changes: Change[]): InMemoryTransaction {
  const commitLsn = `0/${(xid * 0x100).toString(16).toUpperCase()}`;
  return new InMemoryTransaction(
    {
      xid, commitLsn, endLsn: commitLsn, commitTime: '2026-01-15T10:00:00.000000Z', origin: null, changeCount: changes.length, messageCount: changes.length + 2,
      position: { systemId: SYSTEM_ID, timeline: 1, slot: 'ea_slot', commitLsn, xid, checkpoint: `test:${commitLsn}:${xid}` },
    },
    changes,
  );
}

/** An appender whose appends, and whose room (`whenBelow`), the test settles. */
function fakeAppender() {
  const calls: { batch: SinkBatch; resolve: () => void; reject: (error: unknown) => void }[] = [];
  const room: { n: number; resolve: () => void }[] = [];
  const appender = {
    inFlight: 0,
    stats: { calls: 0, units: 0, largestBatch: 0 },
    append(batch: SinkBatch): Promise<AppendOutcome> {
      return new Promise<AppendOutcome>((resolve, reject) =>
        calls.push({ batch, reject, resolve: () => resolve({ appended: batch.events.length, skipped: 0, streams: [], checkpoint: 'appended', mode: 'multi-stream' }) }),
      );
    },
    appendTo(batch: SinkBatch, receiver: AppendReceiver): void {
      this.append(batch).then((outcome) => receiver.appended(outcome), (error: unknown) => receiver.failed(error));
    },
    whenBelow(n: number): Promise<void> {
      return new Promise<void>((resolve) => room.push({ n, resolve }));
    },
    drain: () => Promise.resolve(),
  } satisfies Appender;
  return { appender, calls, room };
}

/** Lets every settled promise's reactions run (no timers involved). */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

let appender: ReturnType<typeof fakeAppender>;
let control: RunControl;
let stats: RunStats;
let coordinator: CheckpointCoordinator<TxPayload>;
let advanced: string[];
let warnings: { message: string; fields: Record<string, unknown> | undefined }[];
let check: ContractCheck;
let handler: TransactionHandler;

beforeEach(() => {
  appender = fakeAppender();
  control = createRunControl(silentLogger, createRedactor());
  stats = createRunStats();
  coordinator = createCheckpointCoordinator<TxPayload>();
  advanced = [];
  warnings = [];
  check = () => null;
  const log: Logger = { ...silentLogger, warn: (message, fields) => void warnings.push({ message, fields }) };
  handler = createTransactionHandler({
    assembler: 'invoicing',
    mappers: [drafts],
    maxInFlightTransactions: MAX_IN_FLIGHT,
    control,
    stats,
    coordinator,
    checkpoints: { advance: (target) => void advanced.push(target.endLsn) },
    log,
    appender: () => appender.appender,
    checkContract: () => check,
    mode: () => 'multi-stream',
  });
});

describe('transaction handler: a transaction with events', () => {
  it('is queued synchronously when the appender has room; its checkpoint advances only once it is durable', async () => {
    const tx = committed(1, [invoice('inv_1'), invoice('inv_2')]);
    expect(handler.handleTransaction(tx)).toBeUndefined();
    expect(appender.calls).toHaveLength(1);
    const { batch } = appender.calls[0]!;
    expect(batch.position).toEqual({ kind: 'transaction', checkpoint: 'test:0/100:1', commitLsn: '0/100', xid: 1, systemId: SYSTEM_ID });
    expect(batch.events.map((e) => [e.stream, e.type])).toEqual([['invoice-inv_1', 'InvoiceDrafted'], ['invoice-inv_2', 'InvoiceDrafted']]);
    expect(() => tx.sequence()).toThrow(/already released/); // its changes were taken; the buffer holds nothing more
    expect(stats.counts).toMatchObject({ received: 1, appended: 0, skipped: 0 });
    await settle();
    expect(advanced).toEqual([]);
    expect(coordinator.pending).toBe(1);

    appender.calls[0]!.resolve();
    await settle();
    expect(advanced).toEqual(['0/100']);
    expect(stats.counts).toMatchObject({ received: 1, appended: 1, eventsAppended: 2, replaySkipped: 0, parkedTx: 0 });
    expect(stats.byType).toEqual({ InvoiceDrafted: 2 });
    expect(stats.lag().lastMs).not.toBeNull();
  });

  it('advances over the contiguous durable prefix only, whatever order the appends finish in', async () => {
    handler.handleTransaction(committed(1, [invoice('inv_1')]));
    handler.handleTransaction(committed(2, [invoice('inv_2')]));
    handler.handleTransaction(committed(3, [payment('pay_1')])); // nothing to append
    appender.calls[1]!.resolve();
    await settle();
    expect(advanced).toEqual([]); // #2 is durable, #1 is not
    appender.calls[0]!.resolve();
    await settle();
    expect(advanced).toEqual(['0/300']); // one advance over #1, #2 and the skipped #3
  });
});

describe('transaction handler: a transaction with no events', () => {
  it('counts as skipped and advances the checkpoint at once', () => {
    expect(handler.handleTransaction(committed(1, [payment('pay_1')]))).toBeUndefined();
    expect(appender.calls).toEqual([]);
    expect(stats.counts).toMatchObject({ received: 1, skipped: 1, appended: 0 });
    expect(advanced).toEqual(['0/100']);
  });

  it('waits for an earlier transaction that is not durable yet', async () => {
    handler.handleTransaction(committed(1, [invoice('inv_1')]));
    handler.handleTransaction(committed(2, [payment('pay_1')]));
    expect(advanced).toEqual([]);
    appender.calls[0]!.resolve();
    await settle();
    expect(advanced).toEqual(['0/200']);
  });
});

describe('transaction handler: contract violations', () => {
  it('appends a parked violation as a failed record with the transaction, and counts it', async () => {
    check = (event) => ((event.data as { invoiceId: string }).invoiceId === 'inv_bad' ? contractViolationRecord(event, [{ path: '/invoiceId', message: 'must match ^inv_[0-9]+$' }], { assembler: 'invoicing' }) : null);
    handler.handleTransaction(committed(1, [invoice('inv_1'), invoice('inv_bad')]));
    expect(appender.calls).toHaveLength(1);
    const events = appender.calls[0]!.batch.events;
    expect(events.map((e) => e.type)).toEqual(['InvoiceDrafted', 'ContractViolation']);
    expect(events[1]!.metadata).toMatchObject({ 'failed.stream': 'invoice-inv_bad', 'failure.type': 'ContractViolation' });
    expect(stats.counts.contractViolations).toBe(1);
    expect(warnings).toEqual([
      { message: 'record parked', fields: expect.objectContaining({ type: 'ContractViolation', stream: events[1]!.stream, id: events[1]!.id, mapper: 'drafts', commitLsn: '0/100', xid: '1', contract: 'InvoiceDrafted@1' }) },
    ]);

    appender.calls[0]!.resolve();
    await settle();
    expect(stats.counts).toMatchObject({ appended: 1, parkedTx: 1, eventsAppended: 2 });
    expect(stats.byType).toEqual({ InvoiceDrafted: 1 }); // the violating event was not appended
    expect(advanced).toEqual(['0/100']);
  });

  it('a transaction whose only event was parked is appended (its failed record), not skipped', () => {
    check = (event) => contractViolationRecord(event, [{ path: '', message: 'no' }], { assembler: 'invoicing' });
    handler.handleTransaction(committed(1, [invoice('inv_1')]));
    expect(appender.calls.map((c) => c.batch.events.map((e) => e.type))).toEqual([['ContractViolation']]);
    expect(stats.counts.skipped).toBe(0);
  });

  it('a halting violation throws, appends nothing of the transaction and holds the checkpoint back', () => {
    const halt = new ContractViolationHaltError({ assembler: 'invoicing', position: null, eventId: 'e', stream: 'invoice-inv_1', contract: 'InvoiceDrafted@1', mapper: 'drafts', violations: [] });
    check = () => {
      throw halt;
    };
    expect(() => handler.handleTransaction(committed(1, [invoice('inv_1')]))).toThrow(halt);
    expect(appender.calls).toEqual([]);
    expect(coordinator.halted).toBe(true);
    handler.handleTransaction(committed(2, [payment('pay_1')]));
    expect(advanced).toEqual([]);
  });
});

describe('transaction handler: a full appender', () => {
  beforeEach(() => {
    appender.appender.inFlight = MAX_IN_FLIGHT;
  });

  it('waits for room (whenBelow) before queueing', async () => {
    const pending = handler.handleTransaction(committed(1, [invoice('inv_1')]));
    expect(pending).toBeInstanceOf(Promise);
    expect(appender.room.map((r) => r.n)).toEqual([MAX_IN_FLIGHT]);
    await settle();
    expect(appender.calls).toEqual([]);
    appender.room[0]!.resolve();
    await pending;
    expect(appender.calls).toHaveLength(1);
    appender.calls[0]!.resolve();
    await settle();
    expect(advanced).toEqual(['0/100']);
  });

  it('a stop ends the wait at once: no room needed (the drain takes what was received)', async () => {
    const pending = handler.handleTransaction(committed(1, [invoice('inv_1')]));
    control.requestStop();
    await expect(pending).resolves.toBeUndefined();
    expect(appender.room).toHaveLength(1); // never given
    expect(appender.calls).toHaveLength(1);
  });

  it('a fatal error ends the wait with that error, queues nothing and holds the checkpoint back', async () => {
    const pending = handler.handleTransaction(committed(1, [invoice('inv_1')]));
    const fatal = new Error('sink failed');
    control.fail(fatal);
    await expect(pending).rejects.toBe(fatal);
    expect(appender.calls).toEqual([]);
    expect(coordinator.halted).toBe(true);
  });
});

describe('transaction handler: a failed append', () => {
  it('fails the run and holds the checkpoint back for good', async () => {
    handler.handleTransaction(committed(1, [invoice('inv_1')]));
    handler.handleTransaction(committed(2, [invoice('inv_2')]));
    const error = new Error('WrongExpectedVersion on invoice-inv_1');
    appender.calls[0]!.reject(error);
    await settle();
    expect(control.fatal).toBe(error);
    expect(control.stopRequested).toBe(true);
    expect(coordinator.halted).toBe(true);
    appender.calls[1]!.resolve();
    await settle();
    expect(advanced).toEqual([]);
    expect(stats.counts.appended).toBe(1); // #2 is durable, but behind the failed #1
  });

  it('refuses to queue after the run failed', () => {
    control.fail(new Error('earlier failure'));
    expect(() => handler.handleTransaction(committed(1, [invoice('inv_1')]))).toThrow('earlier failure');
    expect(appender.calls).toEqual([]);
    expect(coordinator.halted).toBe(true);
  });
});

describe('transaction handler: handleUnit', () => {
  it('gives null for a unit with nothing to append, and the durability of one with events', async () => {
    const position = { kind: 'transaction' as const, checkpoint: 'test:0/100:1', commitLsn: '0/100', xid: 1, systemId: SYSTEM_ID };
    expect(handler.handleUnit(transaction([payment('pay_1')], { commitLsn: '0/100', xid: 1 }), position, SYSTEM_ID)).toBeNull();
    const queued = handler.handleUnit(transaction([invoice('inv_1')], { commitLsn: '0/100', xid: 1 }), position, SYSTEM_ID);
    expect(queued).not.toBeNull();
    expect(queued).not.toBeInstanceOf(Promise);
    appender.calls[0]!.resolve();
    await expect((queued as { durable: Promise<AppendOutcome> }).durable).resolves.toMatchObject({ appended: 1 });
    expect(coordinator.pending).toBe(0); // a unit alone is not registered: the caller owns its checkpoint
  });
});
