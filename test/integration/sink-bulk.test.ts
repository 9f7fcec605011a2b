// The KurrentDB sink with bulk units: one transaction over thousands of streams that exist but
// that the sink has never seen (a restart), cut into dozens of appends, interrupted and replayed;
// units appended in slices (receipt scope `unit`), also after a version that did not slice
// wrote part of them; a foreign writer among thousands of streams. Real client over gRPC,
// in-memory KurrentDB.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { jsonEvent, KurrentDBClient } from '@kurrent/kurrentdb-client';
import type { InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import {
  receiptFromMetadata,
  SLICED_UNIT_EVENTS,
  StreamConflictError,
  type SinkBatch,
  type SinkEvent,
  type TransactionSinkPosition,
} from '../../src/sink/index.js';
import { uuidv5 } from '../../src/sink/encoding.js';
import { crashAtAppend, sinkFactory, useInMemoryKurrentDB, type LogLine } from '../support/kurrentdb-rig.js';

const { cleanups, server } = useInMemoryKurrentDB();

const sink = sinkFactory(cleanups, { checkpointStream: false });

const SYSTEM_ID = '7391029384756102938';

function position(n: number): TransactionSinkPosition {
  const commitLsn = `0/${(0x10000 + n * 0x100).toString(16).toUpperCase()}`;
  return { checkpoint: `v1:${SYSTEM_ID}:1:slot_a:${commitLsn}:${800 + n}`, commitLsn, xid: 800 + n, systemId: SYSTEM_ID };
}

/** Transaction `n`: one event per stream (a bulk statement), ids deterministic in (scope, n, index). */
function bulk(scope: string, n: number, streams: readonly string[], type = 'OrderStatusChanged', noteBytes = 200): SinkBatch {
  return {
    position: position(n),
    events: streams.map((stream, index): SinkEvent => ({
      id: uuidv5(JSON.stringify([scope, n, index])),
      stream,
      type,
      data: { n, index, note: 'x'.repeat(noteBytes) },
      metadata: { 'transaction.index': String(index), 'transaction.count': String(streams.length), contract: `${type}@1` },
    })),
  };
}

/** The batch in slices of `size` events (what the pipeline does with a unit of more than SLICED_UNIT_EVENTS). */
function sliced(batch: SinkBatch, size = SLICED_UNIT_EVENTS): SinkBatch[] {
  const out: SinkBatch[] = [];
  for (let offset = 0; offset < batch.events.length; offset += size) {
    out.push({ position: batch.position, events: batch.events.slice(offset, offset + size), slice: { offset, total: batch.events.length } });
  }
  return out;
}

function ids(db: InMemoryKurrentDB, stream: string): string[] {
  return db.readStreamEvents(stream).map((event) => event.id);
}

function metadataOf(db: InMemoryKurrentDB, stream: string): Record<string, string>[] {
  return db.readStreamEvents(stream).map((event) => JSON.parse(Buffer.from(event.metadata).toString('utf8')) as Record<string, string>);
}

/** Every stream holds exactly the given units' events for it, in unit order. */
function expectExactlyOnce(db: InMemoryKurrentDB, units: readonly SinkBatch[]): void {
  const expected = new Map<string, string[]>();
  for (const unit of units) for (const event of unit.events) expected.set(event.stream, [...(expected.get(event.stream) ?? []), event.id]);
  const wrong = [...expected].filter(([stream, list]) => JSON.stringify(ids(db, stream)) !== JSON.stringify(list));
  expect(wrong.slice(0, 3).map(([stream, list]) => ({ stream, expected: list, actual: ids(db, stream) }))).toEqual([]);
}

const streamsOf = (id: string, count: number, from = 0): string[] => Array.from({ length: count }, (_, i) => `order-${id}-${from + i}`);

/** `count` streams that exist (one OrderPlaced each, written by a sink since closed: nothing of them is cached). */
async function existingStreams(db: InMemoryKurrentDB, id: string, assembler: string, count: number): Promise<{ streams: string[]; created: SinkBatch }> {
  const streams = streamsOf(id, count);
  const created = bulk(id, 1, streams, 'OrderPlaced');
  const setup = await sink(db, { assembler });
  await setup.appendMany(sliced(created));
  await setup.close();
  return { streams, created };
}

describe.each([
  { mode: 'multi-stream' as const, features: { multiStreamAppend: true } },
  { mode: 'per-stream' as const, features: { multiStreamAppend: false } },
])('KurrentDB sink, bulk units, $mode', ({ mode, features }) => {
  const N = mode === 'multi-stream' ? 3_000 : 1_200;

  it(`one unit over ${N} existing streams the sink has never seen, cut into dozens of appends, lands exactly once`, async () => {
    const db = await server({ features });
    const id = randomUUID().slice(0, 8);
    const assembler = `asm_${id}`;
    const { streams, created } = await existingStreams(db, id, assembler, N);

    // A restart: a new sink knows nothing; every stream exists. 16 KiB appends: ~40 events each.
    const logs: LogLine[] = [];
    const fresh = await sink(db, { assembler, maxAppendSize: 16_384 }, logs);
    const update = bulk(id, 2, streams);
    const outcomes = await fresh.appendMany(sliced(update));
    expect(outcomes.reduce((n, o) => n + o.appended, 0)).toBe(N);
    expectExactlyOnce(db, [created, update]);
    const status = fresh.status();
    // One failed optimistic append taught the sink to read first: about one read per stream, no re-plan storm.
    expect(status.tailReads).toBeGreaterThanOrEqual(N);
    expect(status.tailReads).toBeLessThan(N * 1.1);
    expect(status.firstTouch).toBe('read');
    expect(logs.filter((line) => line.message.includes('first touches read the stream')).length).toBeGreaterThanOrEqual(1);
    if (mode === 'multi-stream') expect(status.splitCalls).toBeGreaterThan(0);
  });

  it('the same with the stream cache far below the working set (100 streams)', async () => {
    const db = await server({ features });
    const id = randomUUID().slice(0, 8);
    const assembler = `asm_${id}`;
    const streams = streamsOf(id, N);
    const created = bulk(id, 1, streams, 'OrderPlaced');
    const small = await sink(db, { assembler, maxCachedStreams: 100, maxAppendSize: 65_536 });
    for (const slice of sliced(created)) await small.append(slice);
    const update = bulk(id, 2, streams);
    // One call holding every slice: more streams than the cache, yet nothing is lost mid-call.
    const outcomes = await small.appendMany(sliced(update));
    expect(outcomes.reduce((n, o) => n + o.appended, 0)).toBe(N);
    const again = bulk(id, 3, streams);
    for (const slice of sliced(again)) await small.append(slice);
    expectExactlyOnce(db, [created, update, again]);
    expect(small.status().cachedStreams).toBeLessThanOrEqual(100);
  });

  it('a bulk unit interrupted after some of its appends is finished by a new sink, each event exactly once', async () => {
    const db = await server({ features });
    const id = randomUUID().slice(0, 8);
    const assembler = `asm_${id}`;
    const { streams, created } = await existingStreams(db, id, assembler, N);
    const update = bulk(id, 2, streams);
    const dying = await sink(db, { assembler, maxAppendSize: 16_384, hooks: crashAtAppend(mode === 'multi-stream' ? 7 : 300) });
    await expect(dying.appendMany(sliced(update))).rejects.toThrow('simulated crash');
    await dying.close();
    const landed = streams.filter((stream) => ids(db, stream).length === 2).length;
    expect(landed).toBeGreaterThan(0);
    expect(landed).toBeLessThan(N);

    const replaying = await sink(db, { assembler, maxAppendSize: 16_384 });
    const outcomes = await replaying.appendMany(sliced(update));
    expect(outcomes.reduce((n, o) => n + o.appended, 0)).toBe(N - landed);
    expect(outcomes.reduce((n, o) => n + o.skipped, 0)).toBe(landed);
    expectExactlyOnce(db, [created, update]);
  });

  it('a unit a version without slicing wrote in part is finished in slices: what landed is told by event id', async () => {
    const db = await server({ features });
    const id = randomUUID().slice(0, 8);
    const assembler = `asm_${id}`;
    // 1,500 events on 1,000 streams: every third stream gets two events of the unit, so per-stream
    // ordinals (0, 1) and unit ordinals (0 … 1,499) differ.
    const streams = streamsOf(id, 1_000);
    const twice = streams.flatMap((stream, i) => (i % 2 === 0 ? [stream, stream] : [stream]));
    // 9 KB events, 16 KiB appends: one event per append, so the crash leaves a stream with one of its two.
    const unit = bulk(id, 1, twice, 'OrderStatusChanged', 9_000);
    const old = await sink(db, { assembler, maxAppendSize: 16_384, hooks: crashAtAppend(200) });
    // Handed over whole (no slice): numbered per stream, as before slicing existed.
    await expect(old.append(unit)).rejects.toThrow('simulated crash');
    await old.close();
    const partial = streams.find((stream, i) => i % 2 === 0 && ids(db, stream).length === 1);
    expect(partial).toBeDefined();
    expect(streams.some((stream) => ids(db, stream).length > 0)).toBe(true);
    const first = receiptFromMetadata(metadataOf(db, streams[0]!)[0]);
    expect(first).toMatchObject({ ordinal: 0, count: 2 });
    expect(first?.scope).toBeUndefined();

    const sliceSink = await sink(db, { assembler, maxAppendSize: 16_384 });
    await sliceSink.appendMany(sliced(unit));
    expectExactlyOnce(db, [unit]);
    // A stream the first attempt never reached carries the new numbering.
    const last = streams[streams.length - 1]!;
    expect(ids(db, last)).toHaveLength(1);
    expect(receiptFromMetadata(metadataOf(db, last).at(-1))).toMatchObject({ scope: 'unit', ordinal: twice.length - 1, count: twice.length });
    expect(ids(db, partial!)).toHaveLength(2);
  });

  it('another writer on one stream of a bulk unit stops it loudly, naming that stream', async () => {
    const db = await server({ features });
    const id = randomUUID().slice(0, 8);
    const assembler = `asm_${id}`;
    const { streams } = await existingStreams(db, id, assembler, N);
    const victim = streams[Math.floor(N * 0.7)]!;
    const other = KurrentDBClient.connectionString(db.connectionString);
    cleanups.push(() => other.dispose());
    await other.appendToStream(victim, jsonEvent({ type: 'SomethingElse', data: { by: 'someone else' } }));

    const fresh = await sink(db, { assembler, maxAppendSize: 16_384 });
    const error = (await fresh.appendMany(sliced(bulk(id, 2, streams))).catch((e: unknown) => e)) as StreamConflictError;
    expect(error).toBeInstanceOf(StreamConflictError);
    expect(error.details).toMatchObject({ stream: victim, reason: 'foreign-tail' });
    expect(ids(db, victim)).toHaveLength(2);
  });
});

describe('KurrentDB sink, slices', () => {
  it('numbers a sliced unit across the unit (receipt.scope = unit), and first touches go back to optimistic for new streams', async () => {
    const db = await server();
    const id = randomUUID().slice(0, 8);
    const assembler = `asm_${id}`;
    const streams = streamsOf(id, 2_500);
    const s = await sink(db, { assembler });
    const created = bulk(id, 1, streams, 'OrderPlaced');
    await s.appendMany(sliced(created));
    const receipt = receiptFromMetadata(metadataOf(db, streams[1_234]!)[0]);
    expect(receipt).toMatchObject({ kind: 'transaction', ordinal: 1_234, count: 2_500, scope: 'unit' });

    // After a restart: an update over them (read first), then a bulk insert of new streams.
    const fresh = await sink(db, { assembler });
    await fresh.appendMany(sliced(bulk(id, 2, streams)));
    expect(fresh.status().firstTouch).toBe('read');
    const newcomers = streamsOf(id, 1_500, 10_000);
    await fresh.appendMany(sliced(bulk(id, 3, newcomers, 'OrderPlaced')));
    expect(fresh.status().firstTouch).toBe('optimistic');
    const reads = fresh.status().tailReads!;
    await fresh.appendMany(sliced(bulk(id, 4, streamsOf(id, 1_500, 20_000), 'OrderPlaced')));
    expect(fresh.status().tailReads).toBe(reads);
  });

  it('refuses a slice of a unit small enough to be whole, and a slice that does not fit its unit', async () => {
    const db = await server();
    const id = randomUUID().slice(0, 8);
    const s = await sink(db, { assembler: `asm_${id}` });
    const unit = bulk(id, 1, streamsOf(id, 10));
    await expect(s.append({ ...unit, slice: { offset: 0, total: 10 } })).rejects.toMatchObject({ code: 'SINK_INVALID_POSITION' });
    await expect(s.append({ ...unit, slice: { offset: 1_995, total: 2_000 } })).rejects.toMatchObject({ code: 'SINK_INVALID_POSITION' });
    expect(ids(db, `order-${id}-0`)).toHaveLength(0);
  });
});
