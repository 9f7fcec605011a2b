// Look-ahead tail reads (src/sink/tail-prefetch.ts) and how the sink's stream states use them
// (src/sink/stream-states.ts): hints read once, taken once, forgotten when the stream's state
// changes meanwhile; no look-ahead while first touches are optimistic; the calls' own reads go
// first; the cache is never touched by a look-ahead. The reader is a stand-in whose reads resolve
// when the test says so (the real path: test/integration/sink-prefetch.test.ts).
import { describe, expect, it } from 'vitest';
import type { PreparedEvent } from '../../src/sink/encoding.js';
import { receiptToMetadata } from '../../src/sink/receipt.js';
import { createStreamStates, EMPTY_STREAM, TAIL_READ_CONCURRENCY, type CallStates, type StreamState } from '../../src/sink/stream-states.js';
import { createTailPrefetch } from '../../src/sink/tail-prefetch.js';
import type { TailRead, TailReader } from '../../src/sink/tail-reader.js';
import { deferred } from '../support/deferred.js';

const tick = () => new Promise((resolve) => setImmediate(resolve));

/** A tail reader whose reads wait until released; it records the order streams were asked for. */
function heldReader() {
  const asked: string[] = [];
  const pending = new Map<string, ReturnType<typeof deferred<TailRead>>[]>();
  const reader: TailReader = {
    readTail(stream) {
      asked.push(stream);
      const d = deferred<TailRead>();
      pending.set(stream, [...(pending.get(stream) ?? []), d]);
      return d.promise;
    },
    readBackWhile: async () => [],
    readLogHead: async () => 100n,
    close: async () => undefined,
  };
  /** Answers the oldest read of `stream`: its tail at `revision`, written by unit `xid` of assembler "a". */
  function answer(stream: string, revision: bigint, xid = 7): void {
    const d = pending.get(stream)?.shift();
    if (!d) throw new Error(`no read of ${stream} in flight`);
    const metadata = receiptToMetadata({ kind: 'transaction', assembler: 'a', commitLsn: '0/10', xid, ordinal: 0, count: 1 });
    d.resolve({ kind: 'event', revision, id: `id-${stream}-${revision}`, type: 'T', metadata });
  }
  function fail(stream: string): void {
    pending.get(stream)?.shift()?.reject(Object.assign(new Error('unavailable'), { type: 'unavailable' }));
  }
  return { reader, asked, answer, fail, inFlight: () => [...pending.values()].reduce((n, list) => n + list.length, 0) };
}

function states(reader: TailReader, maxCachedStreams = 1000) {
  const stats = { tailReads: 0, logHeadReads: 0, prefetchHits: 0 };
  const s = createStreamStates({
    maxCachedStreams,
    reader,
    logger: { info() {}, warn() {} },
    // One retry after a failure is enough for these tests.
    retrying: async (_operation, _details, call) => {
      try {
        return await call();
      } catch {
        return call();
      }
    },
    stats,
  });
  return { s, stats };
}

/** What an append of ours teaches: the stream is at `revision`, unit `xid` at its tail. */
function lastEvent(xid: number): PreparedEvent {
  return { receiptParts: { unit: { kind: 'transaction', assembler: 'a', commitLsn: '0/20', xid }, ordinal: 0, count: 1, scope: 'stream' } } as unknown as PreparedEvent;
}

const revisionOf = (state: StreamState | undefined) => state?.revision;

