// The in-memory KurrentDB against the real @kurrent/kurrentdb-client over gRPC on loopback:
// appends through BatchAppend, Append and AppendSession, reads through the native bridge,
// subscriptions, deletes, metadata, limits, and the fault-injection controls.
import * as grpc from '@grpc/grpc-js';
import {
  BACKWARDS,
  END,
  eventTypeFilter,
  excludeSystemEvents,
  FORWARDS,
  jsonEvent,
  KurrentDBClient,
  MaxAppendSizeExceededError,
  START,
  StreamDeletedError,
  StreamNotFoundError,
  streamNameFilter,
  TimeoutError,
  UnavailableError,
  UnsupportedError,
  WrongExpectedVersionError,
  type AllStreamResolvedEvent,
  type Position,
  type ResolvedEvent,
  type StreamSubscription,
} from '@kurrent/kurrentdb-client';
import serverFeaturesGrpc from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/serverfeatures_grpc_pb.js';
import sharedPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/shared_pb.js';
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of iterable) items.push(item);
  return items;
}

/** Polls `condition` until it holds or the deadline passes. */
async function waitFor(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

const event = (type: string, data: Record<string, unknown> = {}, id: string = randomUUID()) => jsonEvent({ id, type, data });
const types = (events: ReadonlyArray<ResolvedEvent | AllStreamResolvedEvent>) => events.map((e) => e.event?.type);
const revisions = (events: ReadonlyArray<ResolvedEvent>) => events.map((e) => e.event?.revision);

describe('in-memory KurrentDB with the real client', () => {
  let db: InMemoryKurrentDB;
  let client: KurrentDBClient;
  const stream = (name: string) => `${name}-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    db = await startInMemoryKurrentDB();
    client = KurrentDBClient.connectionString(db.connectionString);
  });
  afterAll(async () => {
    await client.dispose();
    await db.close();
  });

  it('advertises its methods and a version through ServerFeatures.GetSupportedMethods', async () => {
    const features = new serverFeaturesGrpc.ServerFeaturesClient(`127.0.0.1:${db.port}`, grpc.credentials.createInsecure());
    try {
      const supported = await new Promise<{ version: string; methods: string[] }>((resolve, reject) =>
        features.getSupportedMethods(new sharedPb.Empty(), (error, response) =>
          error
            ? reject(error)
            : resolve({
                version: response.getEventStoreServerVersion(),
                methods: response.getMethodsList().map((m) => `${m.getServiceName()}/${m.getMethodName()}`),
              }),
        ),
      );
      expect(supported.version).toMatch(/^\d+\.\d+\.\d+$/);
      expect(supported.methods).toEqual(
        expect.arrayContaining([
          'event_store.client.streams.streams/read',
          'event_store.client.streams.streams/append',
          'event_store.client.streams.streams/batchappend',
          'event_store.client.streams.streams/delete',
          'event_store.client.streams.streams/tombstone',
          'kurrentdb.protocol.v2.streams.streamsservice/appendsession',
        ]),
      );
    } finally {
      features.close();
    }
  });

  it('appends and reads a stream forwards and backwards, with fromRevision and maxCount (bridge reads)', async () => {
    const name = stream('order');
    const result = await client.appendToStream(name, [event('A', { n: 0 }), event('B', { n: 1 }), event('C', { n: 2 })], { streamState: 'no_stream' });
    expect(result.nextExpectedRevision).toBe(2n);
    expect(result.position?.commit).toBeGreaterThan(0n);

    const all = await collect(client.readStream(name));
    expect(types(all)).toEqual(['A', 'B', 'C']);
    expect(revisions(all)).toEqual([0n, 1n, 2n]);
    expect(all[1]?.event?.data).toEqual({ n: 1 });
    expect(all[2]?.event?.position?.commit).toBe(result.position?.commit);

    expect(Math.abs(all[0]!.event!.created.getTime() - Date.now())).toBeLessThan(60_000);
    expect(types(await collect(client.readStream(name, { fromRevision: 1n, maxCount: 1 })))).toEqual(['B']);
    expect(types(await collect(client.readStream(name, { direction: BACKWARDS, fromRevision: END })))).toEqual(['C', 'B', 'A']);
    expect(types(await collect(client.readStream(name, { direction: BACKWARDS, fromRevision: 1n, maxCount: 5 })))).toEqual(['B', 'A']);
    expect(types(await collect(client.readStream(name, { direction: FORWARDS, fromRevision: START, maxCount: 2 })))).toEqual(['A', 'B']);
  });

  it('reports a missing stream as StreamNotFoundError', async () => {
    expect(await rejection(collect(client.readStream(stream('missing'))))).toBeInstanceOf(StreamNotFoundError);
  });

  it('checks expected revisions and reports the actual revision', async () => {
    const name = stream('rev');
    await client.appendToStream(name, [event('A'), event('B')], { streamState: 'no_stream' });

    const noStream = await rejection(client.appendToStream(name, event('X'), { streamState: 'no_stream' }));
    expect(noStream).toBeInstanceOf(WrongExpectedVersionError);
    expect((noStream as WrongExpectedVersionError).actualState).toBe(1n);

    const numeric = await rejection(client.appendToStream(name, event('X'), { streamState: 5n }));
    expect((numeric as WrongExpectedVersionError).actualState).toBe(1n);
    expect((numeric as WrongExpectedVersionError).expectedState).toBe(5n);

    const exists = await rejection(client.appendToStream(stream('absent'), event('X'), { streamState: 'stream_exists' }));
    expect((exists as WrongExpectedVersionError).actualState).toBe('no_stream');

    expect((await client.appendToStream(name, event('C'), { streamState: 1n })).nextExpectedRevision).toBe(2n);
    expect((await client.appendToStream(name, event('D'), { streamState: 'stream_exists' })).nextExpectedRevision).toBe(3n);
    expect((await client.appendToStream(name, event('E'), { streamState: 'any' })).nextExpectedRevision).toBe(4n);
  });

  it('strong idempotency: a retry at a specific revision writes nothing and returns the original result', async () => {
    const name = stream('strong');
    const batch = [event('A'), event('B')];
    const first = await client.appendToStream(name, batch, { streamState: 'no_stream' });
    await client.appendToStream(name, event('C'), { streamState: 1n });

    const retry = await client.appendToStream(name, batch, { streamState: 'no_stream' });
    expect(retry.nextExpectedRevision).toBe(first.nextExpectedRevision);
    expect(retry.position).toEqual(first.position);
    expect(db.readStreamEvents(name).map((e) => e.type)).toEqual(['A', 'B', 'C']);

    // Only part of the batch matches what sits at those revisions: "corrupted idempotency".
    const partial = await rejection(client.appendToStream(name, [batch[0]!, event('Z')], { streamState: 'no_stream' }));
    expect(partial).toBeInstanceOf(WrongExpectedVersionError);
    expect((partial as WrongExpectedVersionError).actualState).toBe(2n);
  });

  it('weak idempotency: an `any` retry is deduplicated until a restart empties the cache', async () => {
    const name = stream('weak');
    const retried = event('A');
    await client.appendToStream(name, retried, { streamState: 'any' });
    await client.appendToStream(name, retried, { streamState: 'any' });
    expect(db.readStreamEvents(name)).toHaveLength(1);

    await db.restart();
    const afterRestart = await appendWithReconnect(() => client.appendToStream(name, retried, { streamState: 'any' }));
    expect(afterRestart.nextExpectedRevision).toBe(1n);
    expect(db.readStreamEvents(name).map((e) => e.id)).toEqual([retried.id, retried.id]);
  });

  it('weak idempotency only remembers the most recent event ids (a bounded FIFO)', async () => {
    const small = await startInMemoryKurrentDB({ idempotencyCacheSize: 2 });
    const smallClient = KurrentDBClient.connectionString(small.connectionString);
    try {
      const name = stream('fifo');
      const oldest = event('A');
      await smallClient.appendToStream(name, [oldest, event('B'), event('C')], { streamState: 'any' });
      await smallClient.appendToStream(name, oldest, { streamState: 'any' }); // evicted: written again
      expect(small.readStreamEvents(name).map((e) => e.type)).toEqual(['A', 'B', 'C', 'A']);
      // ...while the strong check at a specific revision still finds it in the index.
      expect((await smallClient.appendToStream(name, oldest, { streamState: 'no_stream' })).nextExpectedRevision).toBe(0n);
      expect(small.readStreamEvents(name)).toHaveLength(4);
    } finally {
      await smallClient.dispose();
      await small.close();
    }
  });

  /** After a server restart the first call on the old channel may fail with UNAVAILABLE. */
  async function appendWithReconnect<T>(append: () => Promise<T>): Promise<T> {
    try {
      return await append();
    } catch (error) {
      if (!(error instanceof UnavailableError)) throw error;
      return append();
    }
  }

  it('soft delete hides the stream; appending recreates it with continuing revisions', async () => {
    const name = stream('soft');
    await client.appendToStream(name, [event('A'), event('B')]);
    await client.deleteStream(name);

    expect(await rejection(collect(client.readStream(name)))).toBeInstanceOf(StreamNotFoundError);
    expect((await client.getStreamMetadata(name)).metadata?.truncateBefore).toBeGreaterThan(Number.MAX_SAFE_INTEGER);

    const recreated = await client.appendToStream(name, event('C'), { streamState: 'no_stream' });
    expect(recreated.nextExpectedRevision).toBe(2n);
    const read = await collect(client.readStream(name));
    expect(types(read)).toEqual(['C']);
    expect(revisions(read)).toEqual([2n]);
    expect((await client.getStreamMetadata(name)).metadata?.truncateBefore).toBe(2);

    // A soft-deleted stream expected to exist is reported as deleted (RequestManagerBase).
    const again = stream('soft');
    await client.appendToStream(again, event('A'));
    await client.deleteStream(again, { expectedRevision: 0n });
    expect(await rejection(client.appendToStream(again, event('B'), { streamState: 'stream_exists' }))).toBeInstanceOf(StreamDeletedError);
    expect((await client.appendToStream(again, event('B'), { streamState: 'any' })).nextExpectedRevision).toBe(1n);
  });

  it('new metadata on a soft-deleted stream undeletes it: $tb moves past the old events', async () => {
    const name = stream('undelete');
    await client.appendToStream(name, [event('A'), event('B')]);
    await client.deleteStream(name);
    await client.setStreamMetadata(name, { custom: 'z' });
    expect((await client.getStreamMetadata(name)).metadata).toEqual({ custom: 'z', truncateBefore: 2 });
    expect(await collect(client.readStream(name))).toEqual([]);
  });

  it('soft delete of a stream that never existed is a wrong expected version', async () => {
    expect(await rejection(client.deleteStream(stream('never')))).toBeInstanceOf(WrongExpectedVersionError);
  });

  it('tombstone makes the stream deleted for good', async () => {
    const name = stream('tomb');
    await client.appendToStream(name, event('A'));
    await client.tombstoneStream(name);

    expect(await rejection(collect(client.readStream(name)))).toBeInstanceOf(StreamDeletedError);
    expect(await rejection(client.appendToStream(name, event('B'), { streamState: 'any' }))).toBeInstanceOf(StreamDeletedError);
    expect(await rejection(client.appendToStream(name, event('B'), { streamState: 'no_stream' }))).toBeInstanceOf(StreamDeletedError);
    expect(await rejection(client.tombstoneStream(name))).toBeInstanceOf(StreamDeletedError);
  });

  it('stream metadata: set/get, $tb truncates reads, $maxCount keeps the last events', async () => {
    const name = stream('meta');
    await client.appendToStream(name, [event('A'), event('B'), event('C'), event('D')]);
    await client.setStreamMetadata(name, { truncateBefore: 1, custom: 'x' });
    expect((await client.getStreamMetadata(name)).metadata).toEqual({ truncateBefore: 1, custom: 'x' });
    expect(types(await collect(client.readStream(name)))).toEqual(['B', 'C', 'D']);

    await client.setStreamMetadata(name, { maxCount: 2 });
    expect(types(await collect(client.readStream(name)))).toEqual(['C', 'D']);
    expect(types(await collect(client.readStream(name, { direction: BACKWARDS, fromRevision: END })))).toEqual(['D', 'C']);
  });

  it('reads $all forwards and backwards from positions', async () => {
    const name = stream('all');
    const first = await client.appendToStream(name, event('A'));
    const second = await client.appendToStream(name, event('B'));
    const forwards = await collect(client.readAll({ fromPosition: first.position!, maxCount: 2 }));
    expect(forwards.map((e) => e.event?.id)).toEqual([
      db.readStreamEvents(name)[0]!.id,
      db.readStreamEvents(name)[1]!.id,
    ]);
    expect(forwards[1]?.event?.position).toEqual(second.position);

    const backwards = await collect(client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1 }));
    expect(backwards[0]?.event?.position).toEqual(second.position);
    const before = await collect(client.readAll({ direction: BACKWARDS, fromPosition: second.position!, maxCount: 1 }));
    expect(before[0]?.event?.position).toEqual(first.position);

    const filtered = await collect(client.readAll({ filter: streamNameFilter({ prefixes: [name] }) }));
    expect(types(filtered)).toEqual(['A', 'B']);
  });

  it('subscribes to a stream: catch-up, caughtUp, then live events', async () => {
    const name = stream('sub');
    await client.appendToStream(name, [event('A'), event('B')]);
    const seen: string[] = [];
    let caughtUp = false;
    const subscription: StreamSubscription = client.subscribeToStream(name, { fromRevision: START });
    subscription.on('caughtUp', () => {
      caughtUp = true;
    });
    subscription.on('data', (e: ResolvedEvent) => seen.push(e.event!.type));
    try {
      await waitFor(() => caughtUp && seen.length === 2, 'catch-up');
      await client.appendToStream(name, event('C'));
      await waitFor(() => seen.length === 3, 'live event');
      expect(seen).toEqual(['A', 'B', 'C']);
    } finally {
      await subscription.unsubscribe();
    }

    const fromRevision: string[] = [];
    const after = client.subscribeToStream(name, { fromRevision: 1n });
    after.on('data', (e: ResolvedEvent) => fromRevision.push(e.event!.type));
    try {
      await waitFor(() => fromRevision.length === 1, 'events after revision 1');
      expect(fromRevision).toEqual(['C']);
    } finally {
      await after.unsubscribe();
    }
  });

  it('subscribes to $all with a filter and sends checkpoints at the checkpoint interval', async () => {
    const prefix = stream('filt');
    const start = (await client.appendToStream(`${prefix}-0`, event('Start'))).position!;
    const seen: string[] = [];
    const checkpoints: Position[] = [];
    const subscription = client.subscribeToAll({
      fromPosition: start,
      filter: eventTypeFilter({ prefixes: ['Wanted'], maxSearchWindow: 1, checkpointInterval: 2, checkpointReached: (_s, p) => void checkpoints.push(p) }),
    });
    subscription.on('data', (e: AllStreamResolvedEvent) => seen.push(e.event!.type));
    try {
      for (let i = 0; i < 6; i++) await client.appendToStream(`${prefix}-${i}`, event(i % 3 === 0 ? 'Wanted' : 'Other'));
      await waitFor(() => seen.length === 2 && checkpoints.length >= 3, 'filtered events and checkpoints');
      expect(seen).toEqual(['Wanted', 'Wanted']);
      expect(checkpoints.every((p) => p.commit > start.commit)).toBe(true);
    } finally {
      await subscription.unsubscribe();
    }

    let caughtUpAt: Position | undefined;
    const fromStart = client.subscribeToAll({ fromPosition: START });
    fromStart.on('caughtUp', (info: { position?: Position }) => {
      caughtUpAt = info.position;
    });
    fromStart.on('data', () => undefined);
    try {
      await waitFor(() => caughtUpAt !== undefined, 'caughtUp on $all');
      expect(caughtUpAt!.commit).toBeGreaterThan(start.commit);
    } finally {
      await fromStart.unsubscribe();
    }

    const noSystem: string[] = [];
    const all = client.subscribeToAll({ fromPosition: START, filter: excludeSystemEvents() });
    all.on('data', (e: AllStreamResolvedEvent) => noSystem.push(e.event!.type));
    try {
      await client.setStreamMetadata(`${prefix}-0`, { custom: 'y' }); // a `$metadata` system event
      const marker = `${prefix}-end`;
      await client.appendToStream(marker, event('Marker'));
      await waitFor(() => noSystem.includes('Marker'), 'marker');
      expect(noSystem.some((t) => t.startsWith('$'))).toBe(false);
    } finally {
      await all.unsubscribe();
    }
  });

  it('refuses appends over maxAppendSize with MaxAppendSizeExceededError', async () => {
    const small = await startInMemoryKurrentDB({ maxAppendSize: 1024 });
    const smallClient = KurrentDBClient.connectionString(small.connectionString);
    try {
      const big = jsonEvent({ type: 'Big', data: { blob: 'x'.repeat(2000) } });
      const error = await rejection(smallClient.appendToStream(stream('big'), big));
      expect(error).toBeInstanceOf(MaxAppendSizeExceededError);
      expect((error as MaxAppendSizeExceededError).maxAppendSize).toBe(1024);
      expect(small.streamNames()).toEqual([]);
    } finally {
      await smallClient.dispose();
      await small.close();
    }
  });

  it('multiStreamAppend is atomic across streams and rejects a stream twice in one session', async () => {
    const a = stream('msa-a');
    const b = stream('msa-b');
    const result = await client.multiStreamAppend([
      { streamName: a, expectedState: 'no_stream', events: [jsonEvent({ type: 'A', data: {}, metadata: { 'source.commitLsn': '0/1A' } })] },
      { streamName: b, expectedState: 'any', events: [event('B1'), event('B2')] },
    ]);
    expect(result.responses).toEqual([
      { streamName: a, revision: 0n },
      { streamName: b, revision: 1n },
    ]);
    expect(result.position).toBe(db.readStreamEvents(b)[1]!.position);
    const [read] = await collect(client.readStream(a));
    expect(read?.event?.metadata).toEqual({ 'source.commitLsn': '0/1A', '$schema.name': 'A', '$schema.format': 'Json' });

    const conflict = await rejection(
      client.multiStreamAppend([
        { streamName: b, expectedState: 'any', events: [event('B3')] },
        { streamName: a, expectedState: 5n, events: [event('A2')] },
      ]),
    );
    expect(conflict).toBeInstanceOf(WrongExpectedVersionError);
    expect((conflict as WrongExpectedVersionError).actualState).toBe(0n);
    expect(db.readStreamEvents(b)).toHaveLength(2); // nothing of the failed session was written

    // Retrying the whole session with the same ids at the same revisions writes nothing.
    const c = stream('msa-c');
    const session = [{ streamName: c, expectedState: 'no_stream' as const, events: [event('C1')] }];
    const once = await client.multiStreamAppend(session);
    const retried = await client.multiStreamAppend(session);
    expect(retried).toEqual(once);
    expect(db.readStreamEvents(c)).toHaveLength(1);

    // ABORTED with StreamAlreadyInAppendSessionErrorDetails: client 1.3.1 turns any ABORTED status
    // that is not a transaction-size error into a TimeoutError. Names compare case-insensitively.
    const twice = await rejection(
      client.multiStreamAppend([
        { streamName: a, expectedState: 'any', events: [event('A3')] },
        { streamName: a.toUpperCase(), expectedState: 'any', events: [event('A4')] },
      ]),
    );
    expect(twice).toBeInstanceOf(TimeoutError);
    expect((twice as Error).message).toMatch(/already has a different group/);
    expect(db.readStreamEvents(a)).toHaveLength(1);
  });

  describe('fault injection', () => {
    let faulty: InMemoryKurrentDB;
    let faultyClient: KurrentDBClient;
    beforeAll(async () => {
      faulty = await startInMemoryKurrentDB();
      faultyClient = KurrentDBClient.connectionString(faulty.connectionString);
    });
    afterEach(() => faulty.setAppendLatency(0));
    afterAll(async () => {
      await faultyClient.dispose();
      await faulty.close();
    });

    it('failNextAppends fails the next appends without writing them', async () => {
      const name = stream('fail');
      faulty.failNextAppends(1, 'internal');
      expect(await rejection(faultyClient.appendToStream(name, event('A')))).toBeInstanceOf(UnavailableError);
      expect(faulty.readStreamEvents(name)).toEqual([]);
      faulty.failNextAppends(1);
      expect(await rejection(faultyClient.appendToStream(name, event('A')))).toBeInstanceOf(UnavailableError);
      const ok = await faultyClient.appendToStream(name, event('A'));
      expect(ok.nextExpectedRevision).toBe(0n);
    });

    it('failNextAppends with afterWrite stores the events but loses the acknowledgement', async () => {
      const name = stream('lost-ack');
      const batch = [event('A'), event('B')];
      faulty.failNextAppends(1, 'unavailable', { afterWrite: true });
      expect(await rejection(faultyClient.appendToStream(name, batch, { streamState: 'no_stream' }))).toBeInstanceOf(UnavailableError);
      expect(faulty.readStreamEvents(name).map((e) => e.type)).toEqual(['A', 'B']);
      // The retry at the same expected revision is recognised (strong idempotency): no duplicate.
      const retry = await faultyClient.appendToStream(name, batch, { streamState: 'no_stream' });
      expect(retry.nextExpectedRevision).toBe(1n);
      expect(faulty.readStreamEvents(name)).toHaveLength(2);
    });

    it('stop() and start() keep the port and the data', async () => {
      const name = stream('restart');
      await faultyClient.appendToStream(name, event('A'));
      const port = faulty.port;
      await faulty.stop();
      expect(await rejection(faultyClient.appendToStream(name, event('B')))).toBeInstanceOf(UnavailableError);
      await faulty.start();
      expect(faulty.port).toBe(port);
      await appendWithReconnect(() => faultyClient.appendToStream(name, event('B'), { streamState: 0n }));
      expect(types(await collect(faultyClient.readStream(name)))).toEqual(['A', 'B']);
    });

    it('stop() drops live subscriptions; reads through the bridge work again after start()', async () => {
      const name = stream('drop');
      await faultyClient.appendToStream(name, event('A'));
      const subscription = faultyClient.subscribeToStream(name);
      let caughtUp = false;
      let dropped: unknown;
      subscription.on('caughtUp', () => {
        caughtUp = true;
      });
      subscription.on('data', () => undefined);
      subscription.on('error', (error) => {
        dropped = error;
      });
      await waitFor(() => caughtUp, 'subscription caught up');
      await faulty.restart();
      await waitFor(() => dropped !== undefined, 'subscription dropped');
      expect(dropped).toBeInstanceOf(UnavailableError);

      const read = async () => types(await collect(faultyClient.readStream(name)));
      expect(await read().catch(() => read())).toEqual(['A']);
    });

    it('applies appends in arrival order under latency', async () => {
      const name = stream('latency');
      await faultyClient.appendToStream(name, event('Warm-up')); // connection and BatchAppend call open
      faulty.setAppendLatency(30);
      const started = Date.now();
      await Promise.all(['A', 'B', 'C'].map((type) => faultyClient.appendToStream(name, event(type))));
      expect(Date.now() - started).toBeGreaterThanOrEqual(25);
      expect(faulty.readStreamEvents(name).map((e) => e.type)).toEqual(['Warm-up', 'A', 'B', 'C']);
    });
  });

  describe('with optional features switched off', () => {
    it('appends through Streams.Append without BatchAppend, and refuses multiStreamAppend', async () => {
      const plain = await startInMemoryKurrentDB({ maxAppendSize: 1024, features: { batchAppend: false, multiStreamAppend: false } });
      const plainClient = KurrentDBClient.connectionString(plain.connectionString);
      try {
        const name = stream('plain');
        expect((await plainClient.appendToStream(name, [event('A'), event('B')], { streamState: 'no_stream' })).nextExpectedRevision).toBe(1n);
        const wrong = await rejection(plainClient.appendToStream(name, event('C'), { streamState: 'no_stream' }));
        expect((wrong as WrongExpectedVersionError).actualState).toBe(1n);
        const tooBig = await rejection(plainClient.appendToStream(name, event('Big', { blob: 'x'.repeat(2000) })));
        expect((tooBig as MaxAppendSizeExceededError).maxAppendSize).toBe(1024);
        await plainClient.tombstoneStream(name);
        expect(await rejection(plainClient.appendToStream(name, event('C')))).toBeInstanceOf(StreamDeletedError);
        expect(await rejection(plainClient.multiStreamAppend([{ streamName: name, expectedState: 'any', events: [event('X')] }]))).toBeInstanceOf(
          UnsupportedError,
        );
      } finally {
        await plainClient.dispose();
        await plain.close();
      }
    });
  });
});
