import { describe, expect, it } from 'vitest';
import { createMessageOrder, type MessageOrderOptions } from '../../src/source/message-order.js';
import type { PgoutputMessage } from '../../src/source/pgoutput/messages.js';

const T = '2024-05-06T07:08:09.123456Z';
const begin = (xid: number): PgoutputMessage => ({ tag: 'begin', finalLsn: '0/100', commitTime: T, xid });
const commit: PgoutputMessage = { tag: 'commit', flags: 0, commitLsn: '0/200', endLsn: '0/200', commitTime: T };

/** A take that waits (until released by hand) for the xids listed in `slow`; records the order messages were taken in. */
function rig(slow: number[] = [], overrides: Partial<MessageOrderOptions> = {}) {
  const taken: string[] = [];
  const errors: unknown[] = [];
  const releases: (() => void)[] = [];
  let flowChecks = 0;
  let failed = false;
  const order = createMessageOrder({
    take(message) {
      taken.push(message.tag === 'begin' ? `begin ${message.xid}` : message.tag);
      if (message.tag === 'begin' && slow.includes(message.xid)) return new Promise<void>((resolve) => releases.push(resolve));
      return undefined;
    },
    failed: () => failed,
    onError: (e) => errors.push(e),
    onFlowCheck: () => { flowChecks += 1; },
    maxPending: 3,
    ...overrides,
  });
  return { order, taken, errors, releases, flowChecks: () => flowChecks, fail: () => { failed = true; } };
}

describe('message order', () => {
  it('takes messages in at once while nothing waits, checking the flow at each commit', async () => {
    const { order, taken, flowChecks } = rig();
    order.push(begin(1), 0n, 1);
    order.push(commit, 0n, 1);
    expect(taken).toEqual(['begin 1', 'commit']);
    expect(order.pending).toBe(0);
    expect(flowChecks()).toBe(1);
    await order.drained();
  });

  it('queues what arrives while a message waits for the disk, and keeps stream order', async () => {
    const { order, taken, releases } = rig([1]);
    order.push(begin(1), 0n, 1);
    order.push(commit, 0n, 1);
    order.push(begin(2), 0n, 1);
    expect(taken).toEqual(['begin 1']);
    expect(order.pending).toBe(3);
    releases[0]!();
    await order.drained();
    expect(taken).toEqual(['begin 1', 'commit', 'begin 2']);
    expect(order.pending).toBe(0);
  });

  it('runs other work in line after the messages before it', async () => {
    const { order, taken, releases } = rig([1]);
    order.push(begin(1), 0n, 1);
    order.after(() => { taken.push('reset'); return undefined; });
    order.push(begin(2), 0n, 1);
    releases[0]!();
    await order.drained();
    expect(taken).toEqual(['begin 1', 'reset', 'begin 2']);
  });

  it('checks the flow as soon as maxPending messages wait', () => {
    const { order, flowChecks, releases } = rig([1]);
    order.push(begin(1), 0n, 1); // waits: pending 1
    order.push(begin(2), 0n, 1);
    expect(flowChecks()).toBe(0);
    order.push(begin(3), 0n, 1); // pending 3
    expect(flowChecks()).toBe(1);
    releases[0]!();
    return order.drained();
  });

  it('reports what a take throws or rejects with, and ignores messages once failed', async () => {
    const boom = new Error('boom');
    const { order, errors, taken, fail } = rig([], { take: (m) => { taken.push(m.tag); throw boom; } });
    order.push(begin(1), 0n, 1);
    expect(errors).toEqual([boom]);
    fail();
    order.push(begin(2), 0n, 1);
    expect(taken).toEqual(['begin']);

    const rejected = rig([], { take: () => Promise.reject(boom) });
    rejected.order.push(begin(1), 0n, 1);
    await rejected.order.drained();
    expect(rejected.errors).toEqual([boom]);
  });
});