describe('createTailPrefetch', () => {
  it('reads each stream once, gives the state once, and holds at most `capacity` streams', async () => {
    const reads: string[] = [];
    const prefetch = createTailPrefetch<string>({ capacity: 3, read: async (stream) => (reads.push(stream), `state of ${stream}`) });
    expect(prefetch.start(['a', 'b', 'a'])).toBe(2);
    expect(prefetch.start(['b', 'c', 'd', 'e'])).toBe(1); // b is there; c fills it; d and e wait for room
    expect(reads).toEqual(['a', 'b', 'c']);
    await tick();
    expect(prefetch.take('a')).toBe('state of a');
    expect(prefetch.take('a')).toBeUndefined();
    expect(prefetch.size).toBe(2);
    expect(prefetch.start(['d'])).toBe(1);
  });

  it('a read in flight is taken as a promise; invalidated meanwhile, it gives null (the caller reads again)', async () => {
    const held = new Map<string, ReturnType<typeof deferred<string>>>();
    const prefetch = createTailPrefetch<string>({
      capacity: 10,
      read: (stream) => {
        const d = deferred<string>();
        held.set(stream, d);
        return d.promise;
      },
    });
    prefetch.start(['a', 'b']);
    const a = prefetch.take('a');
    const b = prefetch.take('b');
    expect(a).toBeInstanceOf(Promise);
    prefetch.invalidate('b'); // e.g. an append of ours landed in b while its read was on the way
    held.get('a')!.resolve('a@1');
    held.get('b')!.resolve('b@1 (stale)');
    expect(await a).toBe('a@1');
    expect(await b).toBeNull();
    expect(prefetch.size).toBe(0);
  });

  it('a failed read is forgotten: nothing to take, and it may be started again', async () => {
    const prefetch = createTailPrefetch<string>({ capacity: 10, read: async () => Promise.reject(new Error('down')) });
    prefetch.start(['a']);
    await tick();
    expect(prefetch.take('a')).toBeUndefined();
    expect(prefetch.start(['a'])).toBe(1);
    expect(await prefetch.take('a')).toBeNull();
  });
});

