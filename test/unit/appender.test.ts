// The pipeline's group-commit appender: batching, disjoint concurrency, per-stream order, and
// what happens after a failed call. The sink here is a recording stand-in whose calls resolve
// when the test says so (the real sink's batches are covered in sink-append.test.ts).
import { describe, expect, it } from 'vitest';
import { createAppender } from '../../src/pipeline/appender.js';
import type { AppendOutcome, Sink, SinkBatch } from '../../src/sink/index.js';

function unit(n: number, streams: string[]): SinkBatch {
  return {
    position: { checkpoint: `c${n}`, commitLsn: `0/${(0x100 + n).toString(16)}`, xid: n },
    events: streams.map((stream, i) => ({ id: `00000000-0000-5000-8000-${String(n * 10 + i).padStart(12, '0')}`, stream, type: 'T', data: { n }, metadata: {} })),
  };
}

function recordingSink() {
  const calls: { units: number[]; resolve: () => void; reject: (error: unknown) => void }[] = [];
  /** Per stream, the units in the order the sink received them. */
  const received = new Map<string, number[]>();
  const sink: Sink = {
    append: () => Promise.reject(new Error('the appender must use appendMany')),
    appendMany(batches) {
      const units = batches.map((b) => (b.position as { xid: number }).xid);
      for (const b of batches) for (const s of new Set(b.events.map((e) => e.stream))) received.set(s, [...(received.get(s) ?? []), (b.position as { xid: number }).xid]);
      return new Promise<AppendOutcome[]>((resolve, reject) => {
        calls.push({
          units,
          resolve: () => resolve(batches.map((b) => ({ appended: b.events.length, skipped: 0, streams: [], checkpoint: 'none', mode: 'multi-stream' }))),
          reject,
        });
      });
    },
    close: async () => undefined,
  };
  return { sink, calls, received };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !condition(); i++) await tick();
  if (!condition()) throw new Error('condition not reached');
}

