// The transaction-atomic mode's queue: batches cut only where every unit begun is complete.
import { describe, expect, it } from 'vitest';
import { defineProjection } from '../../src/consumer/index.js';
import { createUnitQueue, unitOf } from '../../src/consumer/unit-queue.js';
import type { RecordedInput } from '../../src/consumer/projection-event.js';

const projection = defineProjection({ name: 'q', from: { categories: ['account'] }, atomic: 'transaction', handlers: { Deposited: () => undefined } });
let position = 0n;

/** An event of unit `unit` (index/count), or a unit of its own when `unit` is null. */
function ev(stream: string, unit: string | null, index = 0, count = 1): RecordedInput {
  position += 10n;
  const metadata = unit === null ? {} : { $correlationId: unit, 'transaction.index': String(index), 'transaction.count': String(count) };
  return { id: `${stream}:${position}`, type: 'Deposited', stream, revision: 0n, position: { commit: position, prepare: position }, data: {}, metadata };
}

const ids = (batch: { events: readonly { stream: string }[] } | null) => batch?.events.map((e) => e.stream) ?? null;

describe('unitOf', () => {
  it('reads the unit from the metadata, or none', () => {
    expect(unitOf({ $correlationId: 'u', 'transaction.index': '1', 'transaction.count': '3' })).toEqual({ key: 'u', count: 3 });
    expect(unitOf({ $correlationId: 'u', 'transaction.count': '3' })).toBeNull();
    expect(unitOf({ $correlationId: 'u', 'transaction.index': '0', 'transaction.count': '0' })).toBeNull();
    expect(unitOf({ $correlationId: 'u', 'transaction.index': 'x', 'transaction.count': '2' })).toBeNull();
    expect(unitOf(null)).toBeNull();
    expect(unitOf('text')).toBeNull();
  });
});

describe('createUnitQueue', () => {
  it('holds a unit until all its events arrived, across streams and categories', () => {
    const q = createUnitQueue(projection);
    q.push(ev('account-a', 'A', 0, 3));
    q.push(ev('audit-x', 'A', 1, 3)); // not selected, still counted
    expect(q.ready).toBe(false);
    expect(q.take(10)).toBeNull();
    q.push(ev('account-b', 'A', 2, 3));
    expect(q.ready).toBe(true);
    const batch = q.take(10)!;
    expect(ids(batch)).toEqual(['account-a', 'account-b']);
    expect(batch.through.commit).toBe(position);
    expect(q.size).toBe(0);
  });

  it('cuts only where no unit is open: interleaved units go together', () => {
    const q = createUnitQueue(projection);
    q.push(ev('account-a0', 'A', 0, 3));
    q.push(ev('account-b0', 'B', 0, 2));
    q.push(ev('account-a1', 'A', 1, 3));
    q.push(ev('account-b1', 'B', 1, 2));
    expect(q.ready).toBe(false); // B complete, A not: no clean cut yet
    q.push(ev('account-a2', 'A', 2, 3));
    q.push(ev('account-c0', 'C', 0, 1));
    expect(ids(q.take(1))).toEqual(['account-a0', 'account-b0', 'account-a1', 'account-b1', 'account-a2']); // more than max: a unit is never cut
    expect(ids(q.take(1))).toEqual(['account-c0']);
  });

  it('takes as many whole units as fit in max selected events', () => {
    const q = createUnitQueue(projection);
    for (const u of ['A', 'B', 'C']) for (let i = 0; i < 2; i++) q.push(ev(`account-${u}${i}`, u, i, 2));
    expect(ids(q.take(5))).toEqual(['account-A0', 'account-A1', 'account-B0', 'account-B1']);
    expect(ids(q.take(5))).toEqual(['account-C0', 'account-C1']);
    expect(q.take(5)).toBeNull();
  });

  it('moves past events it does not select: an empty batch to the clean cut', () => {
    const q = createUnitQueue(projection);
    q.push(ev('audit-1', 'A', 0, 2));
    q.push(ev('audit-2', 'A', 1, 2));
    const batch = q.take(10)!;
    expect(batch.events).toEqual([]);
    expect(batch.through.commit).toBe(position);
  });

  it('an event without transaction metadata is a unit of its own', () => {
    const q = createUnitQueue(projection);
    q.push(ev('account-x', null));
    expect(ids(q.take(10))).toEqual(['account-x']);
  });

  it('counts the events a checkpoint inside a unit left behind (carried), but only once the unit shows up', () => {
    const q = createUnitQueue(projection, new Map([['A', 2], ['STALE', 1]]));
    q.push(ev('account-a2', 'A', 2, 3));
    expect(q.open().size).toBe(0); // 2 carried + 1 = 3: complete; the stale carried unit does not hold anything back
    expect(ids(q.take(10))).toEqual(['account-a2']);
  });

  it('keeps only the partition it was given', () => {
    const p0 = defineProjection({ name: 'q', from: { categories: ['account'] }, atomic: 'transaction', partition: { count: 2, index: 0 }, handlers: { Deposited: () => undefined } });
    const q = createUnitQueue(p0);
    const streams = Array.from({ length: 20 }, (_, i) => `account-${i}`);
    streams.forEach((s, i) => q.push(ev(s, 'A', i, streams.length)));
    const batch = q.take(100)!;
    expect(batch.events.length).toBeGreaterThan(0);
    expect(batch.events.length).toBeLessThan(streams.length);
  });
});
