// The stream-state cache carried over a stop (sink/state-carry.ts): the next sink of the assembler
// appends to streams it has not touched without reading their tails; the states are taken once;
// into a smaller cache, the states the last sink would have kept longest are the ones taken;
// a carried state that went out of date (a run that stopped without saving) is a cache miss, not
// a conflict; another writer is still a conflict.
import { describe, expect, it } from 'vitest';
import { jsonEvent, KurrentDBClient } from '@kurrent/kurrentdb-client';
import type { InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import { StreamConflictError, stateStreamName, type KurrentDBSink, type SinkEvent, type TransactionSinkPosition } from '../../src/sink/index.js';
import { uuidv5 } from '../../src/sink/encoding.js';
import { waitFor } from '../resilience/assembler-process.js';
import { sinkFactory, useInMemoryKurrentDB, type LogLine } from '../support/kurrentdb-rig.js';

const { cleanups, server } = useInMemoryKurrentDB();
// Room for every state these tests make: a snapshot's take at most 2 % of the cache (400 here, for 300 orders).
const sink = sinkFactory(cleanups, { maxCachedStreams: 20_000 });
const ASSEMBLER = 'carry';
const STREAMS = Array.from({ length: 300 }, (_, i) => `order-${i}`);
/** The streams a sink of these tests knows: the orders and its checkpoint stream. */
const KNOWN = STREAMS.length + 1;

/** Transaction `n`: one event on each of `streams`. */
function tx(n: number, streams: readonly string[]): { position: TransactionSinkPosition; events: SinkEvent[] } {
  const commitLsn = `0/${(0x10000 + n * 0x100).toString(16).toUpperCase()}`;
  return {
    position: { checkpoint: `v1:1:1:slot:${commitLsn}:${n}`, commitLsn, xid: 900 + n, systemId: '1' },
    events: streams.map((stream, i) => ({ id: uuidv5(JSON.stringify(['carry', n, i])), stream, type: 'OrderChanged', data: { n }, metadata: {} })),
  };
}

/** One unit per stream (as a bulk after a restart: each order updated on its own). */
const perStream = (n: number, streams: readonly string[] = STREAMS) => streams.map((stream, i) => tx(n * 10_000 + i, [stream]));

async function carrying(db: InMemoryKurrentDB, logs: LogLine[] = []): Promise<KurrentDBSink> {
  return sink(db, { assembler: ASSEMBLER, stateStream: stateStreamName(ASSEMBLER) }, logs);
}

/** A sink that appends `units` and stops gracefully: its stream states are saved for the next one. */
async function stopAfter(db: InMemoryKurrentDB, units: ReturnType<typeof perStream>): Promise<void> {
  const first = await carrying(db);
  await first.appendMany(units);
  await first.close();
}

/** Every stream holds each event once, in order. */
function expectExactlyOnce(db: InMemoryKurrentDB, rounds: number[]): void {
  for (const [i, stream] of STREAMS.entries()) {
    const ids = db.readStreamEvents(stream).map((event) => event.id);
    expect(ids).toEqual(rounds.map((n) => uuidv5(JSON.stringify(['carry', n * 10_000 + i, 0]))));
  }
}

describe('stream states carried over a stop', () => {
  it('let the next sink append to every known stream without reading a tail, once', async () => {
    const db = await server();
    await stopAfter(db, perStream(1));

    const logs: LogLine[] = [];
    const second = await carrying(db, logs);
    expect(second.status().cachedStreams).toBe(KNOWN);
    expect(logs.some((l) => l.message.includes('carried over from the last stop') && l.fields?.['states'] === KNOWN)).toBe(true);
    const outcomes = await second.appendMany(perStream(2));
    expect(outcomes.every((o) => o.appended === 1)).toBe(true);
    expect(second.status().tailReads).toBe(0);
    await second.close();

    // The second sink saved again at its close; a third takes that save — and a fourth nothing (taken).
    const third = await carrying(db);
    expect(third.status().cachedStreams).toBe(KNOWN);
    await third.appendMany(perStream(3));
    expect(third.status().tailReads).toBe(0);
    const fourthLogs: LogLine[] = [];
    const fourth = await sink(db, { assembler: ASSEMBLER, stateStream: stateStreamName(ASSEMBLER) }, fourthLogs);
    expect(fourth.status().cachedStreams).toBe(0);
    expectExactlyOnce(db, [1, 2, 3]);
  });

  it('into a smaller cache: the states the last sink would have kept longest are the ones taken', async () => {
    const db = await server();
    // Every order once, then the last 50 again: those (and the checkpoint stream) were used twice.
    const first = await carrying(db);
    await first.appendMany(perStream(1));
    await first.appendMany(perStream(2, STREAMS.slice(250)));
    await first.close();

    const logs: LogLine[] = [];
    const second = await sink(db, { assembler: ASSEMBLER, stateStream: stateStreamName(ASSEMBLER), maxCachedStreams: 60 }, logs);
    expect(second.status().cachedStreams).toBe(60);
    expect(logs.some((l) => l.message.includes('carried over from the last stop') && l.fields?.['states'] === 60)).toBe(true);
    await second.appendMany(perStream(3, STREAMS.slice(250)));
    expect(second.status().tailReads).toBe(0);
    // The streams used once, first in the carried order, were the ones left out.
    await second.appendMany(perStream(4, STREAMS.slice(0, 10)));
    expect(second.status().tailReads).toBe(10);
  });

  it('replays a unit the stream already holds by skipping it, without reading', async () => {
    const db = await server();
    await stopAfter(db, [...perStream(1), ...perStream(2)]);
    const second = await carrying(db);
    const replay = await second.appendMany(perStream(2));
    expect(replay.every((o) => o.appended === 0 && o.skipped === 1)).toBe(true);
    expect(second.status().tailReads).toBe(0);
    expectExactlyOnce(db, [1, 2]);
  });

  it('carries snapshot records\' receipts too: a replayed snapshot is skipped without reading, and the stream goes on from there', async () => {
    const db = await server();
    // An initial snapshot of the orders in two chunks (the receipts a save writes compactly: one shared row per chunk).
    const record = (i: number, stream: string) => ({
      position: { kind: 'snapshot' as const, systemId: '1', snapshotGeneration: 'g-1', lsn: i < 150 ? '0/100' : '0/200', sequence: i, table: 'public.orders', key: JSON.stringify([['id', i]]) },
      events: [{ id: uuidv5(JSON.stringify(['carry-snapshot', i])), stream, type: 'OrderSnapshotted', data: { i }, metadata: {} }],
    });
    const snapshot = STREAMS.map((stream, i) => record(i, stream));
    const first = await carrying(db);
    await first.appendMany(snapshot);
    await first.close();

    const logs: LogLine[] = [];
    const second = await carrying(db, logs);
    expect(logs.some((l) => l.message.includes('carried over from the last stop') && l.fields?.['states'] === KNOWN)).toBe(true);
    const replay = await second.appendMany(snapshot);
    expect(replay.every((o) => o.appended === 0 && o.skipped === 1)).toBe(true);
    const after = await second.appendMany(perStream(2));
    expect(after.every((o) => o.appended === 1)).toBe(true);
    expect(second.status().tailReads).toBe(0);
    for (const [i, stream] of STREAMS.entries()) {
      expect(db.readStreamEvents(stream).map((event) => event.id)).toEqual([uuidv5(JSON.stringify(['carry-snapshot', i])), uuidv5(JSON.stringify(['carry', 20_000 + i, 0]))]);
    }
  });

  it('treats a state that went out of date (a later run that stopped without saving) as a cache miss', async () => {
    const db = await server();
    await stopAfter(db, perStream(1)); // saves: every stream at its round-1 event

    // A run that takes the save, appends round 2 to half the streams and dies without saving
    // (here: its states are taken, then it appends with a sink that carries nothing).
    const taker = await carrying(db);
    await taker.appendMany(perStream(2, STREAMS.slice(0, 150)));
    // Stand-in for a save from before round 2 still being around: write the first save again.
    const client = KurrentDBClient.connectionString(db.connectionString);
    cleanups.push(() => client.dispose());
    const saved = db.readStreamEvents(stateStreamName(ASSEMBLER)).filter((event) => event.type === 'StreamStatesSaved');
    const firstSave = JSON.parse(Buffer.from(saved[0]!.data).toString('utf8')) as { save: string };
    for (const event of saved.filter((e) => (JSON.parse(Buffer.from(e.data).toString('utf8')) as { save: string }).save === firstSave.save)) {
      await client.appendToStream(stateStreamName(ASSEMBLER), jsonEvent({ type: 'StreamStatesSaved', data: JSON.parse(Buffer.from(event.data).toString('utf8')) as Record<string, unknown> }));
    }

    const logs: LogLine[] = [];
    const restarted = await carrying(db, logs);
    expect(restarted.status().cachedStreams).toBe(KNOWN);
    // The replay of round 2 (its first half landed) and round 3: each event once, no conflict.
    await restarted.appendMany(perStream(2));
    await restarted.appendMany(perStream(3));
    expect(logs.some((l) => l.message.includes('moved since its state was carried'))).toBe(true);
    expectExactlyOnce(db, [1, 2, 3]);
  });

  it('are taken after an outage that began as the sink started (a fresh client per attempt)', async () => {
    const db = await server();
    await stopAfter(db, perStream(1));
    // The outage begins right after the sink's start-up checks, as it reads the carried states:
    // a client whose native bridge failed its first connection stays failed after the server is
    // back (the chaos run met it), so each attempt must use a fresh one.
    const logs: LogLine[] = [];
    let stopped: Promise<void> | null = null;
    const watching: LogLine[] = new Proxy(logs, {
      get(target, key, receiver) {
        if (key === 'push') {
          return (line: LogLine) => {
            if (line.message === 'kurrentdb sink started' && !stopped) stopped = db.stop();
            return target.push(line);
          };
        }
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    const starting = carrying(db, watching);
    await waitFor('the start to retry the carried states', () => logs.some((l) => l.level === 'warn' && l.fields?.['operation'] === 'load-stream-states'), { timeoutMs: 30_000 });
    await stopped;
    await db.start();
    const second = await starting;
    expect(second.status().cachedStreams).toBe(KNOWN);
    await second.appendMany(perStream(2));
    expect(second.status().tailReads).toBe(0);
    expectExactlyOnce(db, [1, 2]);
  });

  it('still stops at another writer\'s event, named', async () => {
    const db = await server();
    await stopAfter(db, perStream(1));
    const client = KurrentDBClient.connectionString(db.connectionString);
    cleanups.push(() => client.dispose());
    await client.appendToStream('order-7', jsonEvent({ type: 'Foreign', data: {} }));
    const second = await carrying(db);
    const error = await second.appendMany(perStream(2)).then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(StreamConflictError);
    expect((error as StreamConflictError).details).toMatchObject({ stream: 'order-7', reason: 'foreign-tail' });
  });
});