describe('stream states: look-ahead', () => {
  it('reads nothing ahead while first touches are optimistic (new streams cost no read)', async () => {
    const r = heldReader();
    const { s } = states(r.reader);
    s.warmUp();
    await tick();
    expect(s.prefetch(['s-1', 's-2'])).toBe(false);
    expect(r.asked).toEqual([]);
  });

  it('once first touches read: the tails of queued streams are read ahead and the call takes them without reading again', async () => {
    const r = heldReader();
    const { s, stats } = states(r.reader);
    s.optimisticMissed(1);
    expect(s.prefetch(['s-1', 's-2', 's-3'])).toBe(true);
    expect(s.prefetch(['s-1'])).toBe(true); // already on the way: not read twice
    expect(r.asked).toEqual(['s-1', 's-2', 's-3']);
    r.answer('s-1', 4n);
    await tick();
    const known: CallStates = new Map();
    const resolving = s.resolve(['s-1', 's-2'], known);
    r.answer('s-2', 9n);
    await resolving;
    expect(r.asked).toEqual(['s-1', 's-2', 's-3']); // no read of the call's own
    expect(revisionOf(known.get('s-1'))).toBe(4n);
    expect(revisionOf(known.get('s-2'))).toBe(9n);
    expect(known.get('s-1')!.receipt).toMatchObject({ assembler: 'a', xid: 7 });
    expect(stats.prefetchHits).toBe(2);
    expect(s.cached('s-1')?.revision).toBe(4n); // taken into the cache, as a read of the call's own is
    expect(s.cached('s-3')).toBeUndefined(); // not taken yet: not in the cache
  });

  it('a state set by an append of ours after the look-ahead started wins over what that read saw', async () => {
    const r = heldReader();
    const { s, stats } = states(r.reader);
    s.optimisticMissed(1);
    s.prefetch(['s-1', 's-2']);
    // s-1: read answered before our append landed (it saw revision 4), then the append landed at 5.
    r.answer('s-1', 4n);
    await tick();
    s.learned('s-1', 5n, lastEvent(8));
    // s-2: our append landed (revision 2) while the read was on the way; the read then saw revision 1.
    s.learned('s-2', 2n, lastEvent(8));
    r.answer('s-2', 1n);
    await tick();
    const known: CallStates = new Map();
    await s.resolve(['s-1', 's-2'], known);
    expect(revisionOf(known.get('s-1'))).toBe(5n);
    expect(revisionOf(known.get('s-2'))).toBe(2n);
    expect(stats.prefetchHits).toBe(0);
  });

  it('a dropped stream (a failure) loses its look-ahead state; the call reads its tail again', async () => {
    const r = heldReader();
    const { s } = states(r.reader);
    s.optimisticMissed(1);
    s.prefetch(['s-1']);
    r.answer('s-1', 3n);
    await tick();
    s.drop('s-1');
    const known: CallStates = new Map();
    const resolving = s.resolve(['s-1'], known);
    await tick();
    expect(r.asked).toEqual(['s-1', 's-1']);
    r.answer('s-1', 6n);
    await resolving;
    expect(revisionOf(known.get('s-1'))).toBe(6n);
  });

  it('a failed look-ahead read costs the call its own read, nothing else', async () => {
    const r = heldReader();
    const { s } = states(r.reader);
    s.optimisticMissed(1);
    s.prefetch(['s-1']);
    const known: CallStates = new Map();
    const resolving = s.resolve(['s-1'], known);
    r.fail('s-1');
    await tick();
    await tick();
    expect(r.asked).toEqual(['s-1', 's-1']);
    r.answer('s-1', 2n);
    await resolving;
    expect(revisionOf(known.get('s-1'))).toBe(2n);
  });

  it("a call's own reads go before waiting look-ahead reads", async () => {
    const r = heldReader();
    const { s } = states(r.reader);
    s.optimisticMissed(1);
    const ahead = Array.from({ length: TAIL_READ_CONCURRENCY + 10 }, (_, i) => `ahead-${i}`);
    s.prefetch(ahead);
    await tick();
    expect(r.inFlight()).toBe(TAIL_READ_CONCURRENCY);
    const known: CallStates = new Map();
    const resolving = s.resolve(['own'], known);
    await tick();
    r.answer('ahead-0', 1n);
    await tick();
    await tick();
    expect(r.asked[TAIL_READ_CONCURRENCY]).toBe('own');
    r.answer('own', 0n);
    await resolving;
    expect(revisionOf(known.get('own'))).toBe(0n);
    for (const stream of ahead.slice(1)) {
      await until(() => r.asked.includes(stream));
      r.answer(stream, 1n);
    }
  });

  it('reading ahead never evicts cached streams, and streams already cached are not read', async () => {
    const r = heldReader();
    // Room for 8 (two generations of 4): the 4 cached ones are all young, so nothing moves when they are looked at.
    const { s } = states(r.reader, 8);
    for (let i = 0; i < 4; i++) s.learned(`c-${i}`, 1n, lastEvent(1));
    s.optimisticMissed(1);
    s.prefetch(['c-0', 'c-1', ...Array.from({ length: 20 }, (_, i) => `n-${i}`)]);
    expect(r.asked).toHaveLength(20);
    expect(r.asked.some((stream) => stream.startsWith('c-'))).toBe(false);
    for (let i = 0; i < 20; i++) r.answer(`n-${i}`, 0n);
    await tick();
    expect(s.size).toBe(4);
    for (let i = 0; i < 4; i++) expect(s.cached(`c-${i}`)?.revision).toBe(1n);
  });

  it('a look-ahead finding no stream gives the empty state (appended as no_stream)', async () => {
    const notFound: TailReader = { readTail: async () => ({ kind: 'not-found' }), readBackWhile: async () => [], readLogHead: async () => 1n, close: async () => undefined };
    const { s } = states(notFound);
    s.optimisticMissed(1);
    s.prefetch(['new-1']);
    await tick();
    const known: CallStates = new Map();
    await s.resolve(['new-1'], known);
    expect(known.get('new-1')).toBe(EMPTY_STREAM);
  });
});

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !condition(); i++) await tick();
  if (!condition()) throw new Error('condition not reached');
}