describe('group-commit appender', () => {
  it('units handed over in one turn go in one call; units arriving while it is in flight go together in the next', async () => {
    const { sink, calls } = recordingSink();
    const appender = createAppender(sink, { maxConcurrentAppends: 1 });
    const first = [1, 2, 3].map((n) => appender.append(unit(n, [`s-${n}`])));
    await until(() => calls.length === 1);
    expect(calls[0]!.units).toEqual([1, 2, 3]);
    const second = [4, 5, 6, 7].map((n) => appender.append(unit(n, [`s-${n}`])));
    await tick();
    expect(calls).toHaveLength(1); // one call at a time: the rest waits
    expect(appender.inFlight).toBe(7);
    calls[0]!.resolve();
    expect((await Promise.all(first)).map((o) => o.appended)).toEqual([1, 1, 1]);
    await until(() => calls.length === 2);
    expect(calls[1]!.units).toEqual([4, 5, 6, 7]);
    calls[1]!.resolve();
    await Promise.all(second);
    await appender.drain();
    expect(appender.stats).toEqual({ calls: 2, units: 7, largestBatch: 4 });
  });

  it('respects the unit and event limits of one call (a single larger unit still goes alone)', async () => {
    const { sink, calls } = recordingSink();
    const appender = createAppender(sink, { maxConcurrentAppends: 1, maxBatchUnits: 3, maxBatchEvents: 4 });
    const all = [
      appender.append(unit(1, ['a'])),
      appender.append(unit(2, ['b'])),
      appender.append(unit(3, ['c'])),
      appender.append(unit(4, ['d'])),
      appender.append(unit(5, ['e', 'e', 'e'])),
      appender.append(unit(6, ['f', 'f', 'f', 'f', 'f', 'f'])),
    ];
    for (let i = 0; i < 3; i++) {
      await until(() => calls.length === i + 1);
      calls[i]!.resolve();
    }
    await Promise.all(all);
    expect(calls.map((c) => c.units)).toEqual([[1, 2, 3], [4, 5], [6]]);
  });

  it('runs calls concurrently only on disjoint streams; a unit touching a busy stream waits, with everything behind it', async () => {
    const { sink, calls, received } = recordingSink();
    // Any batch may start while another is in flight here (1): this is about streams, not sizes.
    const appender = createAppender(sink, { maxConcurrentAppends: 4, minConcurrentUnits: 1 });
    const p1 = appender.append(unit(1, ['x', 'y']));
    await until(() => calls.length === 1);
    const p2 = appender.append(unit(2, ['z'])); // disjoint: may go now
    await until(() => calls.length === 2);
    const p3 = appender.append(unit(3, ['y'])); // busy (call 1): waits
    const p4 = appender.append(unit(4, ['w'])); // disjoint, but queued behind 3: waits too
    await tick();
    await tick();
    expect(calls).toHaveLength(2);
    calls[1]!.resolve(); // z done: 3 still blocked by y
    await p2;
    await tick();
    expect(calls).toHaveLength(2);
    calls[0]!.resolve();
    await p1;
    await until(() => calls.length === 3);
    expect(calls[2]!.units).toEqual([3, 4]);
    calls[2]!.resolve();
    await Promise.all([p3, p4]);
    expect(received.get('y')).toEqual([1, 3]);
  });

  it('while a call is in flight, a small batch waits for it and grows; a large one (or a full call) goes at once', async () => {
    const { sink, calls } = recordingSink();
    const appender = createAppender(sink, { maxConcurrentAppends: 4, minConcurrentUnits: 3, maxBatchUnits: 4 });
    const first = appender.append(unit(1, ['a']));
    await until(() => calls.length === 1);
    // Two units (< 3) arrive while call 1 is in flight: they wait, and more join them.
    const small = [2, 3].map((n) => appender.append(unit(n, [`s-${n}`])));
    await tick();
    await tick();
    expect(calls).toHaveLength(1);
    // A third makes the batch large enough: it goes while call 1 is still in flight.
    const third = appender.append(unit(4, ['s-4']));
    await until(() => calls.length === 2);
    expect(calls[1]!.units).toEqual([2, 3, 4]);
    // A full call (maxBatchUnits 4) goes at once too, whatever the threshold; the fifth unit waits.
    const more = [5, 6, 7, 8, 9].map((n) => appender.append(unit(n, [`s-${n}`])));
    await until(() => calls.length === 3);
    expect(calls[2]!.units).toEqual([5, 6, 7, 8]);
    await tick();
    await tick();
    expect(calls).toHaveLength(3);
    // The calls end: with none in flight, the one unit left goes alone.
    calls[0]!.resolve();
    calls[1]!.resolve();
    calls[2]!.resolve();
    await until(() => calls.length === 4);
    expect(calls[3]!.units).toEqual([9]);
    calls[3]!.resolve();
    await Promise.all([first, ...small, third, ...more]);
    expect(appender.stats).toMatchObject({ calls: 4, units: 9 });
  });

  it('the threshold must be at least 1', () => {
    expect(() => createAppender(recordingSink().sink, { minConcurrentUnits: 0 })).toThrow(RangeError);
  });

  it('after a failed call, the units queued behind it and later appends are rejected (PIPELINE_APPEND_BLOCKED)', async () => {
    const { sink, calls } = recordingSink();
    const appender = createAppender(sink, { maxConcurrentAppends: 1 });
    const p1 = appender.append(unit(1, ['a']));
    await until(() => calls.length === 1);
    const p2 = appender.append(unit(2, ['b']));
    calls[0]!.reject(new Error('destination says no'));
    await expect(p1).rejects.toThrow('destination says no');
    await expect(p2).rejects.toMatchObject({ code: 'PIPELINE_APPEND_BLOCKED' });
    await expect(appender.append(unit(3, ['c']))).rejects.toMatchObject({ code: 'PIPELINE_APPEND_BLOCKED' });
    await appender.drain();
    expect(appender.inFlight).toBe(0);
    expect(calls).toHaveLength(1);
  });

  it('whenBelow resolves as units become durable (the pipeline\'s backpressure)', async () => {
    const { sink, calls } = recordingSink();
    const appender = createAppender(sink, { maxConcurrentAppends: 1 });
    const all = [1, 2, 3].map((n) => appender.append(unit(n, [`s${n}`])));
    let below = false;
    void appender.whenBelow(2).then(() => (below = true));
    await until(() => calls.length === 1);
    expect(below).toBe(false);
    calls[0]!.resolve();
    await Promise.all(all);
    await until(() => below);
    expect(appender.inFlight).toBe(0);
  });

  it('hands each queued unit\'s streams to the sink as a look-ahead hint, before its call starts', async () => {
    const { sink, calls } = recordingSink();
    const hints: string[][] = [];
    sink.prefetch = (streams) => (hints.push([...streams]), true);
    const appender = createAppender(sink, { maxConcurrentAppends: 1 });
    const first = appender.append(unit(1, ['a']));
    await until(() => calls.length === 1);
    const later = [appender.append(unit(2, ['b', 'c', 'b'])), appender.append(unit(3, ['a']))];
    expect(hints).toEqual([['a'], ['b', 'c'], ['a']]);
    expect(calls).toHaveLength(1); // hinted while waiting behind the call in flight
    calls[0]!.resolve();
    await first;
    await until(() => calls.length === 2);
    calls[1]!.resolve();
    await Promise.all(later);
  });
  it('queues what the sink made of a unit (`prepare`), and hands that batch to the call', async () => {
    const { sink, calls } = recordingSink();
    const given: SinkBatch[] = [];
    const handed: SinkBatch[] = [];
    const prepared = new WeakSet<SinkBatch>();
    const appendMany = sink.appendMany!.bind(sink);
    sink.prepare = (batch) => {
      given.push(batch);
      const lighter = { ...batch, events: batch.events.map((e) => ({ ...e, data: null })) };
      prepared.add(lighter);
      return lighter;
    };
    sink.appendMany = (batches) => {
      handed.push(...batches);
      return appendMany(batches);
    };
    const appender = createAppender(sink, { maxConcurrentAppends: 1 });
    const units = [unit(1, ['s-1']), unit(2, ['s-2', 's-3'])];
    const done = units.map((u) => appender.append(u));
    expect(given).toEqual(units); // prepared when queued, before any call
    await until(() => calls.length === 1);
    expect(handed).toHaveLength(2);
    for (const batch of handed) expect(prepared.has(batch)).toBe(true);
    expect(handed.map((b) => b.events.map((e) => e.stream))).toEqual([['s-1'], ['s-2', 's-3']]);
    calls[0]!.resolve();
    expect((await Promise.all(done)).map((o) => o.appended)).toEqual([1, 2]);
  });
});
