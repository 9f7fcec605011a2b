// The transaction loop: queued transactions taken without waiting, the iterator when none is queued; ends on stop or when the source ends.
import { describe, expect, it } from 'vitest';
import type { CommittedTransaction } from '../../src/buffer/index.js';
import { InMemoryTransaction } from '../../src/buffer/committed-transaction.js';
import { createRedactor } from '../../src/config/redact.js';
import { silentLogger } from '../../src/pipeline/logger.js';
import { createRunControl } from '../../src/pipeline/run-control.js';
import { runTransactionLoop } from '../../src/pipeline/run-loop.js';
import { insert } from '../../src/testing/mapper-kit.js';

function tx(xid: number): InMemoryTransaction {
  const commitLsn = `0/${(xid * 0x100).toString(16).toUpperCase()}`;
  return new InMemoryTransaction(
    {
      xid, commitLsn, endLsn: commitLsn, commitTime: '2026-01-15T10:00:00.000000Z', origin: null, changeCount: 1, messageCount: 3,
      position: { systemId: '7000000000000000001', timeline: 1, slot: 'ea_slot', commitLsn, xid, checkpoint: `test:${commitLsn}:${xid}` },
    },
    [insert('public.invoice', { id: `inv_${xid}` })],
  );
}

/** A released in-memory transaction refuses to give its changes again. */
const released = (t: InMemoryTransaction): boolean => {
  try {
    t.sequence();
    return false;
  } catch {
    return true;
  }
};

/** A source whose `takeNow` queue and `transactions()` iterator the test feeds; `log` records the calls in order. */
function fakeSource() {
  const queue: CommittedTransaction[] = [];
  const log: string[] = [];
  const nexts: ((r: IteratorResult<CommittedTransaction>) => void)[] = [];
  const source = {
    takeNow(): CommittedTransaction | null {
      const next = queue.shift() ?? null;
      log.push(next ? `take ${next.xid}` : 'take none');
      return next;
    },
    transactions(): AsyncIterable<CommittedTransaction> {
      return {
        [Symbol.asyncIterator]: () => ({
          next: () => {
            log.push('next');
            return new Promise<IteratorResult<CommittedTransaction>>((resolve) => nexts.push(resolve));
          },
        }),
      };
    },
  };
  return {
    source, queue, log,
    /** Settles the oldest pending `next()`. */
    yieldNext(result: IteratorResult<CommittedTransaction>) {
      const resolve = nexts.shift();
      if (!resolve) throw new Error('no next() is waiting');
      resolve(result);
    },
    get waiting() {
      return nexts.length;
    },
  };
}

/** Lets queued promise reactions run until `done()` holds (no time passes). */
async function untilTrue(done: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !done(); i++) await Promise.resolve();
  expect(done()).toBe(true);
}

const newControl = () => createRunControl(silentLogger, createRedactor());

describe('runTransactionLoop', () => {
  it('takes queued transactions one by one without waiting on the iterator, then waits on it', async () => {
    const s = fakeSource();
    s.queue.push(tx(1), tx(2));
    const handled: number[] = [];
    const control = newControl();
    const loop = runTransactionLoop(s.source, control, (t) => {
      handled.push(t.xid);
      s.log.push(`handle ${t.xid}`);
      return undefined;
    });
    expect(s.log).toEqual(['take 1', 'handle 1', 'take 2', 'handle 2', 'take none', 'next']); // all synchronous
    s.yieldNext({ done: false, value: tx(3) });
    await untilTrue(() => handled.length === 3);
    s.yieldNext({ done: true, value: undefined });
    await expect(loop).resolves.toBe('source-ended');
    expect(handled).toEqual([1, 2, 3]);
  });

  it('waits for a handler that returns a promise before taking the next transaction', async () => {
    const s = fakeSource();
    s.queue.push(tx(1), tx(2));
    let finish!: () => void;
    const handled: number[] = [];
    const loop = runTransactionLoop(s.source, newControl(), (t) => {
      handled.push(t.xid);
      return t.xid === 1 ? new Promise<void>((resolve) => (finish = resolve)) : undefined;
    });
    await Promise.resolve();
    expect(handled).toEqual([1]);
    expect(s.queue).toHaveLength(1);
    finish();
    await untilTrue(() => s.waiting === 1);
    expect(handled).toEqual([1, 2]);
    s.yieldNext({ done: true, value: undefined });
    await expect(loop).resolves.toBe('source-ended');
  });

  it("ends 'source-ended' when the iterator ends", async () => {
    const s = fakeSource();
    const loop = runTransactionLoop(s.source, newControl(), () => undefined);
    s.yieldNext({ done: true, value: undefined });
    await expect(loop).resolves.toBe('source-ended');
  });

  it("ends 'stopped' on a stop while waiting, and releases a transaction the iterator yields after that (unacknowledged)", async () => {
    const s = fakeSource();
    const control = newControl();
    const handled: number[] = [];
    const loop = runTransactionLoop(s.source, control, (t) => void handled.push(t.xid));
    expect(s.waiting).toBe(1);
    control.requestStop();
    await expect(loop).resolves.toBe('stopped');
    const late = tx(7);
    s.yieldNext({ done: false, value: late });
    await untilTrue(() => released(late));
    expect(handled).toEqual([]);
  });

  it("ends 'stopped' without handling a transaction yielded in the same turn as the stop", async () => {
    const s = fakeSource();
    const control = newControl();
    const handled: number[] = [];
    const loop = runTransactionLoop(s.source, control, (t) => void handled.push(t.xid));
    const raced = tx(8);
    s.yieldNext({ done: false, value: raced }); // the iterator answers first …
    await Promise.resolve();
    control.requestStop(); // … and the stop arrives before the loop looks at it
    await expect(loop).resolves.toBe('stopped');
    expect(handled).toEqual([]);
    await untilTrue(() => released(raced));
  });

  it("ends 'stopped' before taking anything when the stop came first", async () => {
    const s = fakeSource();
    s.queue.push(tx(1));
    const control = newControl();
    control.requestStop();
    const handled: number[] = [];
    await expect(runTransactionLoop(s.source, control, (t) => void handled.push(t.xid))).resolves.toBe('stopped');
    expect(handled).toEqual([]);
    expect(s.queue).toHaveLength(1);
  });

  it("ends 'stopped' after the transaction in hand when a handler requests the stop", async () => {
    const s = fakeSource();
    s.queue.push(tx(1), tx(2));
    const control = newControl();
    const handled: number[] = [];
    const loop = runTransactionLoop(s.source, control, (t) => {
      handled.push(t.xid);
      control.requestStop();
      return undefined;
    });
    await expect(loop).resolves.toBe('stopped');
    expect(handled).toEqual([1]);
    expect(s.queue).toHaveLength(1); // left for the source: not acknowledged, sent again
  });
});
