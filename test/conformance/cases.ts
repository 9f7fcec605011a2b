// KurrentDB conformance cases: the behaviour of a real KurrentDB server, as seen through the
// real client (@kurrent/kurrentdb-client 1.3.1), that the in-memory server must reproduce.
//
// Sources (read, not copied): KurrentDB server source at github.com/kurrent-io/KurrentDB
// (commit 44996ed, 2026-07), chiefly
//   S1 src/KurrentDB.Core/Services/Storage/ReaderIndex/IndexWriter.cs        (CheckCommit: expected
//      versions, strong/weak idempotency, soft-deleted and tombstoned streams)
//   S2 src/KurrentDB.Core/Services/Storage/StorageWriterService.cs           (VerifyCommitChecks,
//      soft delete / undelete, tombstone records)
//   S3 src/KurrentDB.Core/Services/RequestManager/Managers/RequestManagerBase.cs (StreamDeleted vs
//      WrongExpectedVersion, idempotent replies carry the original log position)
//   S4 src/KurrentDB.Core/Services/Transport/Grpc/Streams.BatchAppend.cs, Streams.Append.cs,
//      Streams.Delete.cs, RpcExceptions.cs, WrongExpectedVersion.cs
//   S5 src/KurrentDB.Api.V2/Modules/Streams/StreamsService.cs, ApiErrors.cs,
//      proto/kurrentdb/protocol/v2/streams/errors.proto                  (multi-stream append)
//   S6 src/KurrentDB.Core/Services/Storage/ReaderIndex/IndexReader.cs, AllReader.cs,
//      StorageReaderWorker.All.cs                                         (reads)
//   S7 src/KurrentDB.Core/Services/Transport/Enumerators/Enumerator.StreamSubscription.cs,
//      Enumerator.AllSubscriptionFiltered.cs, Services/SubscriptionsService.cs (subscriptions)
//   S8 src/KurrentDB.Core/Data/EventRecord.cs                              (properties → metadata)
//   S9 src/KurrentDB.Core/Configuration/ClusterVNodeOptions.cs(+Validator)  (max append sizes)
// and the client's dist/ (error conversion: utils/CommandError.js, streams/appendToStream/*).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  ANY,
  BACKWARDS,
  END,
  FORWARDS,
  NO_STREAM,
  START,
  STREAM_EXISTS,
  KurrentDBClient,
  MaxAppendSizeExceededError,
  StreamDeletedError,
  StreamNotFoundError,
  StreamTombstonedError,
  TimeoutError,
  TransactionMaxSizeExceededError,
  UnavailableError,
  UnsupportedError,
  WrongExpectedVersionError,
  binaryEvent,
  eventTypeFilter,
  excludeSystemEvents,
  isCommandError,
  jsonEvent,
  streamNameFilter,
  type AllStreamResolvedEvent,
  type AppendResult,
  type EventData,
  type Filter,
  type Position,
  type ReadRevision,
  type ResolvedEvent,
} from '@kurrent/kurrentdb-client';
import { createH2AppendTransport } from '../../src/sink/h2-append.js';
import { createFramedTailReader } from '../../src/sink/h2-read.js';
import { encodeAppendRecordSized } from '../../src/sink/v2-append.js';
import { type ConformanceCase, type ConformanceContext, waitFor } from './harness.js';

// ---------------------------------------------------------------------------------------------
// helpers

type Recorded = NonNullable<ResolvedEvent['event']>;
type AllRecorded = NonNullable<AllStreamResolvedEvent['event']>;

function ev(type = 'Tested', data: Record<string, unknown> = {}, id: string = randomUUID(), metadata?: Record<string, unknown>): EventData {
  return jsonEvent({ id, type, data, ...(metadata ? { metadata } : {}) });
}

function evs(n: number, type = 'Tested'): EventData[] {
  return Array.from({ length: n }, (_, i) => ev(type, { i }));
}

async function read(
  client: KurrentDBClient,
  stream: string,
  opts: { fromRevision?: ReadRevision; maxCount?: number; direction?: typeof FORWARDS | typeof BACKWARDS } = {},
): Promise<Recorded[]> {
  const out: Recorded[] = [];
  for await (const resolved of client.readStream(stream, opts)) {
    assert.ok(resolved.event, `readStream(${stream}) yielded a resolved event without an event`);
    out.push(resolved.event);
  }
  return out;
}

async function readAllEvents(
  client: KurrentDBClient,
  opts: { fromPosition?: Position | typeof START | typeof END; maxCount?: number; direction?: typeof FORWARDS | typeof BACKWARDS; filter?: Filter } = {},
): Promise<AllRecorded[]> {
  const out: AllRecorded[] = [];
  for await (const resolved of client.readAll(opts)) {
    if (resolved.event) out.push(resolved.event);
  }
  return out;
}

async function expectNotFound(client: KurrentDBClient, stream: string): Promise<void> {
  await assert.rejects(read(client, stream), (error: unknown) => {
    assert.ok(error instanceof StreamNotFoundError, `expected StreamNotFoundError reading ${stream}, got ${describe(error)}`);
    return true;
  });
}

async function expectDeleted(promise: Promise<unknown>, what: string): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof StreamDeletedError, `expected StreamDeletedError ${what}, got ${describe(error)}`);
    return true;
  });
}

async function expectWrongExpectedVersion(
  promise: Promise<unknown>,
  expected: { streamName?: string; expectedState?: unknown; actualState?: unknown },
): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof WrongExpectedVersionError, `expected WrongExpectedVersionError, got ${describe(error)}`);
    if ('streamName' in expected) assert.equal(error.streamName, expected.streamName, 'WrongExpectedVersionError.streamName');
    if ('expectedState' in expected) assert.equal(error.expectedState, expected.expectedState, 'WrongExpectedVersionError.expectedState');
    if ('actualState' in expected) assert.equal(error.actualState, expected.actualState, 'WrongExpectedVersionError.actualState');
    return true;
  });
}

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.constructor.name}(${(error as { type?: string }).type ?? ''}): ${error.message}`;
  return String(error);
}

function ids(events: ReadonlyArray<{ id: string }>): string[] {
  return events.map((e) => e.id);
}

function revisions(events: ReadonlyArray<{ revision: bigint }>): bigint[] {
  return events.map((e) => e.revision);
}

function idsOf(events: EventData[]): string[] {
  return events.map((e) => e.id);
}

/** Collects what a subscription delivers; unsubscribe in a finally. */
function collect<E>(subscription: { on(event: string, listener: (...args: any[]) => void): unknown }) {
  const received: E[] = [];
  const order: Array<'event' | 'caughtUp'> = [];
  let failure: unknown;
  subscription.on('data', (e: E) => {
    received.push(e);
    order.push('event');
  });
  subscription.on('caughtUp', () => order.push('caughtUp'));
  subscription.on('error', (error: unknown) => {
    failure = error;
  });
  return {
    received,
    order,
    async until(what: string, condition: () => boolean, timeoutMs = 15_000): Promise<void> {
      await waitFor(
        () => {
          if (failure) throw new Error(`subscription failed while waiting for ${what}: ${describe(failure)}`);
          return condition();
        },
        { what, timeoutMs },
      );
    },
  };
}

async function supports(client: KurrentDBClient, path: string): Promise<boolean> {
  // Client.supports is protected; it answers from the server's GetSupportedMethods, which is
  // exactly how appendToStream / multiStreamAppend choose their RPC.
  const c = client as unknown as { supports(method: { path: string }): Promise<boolean> };
  return c.supports({ path });
}

const BATCH_APPEND = '/event_store.client.streams.Streams/BatchAppend';
const APPEND_SESSION = '/kurrentdb.protocol.v2.streams.StreamsService/AppendSession';
const GRPC_ABORTED = 10;
const GRPC_FAILED_PRECONDITION = 9;

// ---------------------------------------------------------------------------------------------
// cases

export const cases: ConformanceCase[] = [
  // ----- expected revision: any -----
  {
    rule: 'expected-revision-any',
    name: 'any appends to a new stream and again to the existing stream; revisions continue',
    async run({ client, prefix }) {
      const stream = `${prefix}-any`;
      const first = await client.appendToStream(stream, evs(2), { streamState: ANY });
      assert.equal(first.success, true);
      assert.equal(first.nextExpectedRevision, 1n);
      assert.ok(first.position, 'a successful append reports its position');
      const second = await client.appendToStream(stream, evs(1), { streamState: ANY });
      assert.equal(second.nextExpectedRevision, 2n);
      assert.ok(second.position && first.position && second.position.commit > first.position.commit, 'positions grow');
      assert.deepEqual(revisions(await read(client, stream)), [0n, 1n, 2n]);
    },
  },

  // ----- expected revision: no_stream -----
  {
    rule: 'expected-revision-no-stream',
    name: 'no_stream creates the stream; a second no_stream append fails with the actual revision',
    async run({ client, prefix }) {
      const stream = `${prefix}-ns`;
      const created = await client.appendToStream(stream, evs(2), { streamState: NO_STREAM });
      assert.equal(created.nextExpectedRevision, 1n);
      await expectWrongExpectedVersion(client.appendToStream(stream, evs(1), { streamState: NO_STREAM }), {
        streamName: stream,
        expectedState: NO_STREAM,
        actualState: 1n,
      });
      assert.equal((await read(client, stream)).length, 2, 'the failed append wrote nothing');
    },
  },

  // ----- expected revision: stream_exists -----
  {
    rule: 'expected-revision-stream-exists',
    name: 'stream_exists on a missing stream fails with actual no_stream; on an existing stream it appends',
    async run({ client, prefix }) {
      const stream = `${prefix}-se`;
      await expectWrongExpectedVersion(client.appendToStream(stream, evs(1), { streamState: STREAM_EXISTS }), {
        streamName: stream,
        expectedState: STREAM_EXISTS,
        actualState: NO_STREAM,
      });
      await expectNotFound(client, stream);
      await client.appendToStream(stream, evs(1), { streamState: NO_STREAM });
      const result = await client.appendToStream(stream, evs(2), { streamState: STREAM_EXISTS });
      assert.equal(result.nextExpectedRevision, 2n);
    },
  },
  {
    rule: 'expected-revision-stream-exists',
    // S1 CheckCommit: for StreamExists with no events, the stream still "exists" when its
    // metastream has events.
    name: 'stream_exists succeeds on a stream that so far has only metadata',
    async run({ client, prefix }) {
      const stream = `${prefix}-meta-only`;
      await client.setStreamMetadata(stream, { owner: 'conformance' });
      const result = await client.appendToStream(stream, evs(1), { streamState: STREAM_EXISTS });
      assert.equal(result.nextExpectedRevision, 0n);
    },
  },

  // ----- expected revision: numeric -----
  {
    rule: 'expected-revision-numeric',
    name: 'a numeric revision equal to the last revision appends; a stale one fails with expected and actual revisions',
    async run({ client, prefix }) {
      const stream = `${prefix}-num`;
      await client.appendToStream(stream, evs(3));
      const ok = await client.appendToStream(stream, evs(1), { streamState: 2n });
      assert.equal(ok.nextExpectedRevision, 3n);
      await expectWrongExpectedVersion(client.appendToStream(stream, evs(1), { streamState: 1n }), {
        streamName: stream,
        expectedState: 1n,
        actualState: 3n,
      });
      assert.equal((await read(client, stream)).length, 4);
    },
  },
  {
    rule: 'expected-revision-numeric',
    name: 'a numeric revision ahead of the stream, or on a missing stream, fails (actual revision / no_stream)',
    async run({ client, prefix }) {
      const stream = `${prefix}-ahead`;
      await expectWrongExpectedVersion(client.appendToStream(stream, evs(1), { streamState: 0n }), {
        streamName: stream,
        expectedState: 0n,
        actualState: NO_STREAM,
      });
      await client.appendToStream(stream, evs(1));
      await expectWrongExpectedVersion(client.appendToStream(stream, evs(1), { streamState: 5n }), {
        streamName: stream,
        expectedState: 5n,
        actualState: 0n,
      });
    },
  },

  // ----- strong idempotency -----
  {
    rule: 'strong-idempotency',
    // S1 (expectedVersion < curVersion loop) + S2/S3 (AlreadyCommitted → same revision and the
    // original's log position).
    name: 'same ids at the same no_stream revision twice: one copy, the replay returns the original result',
    async run({ client, prefix }) {
      const stream = `${prefix}-strong`;
      const batch = evs(2);
      const first = await client.appendToStream(stream, batch, { streamState: NO_STREAM });
      const replay = await client.appendToStream(stream, batch, { streamState: NO_STREAM });
      assert.equal(replay.success, true);
      assert.equal(replay.nextExpectedRevision, first.nextExpectedRevision);
      assert.deepEqual(replay.position, first.position, 'the replay reports the original position');
      assert.deepEqual(ids(await read(client, stream)), idsOf(batch));
    },
  },
  {
    rule: 'strong-idempotency',
    name: 'a replay at a numeric revision stays idempotent after the stream moved on, and a prefix replay too',
    async run({ client, prefix }) {
      const stream = `${prefix}-strong-num`;
      await client.appendToStream(stream, evs(1));
      const batch = evs(2);
      const first = await client.appendToStream(stream, batch, { streamState: 0n });
      assert.equal(first.nextExpectedRevision, 2n);
      await client.appendToStream(stream, evs(1), { streamState: 2n });
      const replay = await client.appendToStream(stream, batch, { streamState: 0n });
      assert.equal(replay.nextExpectedRevision, 2n, 'the replay answers with the original last revision, not the stream head');
      assert.deepEqual(replay.position, first.position);
      const [firstOfBatch] = batch;
      assert.ok(firstOfBatch);
      const prefixReplay = await client.appendToStream(stream, [firstOfBatch], { streamState: 0n });
      assert.equal(prefixReplay.nextExpectedRevision, 1n, 'replaying only the first event is idempotent too');
      assert.equal((await read(client, stream)).length, 4);
    },
  },
  {
    rule: 'strong-idempotency',
    // S1: the first id matches at its revision, a later one does not → CorruptedIdempotency,
    // which S2 VerifyCommitChecks reports as a consistency failure → WrongExpectedVersion.
    name: 'a partial replay (first id matches, second differs) fails with wrong expected version',
    async run({ client, prefix }) {
      const stream = `${prefix}-partial`;
      const [a, b] = evs(2);
      assert.ok(a && b);
      await client.appendToStream(stream, [a, b], { streamState: NO_STREAM });
      await expectWrongExpectedVersion(client.appendToStream(stream, [a, ev()], { streamState: NO_STREAM }), {
        streamName: stream,
        expectedState: NO_STREAM,
        actualState: 1n,
      });
      assert.deepEqual(ids(await read(client, stream)), [a.id, b.id]);
    },
  },
  {
    rule: 'strong-idempotency',
    needs: ['restart'],
    // S1: specific revisions are checked against the index (ReadPrepare), which survives restarts.
    name: 'strong idempotency survives a server restart',
    async run(ctx) {
      const stream = `${ctx.prefix}-strong-restart`;
      const batch = evs(2);
      const first = await ctx.client.appendToStream(stream, batch, { streamState: NO_STREAM });
      await ctx.restart();
      const replay = await ctx.client.appendToStream(stream, batch, { streamState: NO_STREAM });
      assert.equal(replay.nextExpectedRevision, first.nextExpectedRevision);
      assert.deepEqual(ids(await read(ctx.client, stream)), idsOf(batch));
    },
  },

  // ----- weak idempotency -----
  {
    rule: 'weak-idempotency',
    name: 'same ids with any twice (no restart): one copy, the replay returns the original result',
    async run({ client, prefix }) {
      const stream = `${prefix}-weak`;
      const batch = evs(2);
      const first = await client.appendToStream(stream, batch, { streamState: ANY });
      const replay = await client.appendToStream(stream, batch, { streamState: ANY });
      assert.equal(replay.nextExpectedRevision, first.nextExpectedRevision);
      assert.deepEqual(replay.position, first.position);
      assert.deepEqual(ids(await read(client, stream)), idsOf(batch));
    },
  },
  {
    rule: 'weak-idempotency',
    // S1 weak branch: a cached id counts only for the same stream (StreamIdComparer check), and a
    // replay is idempotent even after the stream moved on (reply: the original last revision).
    name: 'with any, a replay after the stream moved on is still idempotent; the same id in another stream is a new event',
    async run({ client, prefix }) {
      const stream = `${prefix}-weak-moved`;
      const other = `${prefix}-weak-other`;
      const batch = evs(2);
      await client.appendToStream(stream, batch, { streamState: ANY });
      await client.appendToStream(stream, evs(1), { streamState: ANY });
      const replay = await client.appendToStream(stream, batch, { streamState: ANY });
      assert.equal(replay.nextExpectedRevision, 1n);
      assert.equal((await read(client, stream)).length, 3);
      const elsewhere = await client.appendToStream(other, batch, { streamState: ANY });
      assert.equal(elsewhere.nextExpectedRevision, 1n);
      assert.deepEqual(ids(await read(client, other)), idsOf(batch), 'event ids are deduplicated per stream, not globally');
    },
  },
  {
    rule: 'weak-idempotency',
    needs: ['restart'],
    // S1: with any, ids are looked up only in _committedEvents, an in-memory BoundedCache filled
    // at write time (IndexWriter.PreCommit) and not rebuilt at start-up → a restart loses it.
    name: 'same ids with any after a restart: a second copy is written',
    async run(ctx) {
      const stream = `${ctx.prefix}-weak-restart`;
      const batch = evs(2);
      await ctx.client.appendToStream(stream, batch, { streamState: ANY });
      await ctx.restart();
      const again = await ctx.client.appendToStream(stream, batch, { streamState: ANY });
      assert.equal(again.nextExpectedRevision, 3n);
      const events = await read(ctx.client, stream);
      assert.deepEqual(ids(events), [...idsOf(batch), ...idsOf(batch)]);
      assert.deepEqual(revisions(events), [0n, 1n, 2n, 3n]);
    },
  },
  {
    rule: 'weak-idempotency',
    // S1 weak branch: first id found in the cache, the next not → CorruptedIdempotency → WEV,
    // reported with expected any (WrongExpectedVersion.expected_any).
    name: 'a partial replay with any fails with wrong expected version (expected any, actual head)',
    async run({ client, prefix }) {
      const stream = `${prefix}-weak-partial`;
      const [a, b] = evs(2);
      assert.ok(a && b);
      await client.appendToStream(stream, [a, b], { streamState: ANY });
      await expectWrongExpectedVersion(client.appendToStream(stream, [a, ev()], { streamState: ANY }), {
        streamName: stream,
        expectedState: ANY,
        actualState: 1n,
      });
      assert.equal((await read(client, stream)).length, 2);
    },
  },

  // ----- soft delete -----
  {
    rule: 'soft-delete',
    name: 'a soft-deleted stream reads as StreamNotFound',
    async run({ client, prefix }) {
      const stream = `${prefix}-soft`;
      await client.appendToStream(stream, evs(2));
      await client.deleteStream(stream);
      await expectNotFound(client, stream);
      await assert.rejects(read(client, stream, { direction: BACKWARDS, fromRevision: END }), StreamNotFoundError);
    },
  },
  {
    rule: 'soft-delete',
    // S2 soft delete writes {"$tb": long.MaxValue} as the whole metadata (custom fields go);
    // the next append "undeletes" by rewriting $tb = old last revision + 1.
    name: 'append after soft delete continues revisions; only new events read; metadata becomes truncateBefore only',
    async run({ client, prefix }) {
      const stream = `${prefix}-soft-again`;
      await client.appendToStream(stream, evs(3));
      await client.setStreamMetadata(stream, { owner: 'team-a' });
      await client.deleteStream(stream);
      const fresh = ev('Recreated');
      const result = await client.appendToStream(stream, fresh, { streamState: ANY });
      assert.equal(result.nextExpectedRevision, 3n);
      const events = await read(client, stream);
      assert.deepEqual(ids(events), [fresh.id]);
      assert.deepEqual(revisions(events), [3n]);
      // S3: the reply's position is the written event's (CommitIndexed of its transaction); the
      // undelete $metadata record is written after it, by the writer, and is not reported.
      const inAll = (await readAllEvents(client, { direction: BACKWARDS, fromPosition: END, maxCount: 50 })).find((e) => e.id === fresh.id);
      assert.ok(inAll, 'the recreated event is in $all');
      assert.deepEqual(result.position, inAll.position, 'the append reports its own event position, not the undelete record');
      const { metadata } = await client.getStreamMetadata(stream);
      assert.equal(metadata?.truncateBefore, 3);
      assert.equal(metadata?.owner, undefined, 'soft delete replaced the metadata, custom fields are gone');
    },
  },
  {
    rule: 'soft-delete',
    // S1: StreamExists on a soft-deleted stream → failure with isSoftDeleted, which S3 reports as
    // StreamDeleted; NoStream on a soft-deleted stream → Ok (recreate).
    name: 'after soft delete, stream_exists fails with StreamDeleted and no_stream recreates the stream',
    async run({ client, prefix }) {
      const stream = `${prefix}-soft-states`;
      await client.appendToStream(stream, evs(2));
      await client.deleteStream(stream);
      await expectDeleted(client.appendToStream(stream, evs(1), { streamState: STREAM_EXISTS }), 'appending with stream_exists');
      const recreated = await client.appendToStream(stream, evs(1), { streamState: NO_STREAM });
      assert.equal(recreated.nextExpectedRevision, 2n);
      assert.deepEqual(revisions(await read(client, stream)), [2n]);
    },
  },
  {
    rule: 'soft-delete',
    // S2: soft delete of a stream that never existed is a consistency failure; S4 Streams.Delete
    // turns it into WrongExpectedVersion (metadata exception=wrong-expected-version).
    name: 'soft delete of a missing stream, or at a wrong revision, fails with wrong expected version',
    async run({ client, prefix }) {
      // Streams.Delete reports WrongExpectedVersion through trailers (expected-version, actual-
      // version as longs); the client turns them into BigInts as they are: any = -2, no stream = -1.
      const missing = `${prefix}-never`;
      await expectWrongExpectedVersion(client.deleteStream(missing), { streamName: missing, expectedState: -2n, actualState: -1n });
      const stream = `${prefix}-del-rev`;
      await client.appendToStream(stream, evs(1));
      await expectWrongExpectedVersion(client.deleteStream(stream, { expectedRevision: 5n }), {
        streamName: stream,
        expectedState: 5n,
        actualState: 0n,
      });
      assert.equal((await read(client, stream)).length, 1);
      await client.deleteStream(stream, { expectedRevision: 0n });
      await expectNotFound(client, stream);
    },
  },

  {
    rule: 'soft-delete',
    // S1: a numeric expected revision equal to the last revision before the delete is Ok
    // (expectedVersion == curVersion) and undeletes the stream.
    name: 'after soft delete, an append expecting the last revision before the delete succeeds',
    async run({ client, prefix }) {
      const stream = `${prefix}-soft-num`;
      await client.appendToStream(stream, evs(2));
      await client.deleteStream(stream);
      await expectWrongExpectedVersion(client.appendToStream(stream, evs(1), { streamState: 0n }), {
        streamName: stream,
        expectedState: 0n,
        actualState: 1n,
      });
      const result = await client.appendToStream(stream, evs(1), { streamState: 1n });
      assert.equal(result.nextExpectedRevision, 2n);
      assert.deepEqual(revisions(await read(client, stream)), [2n]);
    },
  },
  {
    rule: 'soft-delete',
    // S2 SoftUndeleteMetastream: writing metadata to a soft-deleted stream undeletes it, adding
    // $tb = last revision + 1 to the new metadata. S6: reads then succeed with no events.
    name: 'setting metadata on a soft-deleted stream undeletes it: metadata gains truncateBefore, reads are empty',
    async run({ client, prefix }) {
      const stream = `${prefix}-soft-meta`;
      await client.appendToStream(stream, evs(3));
      await client.deleteStream(stream);
      await client.setStreamMetadata(stream, { owner: 'team-b' });
      const { metadata } = await client.getStreamMetadata(stream);
      assert.equal(metadata?.owner, 'team-b');
      assert.equal(metadata?.truncateBefore, 3);
      assert.deepEqual(await read(client, stream), [], 'the stream exists again, with every old event truncated');
      const next = await client.appendToStream(stream, evs(1), { streamState: 2n });
      assert.equal(next.nextExpectedRevision, 3n);
    },
  },

  // ----- tombstone -----
  {
    rule: 'tombstone',
    name: 'a tombstoned stream fails reads and appends (any, no_stream, numeric) and deletes with StreamDeleted',
    async run({ client, prefix }) {
      const stream = `${prefix}-tomb`;
      await client.appendToStream(stream, evs(2));
      await client.tombstoneStream(stream);
      await expectDeleted(read(client, stream), 'reading');
      await expectDeleted(client.appendToStream(stream, evs(1), { streamState: ANY }), 'appending with any');
      await expectDeleted(client.appendToStream(stream, evs(1), { streamState: NO_STREAM }), 'appending with no_stream');
      await expectDeleted(client.appendToStream(stream, evs(1), { streamState: 1n }), 'appending at revision 1');
      await expectDeleted(client.deleteStream(stream), 'soft deleting');
    },
  },
  {
    rule: 'tombstone',
    name: 'tombstoning a stream that never existed succeeds and the stream then reads as deleted',
    async run({ client, prefix }) {
      const stream = `${prefix}-tomb-new`;
      await client.tombstoneStream(stream);
      await expectDeleted(read(client, stream), 'reading');
      await expectDeleted(client.appendToStream(stream, evs(1)), 'appending');
    },
  },

  // ----- stream metadata -----
  {
    rule: 'stream-metadata',
    name: 'set then get metadata: maxCount, truncateBefore and custom fields round-trip; a stream without metadata has none',
    async run({ client, prefix }) {
      const stream = `${prefix}-meta`;
      assert.equal((await client.getStreamMetadata(stream)).metadata, undefined);
      const set = await client.setStreamMetadata(stream, {
        maxCount: 10,
        truncateBefore: 2,
        owner: 'team-a',
        'source.table': 'public.invoice',
        nested: { level: 1, tags: ['x', 'y'] },
      });
      assert.equal(set.nextExpectedRevision, 0n, 'the first metadata event is revision 0 of the metastream');
      const { metadata, streamName } = await client.getStreamMetadata(stream);
      assert.equal(streamName, stream);
      assert.ok(metadata);
      assert.equal(metadata.maxCount, 10);
      assert.equal(metadata.truncateBefore, 2);
      assert.equal(metadata.owner, 'team-a');
      assert.equal(metadata['source.table'], 'public.invoice');
      assert.deepEqual(metadata.nested, { level: 1, tags: ['x', 'y'] });
      await client.setStreamMetadata(stream, { maxCount: 3 });
      const latest = await client.getStreamMetadata(stream);
      assert.equal(latest.metadata?.maxCount, 3);
      assert.equal(latest.metadata?.owner, undefined, 'each set replaces the whole metadata');
    },
  },
  {
    rule: 'stream-metadata',
    name: 'metadata maxCount limits stream reads to the newest events',
    async run({ client, prefix }) {
      const stream = `${prefix}-maxcount`;
      await client.appendToStream(stream, evs(5));
      await client.setStreamMetadata(stream, { maxCount: 2 });
      assert.deepEqual(revisions(await read(client, stream)), [3n, 4n]);
      assert.deepEqual(revisions(await read(client, stream, { direction: BACKWARDS, fromRevision: END })), [4n, 3n]);
    },
  },
  {
    rule: 'stream-metadata',
    name: 'metadata truncateBefore hides earlier events from stream reads',
    async run({ client, prefix }) {
      const stream = `${prefix}-tb`;
      await client.appendToStream(stream, evs(5));
      await client.setStreamMetadata(stream, { truncateBefore: 3 });
      assert.deepEqual(revisions(await read(client, stream)), [3n, 4n]);
      assert.deepEqual(revisions(await read(client, stream, { fromRevision: 1n })), [3n, 4n]);
    },
  },
  {
    rule: 'stream-metadata',
    // Client 1.3.1 setStreamMetadata.js hands its options to appendToStream, which reads
    // `streamState`, not `expectedRevision`: the documented option is silently ignored (any).
    // Expected revisions on metadata work by appending the $metadata event to $$stream directly.
    name: 'setStreamMetadata ignores expectedRevision (client 1.3.1); a $metadata append to $$stream honours streamState',
    async run({ client, prefix }) {
      const stream = `${prefix}-meta-rev`;
      const meta = `$$${stream}`;
      await client.setStreamMetadata(stream, { owner: 'a' }, { expectedRevision: NO_STREAM });
      const second = await client.setStreamMetadata(stream, { owner: 'b' }, { expectedRevision: NO_STREAM });
      assert.equal(second.nextExpectedRevision, 1n, 'the client appended with any despite expectedRevision no_stream');
      await expectWrongExpectedVersion(client.appendToStream(meta, jsonEvent({ type: '$metadata', data: { owner: 'c' } }), { streamState: NO_STREAM }), {
        streamName: meta,
        expectedState: NO_STREAM,
        actualState: 1n,
      });
      const third = await client.appendToStream(meta, jsonEvent({ type: '$metadata', data: { owner: 'c' } }), { streamState: 1n });
      assert.equal(third.nextExpectedRevision, 2n);
      assert.equal((await client.getStreamMetadata(stream)).metadata?.owner, 'c');
    },
  },

  // ----- max append size -----
  {
    rule: 'max-append-size',
    needs: ['maxAppendSize'],
    options: { maxAppendSize: 64 * 1024 },
    // S4: the sum of the events' sizes above MaxAppendSize → MaximumAppendSizeExceeded(max);
    // each event stays below MaxAppendEventSize so that per-event error does not fire first.
    name: 'an append over maxAppendSize fails with MaxAppendSizeExceededError carrying the limit; nothing is written',
    async run({ client, prefix, limits }) {
      const stream = `${prefix}-big`;
      const chunk = 'x'.repeat(Math.floor(limits.maxAppendSize / 2) - 1024);
      const big = [ev('Big', { chunk }), ev('Big', { chunk }), ev('Big', { chunk })];
      await assert.rejects(client.appendToStream(stream, big), (error: unknown) => {
        assert.ok(error instanceof MaxAppendSizeExceededError, `expected MaxAppendSizeExceededError, got ${describe(error)}`);
        assert.equal(error.maxAppendSize, limits.maxAppendSize);
        return true;
      });
      await expectNotFound(client, stream);
      const ok = await client.appendToStream(stream, [ev('Big', { chunk })]);
      assert.equal(ok.nextExpectedRevision, 0n, 'an append under the limit goes through');
    },
  },

  {
    rule: 'max-append-size',
    needs: ['maxAppendSize'],
    options: { maxAppendSize: 64 * 1024 },
    // S5 AppendSessionCommand.WithRequest: running total of record sizes above MaxAppendSize →
    // AppendTransactionSizeExceeded (ABORTED + details) → client TransactionMaxSizeExceededError.
    name: 'a multiStreamAppend over maxAppendSize fails with TransactionMaxSizeExceededError; nothing is written',
    async run({ client, prefix, limits }) {
      const [a, b] = [`${prefix}-mbig-a`, `${prefix}-mbig-b`];
      const chunk = 'x'.repeat(Math.floor(limits.maxAppendSize / 2) - 1024);
      await assert.rejects(
        client.multiStreamAppend([
          { streamName: a, expectedState: ANY, events: [ev('Big', { chunk })] },
          { streamName: b, expectedState: ANY, events: [ev('Big', { chunk }), ev('Big', { chunk })] },
        ]),
        (error: unknown) => {
          assert.ok(error instanceof TransactionMaxSizeExceededError, `expected TransactionMaxSizeExceededError, got ${describe(error)}`);
          assert.equal(error.maxSize, limits.maxAppendSize);
          assert.ok(error.size > limits.maxAppendSize);
          return true;
        },
      );
      await expectNotFound(client, a);
      await expectNotFound(client, b);
    },
  },

  // ----- read stream -----
  {
    rule: 'read-stream',
    name: 'readStream forwards/backwards with fromRevision, maxCount, START and END',
    async run({ client, prefix }) {
      const stream = `${prefix}-read`;
      const batch = evs(10);
      await client.appendToStream(stream, batch);
      const all = await read(client, stream);
      assert.deepEqual(ids(all), idsOf(batch));
      assert.deepEqual(revisions(all), Array.from({ length: 10 }, (_, i) => BigInt(i)));
      assert.ok(all.every((e) => e.streamId === stream));
      assert.deepEqual(revisions(await read(client, stream, { fromRevision: START, maxCount: 3 })), [0n, 1n, 2n]);
      assert.deepEqual(revisions(await read(client, stream, { fromRevision: 3n, maxCount: 4 })), [3n, 4n, 5n, 6n]);
      assert.deepEqual(revisions(await read(client, stream, { direction: BACKWARDS, fromRevision: END, maxCount: 3 })), [9n, 8n, 7n]);
      assert.deepEqual(revisions(await read(client, stream, { direction: BACKWARDS, fromRevision: 2n })), [2n, 1n, 0n]);
      assert.deepEqual(await read(client, stream, { fromRevision: 50n }), [], 'reading past the end yields nothing');
    },
  },
  {
    rule: 'read-stream',
    name: 'reading a stream that never existed fails with StreamNotFoundError',
    async run({ client, prefix }) {
      await expectNotFound(client, `${prefix}-missing`);
    },
  },
  {
    rule: 'read-stream',
    // The sink's tail read on a hand-framed HTTP/2 connection (src/sink/h2-frames.ts): it sees the
    // response's messages, not its status, so it must answer exactly what readStream answers where
    // the messages prove it, and give the read back (null) where they do not (a tombstone).
    name: "the sink's framed tail read answers as readStream does (last event, missing, soft-deleted) and gives a tombstone back",
    async run({ client, prefix }) {
      const reader = createFramedTailReader(client);
      assert.ok(reader, 'the client exposes execute/callArguments/resolveAuthorizationHeader');
      try {
        const [full, missing, soft, tomb] = [`${prefix}-tail`, `${prefix}-tail-missing`, `${prefix}-tail-soft`, `${prefix}-tail-tomb`];
        const batch = [ev('A'), ev('B', { n: 2 }, randomUUID(), { 'source.commitLsn': '0/2B', 'entity.name': 'Müller 🧾' })];
        await client.appendToStream(full, batch);
        assert.deepEqual(await reader.readTail(full), { kind: 'event', revision: 1n, id: batch[1]!.id, type: 'B', metadata: { 'source.commitLsn': '0/2B', 'entity.name': 'Müller 🧾' } });
        assert.deepEqual(await reader.readTail(missing), { kind: 'not-found' });
        await client.appendToStream(soft, evs(1));
        await client.deleteStream(soft);
        assert.deepEqual(await reader.readTail(soft), { kind: 'not-found' });
        await client.appendToStream(tomb, evs(1));
        await client.tombstoneStream(tomb);
        assert.equal(await reader.readTail(tomb), null);
        assert.deepEqual(reader.counts, { answered: 3, passed: 1 });
      } finally {
        reader?.close();
      }
    },
  },

  // ----- read $all -----
  {
    rule: 'read-all',
    name: 'readAll forwards: positions strictly increase and our events appear in append order',
    async run({ client, prefix }) {
      const a = `${prefix}-all-a`;
      const b = `${prefix}-all-b`;
      const first = evs(2);
      const second = evs(2);
      const third = evs(1);
      await client.appendToStream(a, first);
      await client.appendToStream(b, second);
      await client.appendToStream(a, third);
      const all = await readAllEvents(client);
      for (let i = 1; i < all.length; i++) {
        const prev = all[i - 1]!.position;
        const cur = all[i]!.position;
        assert.ok(cur.commit > prev.commit || (cur.commit === prev.commit && cur.prepare > prev.prepare), `$all position ${i} did not increase`);
      }
      const ours = all.filter((e) => e.streamId.startsWith(`${prefix}-all-`));
      assert.deepEqual(ids(ours), [...idsOf(first), ...idsOf(second), ...idsOf(third)]);
      assert.deepEqual(ours.map((e) => e.streamId), [a, a, b, b, a]);
    },
  },
  {
    rule: 'read-all',
    name: 'readAll backwards from END: positions strictly decrease and the newest event comes first',
    async run({ client, prefix }) {
      const stream = `${prefix}-allback`;
      const batch = evs(3);
      await client.appendToStream(stream, batch);
      const back = await readAllEvents(client, { direction: BACKWARDS, fromPosition: END, maxCount: 500 });
      for (let i = 1; i < back.length; i++) {
        assert.ok(back[i]!.position.commit < back[i - 1]!.position.commit, `backwards $all position ${i} did not decrease`);
      }
      const ours = back.filter((e) => e.streamId === stream);
      assert.deepEqual(ids(ours), idsOf(batch).reverse());
    },
  },
  {
    rule: 'read-all',
    // S6 AllReader returns every committed prepare with Data or StreamDelete flags: metadata
    // events, events hidden by $tb/maxCount or soft delete (until scavenged), and tombstones.
    name: 'readAll includes $metadata events, truncated and soft-deleted events, and the $streamDeleted tombstone',
    async run({ client, prefix }) {
      const truncated = `${prefix}-x-trunc`;
      const soft = `${prefix}-x-soft`;
      const tomb = `${prefix}-x-tomb`;
      const t = evs(3);
      const s = evs(2);
      const h = evs(1);
      await client.appendToStream(truncated, t);
      await client.setStreamMetadata(truncated, { truncateBefore: 2 });
      await client.appendToStream(soft, s);
      const softDeleted = await client.deleteStream(soft);
      await client.appendToStream(tomb, h);
      const tombstoned = await client.tombstoneStream(tomb);
      const all = await readAllEvents(client);
      const inStream = (name: string) => all.filter((e) => e.streamId === name);
      assert.deepEqual(ids(inStream(truncated)), idsOf(t), 'events hidden by truncateBefore are still in $all');
      assert.deepEqual(ids(inStream(soft)), idsOf(s), 'soft-deleted events are still in $all');
      const tombEvents = inStream(tomb);
      assert.deepEqual(tombEvents.map((e) => e.type), [h[0]!.type, '$streamDeleted']);
      assert.equal(tombEvents[0]!.id, h[0]!.id);
      assert.deepEqual(tombstoned.position, tombEvents[1]!.position, 'tombstoneStream reports the tombstone record position');
      const metaEvents = inStream(`$$${truncated}`);
      assert.equal(metaEvents.length, 1);
      assert.equal(metaEvents[0]!.type, '$metadata');
      const softMeta = inStream(`$$${soft}`);
      assert.deepEqual(softMeta.map((e) => e.type), ['$metadata'], 'soft delete writes one $metadata event');
      assert.deepEqual(softDeleted.position, softMeta[0]!.position, 'deleteStream reports the position of that $metadata record');
    },
  },
  {
    rule: 'read-all',
    // Reads (unlike subscriptions) start AT the given position (S6 AllReader reads from pos).
    // Backwards, AllReader takes records whose post-position <= pos: the ones before the event.
    name: 'readAll fromPosition: forwards starts at that event (inclusive), backwards before it (exclusive)',
    async run({ client, prefix }) {
      const stream = `${prefix}-allpos`;
      const batch = evs(3);
      await client.appendToStream(stream, batch);
      const ours = (await readAllEvents(client)).filter((e) => e.streamId === stream);
      const second = ours[1];
      assert.ok(second);
      const from = await readAllEvents(client, { fromPosition: second.position, maxCount: 2 });
      assert.deepEqual(ids(from), [batch[1]!.id, batch[2]!.id]);
      const back = await readAllEvents(client, { direction: BACKWARDS, fromPosition: ours[2]!.position, maxCount: 2 });
      assert.deepEqual(ids(back), [batch[1]!.id, batch[0]!.id]);
    },
  },

  // ----- subscriptions to a stream -----
  {
    rule: 'subscribe-stream',
    name: 'a stream subscription from START delivers history, reports caughtUp, then delivers live events in order',
    async run({ client, prefix }) {
      const stream = `${prefix}-sub`;
      const history = evs(3);
      await client.appendToStream(stream, history);
      const subscription = client.subscribeToStream(stream, { fromRevision: START });
      const seen = collect<ResolvedEvent>(subscription);
      try {
        await seen.until('3 historical events and caughtUp', () => seen.received.length >= 3 && seen.order.includes('caughtUp'));
        const live = evs(2);
        await client.appendToStream(stream, live);
        await seen.until('2 live events', () => seen.received.length >= 5);
        assert.deepEqual(seen.received.map((r) => r.event?.id), [...idsOf(history), ...idsOf(live)]);
        assert.deepEqual(seen.received.map((r) => r.event?.revision), [0n, 1n, 2n, 3n, 4n]);
        // (the relative order of 'data' and 'caughtUp' is not asserted: the client's Transform
        // stream may emit a pushed event on a later tick than the caughtUp it saw after it)
      } finally {
        await subscription.unsubscribe();
      }
    },
  },
  {
    rule: 'subscribe-stream',
    // S7: the revision is a checkpoint, the last revision already processed → exclusive.
    name: 'a stream subscription fromRevision N starts after N (exclusive)',
    async run({ client, prefix }) {
      const stream = `${prefix}-subrev`;
      await client.appendToStream(stream, evs(4));
      const subscription = client.subscribeToStream(stream, { fromRevision: 1n });
      const seen = collect<ResolvedEvent>(subscription);
      try {
        await seen.until('revisions 2 and 3', () => seen.received.length >= 2);
        await client.appendToStream(stream, evs(1));
        await seen.until('revision 4', () => seen.received.length >= 3);
        assert.deepEqual(seen.received.map((r) => r.event?.revision), [2n, 3n, 4n]);
      } finally {
        await subscription.unsubscribe();
      }
    },
  },
  {
    rule: 'subscribe-stream',
    name: 'a subscription to a stream that does not exist yet receives its first events; END skips history',
    async run({ client, prefix }) {
      const stream = `${prefix}-subnew`;
      const fromStart = client.subscribeToStream(stream, { fromRevision: START });
      const a = collect<ResolvedEvent>(fromStart);
      await client.appendToStream(stream, evs(1));
      const fromEnd = client.subscribeToStream(stream, { fromRevision: END });
      const b = collect<ResolvedEvent>(fromEnd);
      try {
        await a.until('the first event', () => a.received.length >= 1);
        await b.until('caughtUp from END', () => b.order.includes('caughtUp'));
        const later = ev('Later');
        await client.appendToStream(stream, later);
        await a.until('the second event', () => a.received.length >= 2);
        await b.until('the live event', () => b.received.length >= 1);
        assert.deepEqual(a.received.map((r) => r.event?.revision), [0n, 1n]);
        assert.deepEqual(b.received.map((r) => r.event?.id), [later.id], 'END delivers only events appended after subscribing');
      } finally {
        await fromStart.unsubscribe();
        await fromEnd.unsubscribe();
      }
    },
  },

  {
    rule: 'subscribe-stream',
    // S7: stream subscriptions catch up through ReadStreamEventsForward, which applies $tb/$maxCount.
    name: 'a stream subscription from START skips events hidden by truncateBefore',
    async run({ client, prefix }) {
      const stream = `${prefix}-subtb`;
      await client.appendToStream(stream, evs(4));
      await client.setStreamMetadata(stream, { truncateBefore: 2 });
      const subscription = client.subscribeToStream(stream, { fromRevision: START });
      const seen = collect<ResolvedEvent>(subscription);
      try {
        await seen.until('caughtUp', () => seen.order.includes('caughtUp') && seen.received.length >= 2);
        await client.appendToStream(stream, evs(1));
        await seen.until('the live event', () => seen.received.length >= 3);
        assert.deepEqual(seen.received.map((r) => r.event?.revision), [2n, 3n, 4n]);
      } finally {
        await subscription.unsubscribe();
      }
    },
  },
  {
    rule: 'subscribe-stream',
    // S7 Enumerator.StreamSubscription: a $streamDeleted event (live) or a StreamDeleted read
    // (catch-up) ends the subscription with StreamDeleted → the client's StreamDeletedError.
    name: 'a stream subscription fails with StreamDeletedError when the stream is tombstoned, live or before subscribing',
    async run({ client, prefix }) {
      const stream = `${prefix}-subtomb`;
      await client.appendToStream(stream, evs(1));
      const live = client.subscribeToStream(stream, { fromRevision: START });
      const failures: unknown[] = [];
      const seen = collect<ResolvedEvent>(live);
      live.on('error', (error: unknown) => failures.push(error));
      try {
        await seen.until('the first event', () => seen.received.length >= 1);
        await client.tombstoneStream(stream);
        await waitFor(() => failures.length > 0, { what: 'the live subscription to fail', timeoutMs: 15_000 });
        assert.ok(failures[0] instanceof StreamDeletedError, `expected StreamDeletedError, got ${describe(failures[0])}`);
      } finally {
        await live.unsubscribe();
      }
      const late = client.subscribeToStream(stream, { fromRevision: START });
      const lateFailures: unknown[] = [];
      late.on('error', (error: unknown) => lateFailures.push(error));
      late.on('data', () => undefined);
      try {
        await waitFor(() => lateFailures.length > 0, { what: 'the subscription to a tombstoned stream to fail', timeoutMs: 15_000 });
        assert.ok(lateFailures[0] instanceof StreamDeletedError, `expected StreamDeletedError, got ${describe(lateFailures[0])}`);
      } finally {
        await late.unsubscribe();
      }
    },
  },

  // ----- subscriptions to $all with filters -----
  ...filterCases(),
  {
    rule: 'subscribe-all-filters',
    name: 'a $all subscription fromPosition P starts after P (exclusive)',
    async run({ client, prefix }) {
      const stream = `${prefix}-allsubpos`;
      const batch = evs(3);
      await client.appendToStream(stream, batch);
      const ours = (await readAllEvents(client)).filter((e) => e.streamId === stream);
      const subscription = client.subscribeToAll({
        fromPosition: ours[0]!.position,
        filter: streamNameFilter({ prefixes: [stream] }),
      });
      const seen = collect<AllStreamResolvedEvent>(subscription);
      try {
        await seen.until('2 events after the first', () => seen.received.length >= 2);
        assert.deepEqual(seen.received.map((r) => r.event?.id), [batch[1]!.id, batch[2]!.id]);
      } finally {
        await subscription.unsubscribe();
      }
    },
  },

  // ----- checkpoints -----
  {
    rule: 'subscribe-all-checkpoints',
    // S7 Enumerator.AllSubscriptionFiltered: a checkpoint is issued when catch-up reaches the end
    // (at/after the last considered position), and live every checkpointInterval × 32 events
    // considered (SubscriptionsService.ProcessEventCommitted counts every committed event).
    name: 'a filtered $all subscription reports checkpointReached at catch-up end and while live, positions non-decreasing',
    async run({ client, prefix }) {
      const matching = `${prefix}-cp-keep`;
      const other = `${prefix}-cpx-other`;
      const before = await client.appendToStream(matching, evs(2));
      assert.ok(before.position);
      const checkpoints: Position[] = [];
      const subscription = client.subscribeToAll({
        fromPosition: START,
        filter: streamNameFilter({
          prefixes: [matching],
          checkpointInterval: 1,
          checkpointReached: (_sub, position) => {
            checkpoints.push(position);
          },
        }),
      });
      const seen = collect<AllStreamResolvedEvent>(subscription);
      try {
        await seen.until('a checkpoint at or after the last appended event', () =>
          checkpoints.some((p) => p.commit >= before.position!.commit),
        );
        const liveFrom = checkpoints.length;
        const filler = await client.appendToStream(other, evs(100, 'Filler'));
        assert.ok(filler.position);
        await seen.until('a live checkpoint beyond the catch-up one', () => checkpoints.length > liveFrom);
        for (let i = 1; i < checkpoints.length; i++) {
          assert.ok(checkpoints[i]!.commit >= checkpoints[i - 1]!.commit, 'checkpoint positions never go back');
        }
        assert.deepEqual(seen.received.map((r) => r.event?.streamId), [matching, matching], 'filtered-out events are not delivered');
      } finally {
        await subscription.unsubscribe();
      }
    },
  },

  // ----- append protocol -----
  {
    rule: 'append-protocol',
    name: 'the server advertises BatchAppend; appendToStream (through it) keeps revisions and errors exact',
    async run({ client, prefix }) {
      assert.equal(await supports(client, BATCH_APPEND), true, 'GetSupportedMethods lists Streams.BatchAppend');
      const stream = `${prefix}-batch`;
      const results = await Promise.all([0, 1, 2].map((i) => client.appendToStream(`${stream}-${i}`, evs(2), { streamState: NO_STREAM })));
      assert.deepEqual(results.map((r) => r.nextExpectedRevision), [1n, 1n, 1n], 'concurrent appends over one BatchAppend call');
      await expectWrongExpectedVersion(client.appendToStream(`${stream}-0`, evs(1), { streamState: 0n }), {
        streamName: `${stream}-0`,
        expectedState: 0n,
        actualState: 1n,
      });
    },
  },
  {
    rule: 'append-protocol',
    needs: ['features'],
    options: { features: { batchAppend: false } },
    name: 'without BatchAppend advertised, appendToStream works through Append (revisions, idempotency, errors)',
    async run({ client, prefix }) {
      assert.equal(await supports(client, BATCH_APPEND), false, 'BatchAppend is not advertised');
      const stream = `${prefix}-unary`;
      const batch = evs(2);
      const first = await client.appendToStream(stream, batch, { streamState: NO_STREAM });
      assert.equal(first.nextExpectedRevision, 1n);
      assert.ok(first.position);
      const replay = await client.appendToStream(stream, batch, { streamState: NO_STREAM });
      assert.deepEqual(replay, first);
      await expectWrongExpectedVersion(client.appendToStream(stream, evs(1), { streamState: NO_STREAM }), {
        streamName: stream,
        expectedState: NO_STREAM,
        actualState: 1n,
      });
      await expectWrongExpectedVersion(client.appendToStream(`${stream}-none`, evs(1), { streamState: STREAM_EXISTS }), {
        expectedState: STREAM_EXISTS,
        actualState: NO_STREAM,
      });
      await client.tombstoneStream(stream);
      await expectDeleted(client.appendToStream(stream, evs(1)), 'appending through Append');
    },
  },

  // ----- multi-stream append -----
  {
    rule: 'multi-stream-append',
    name: 'multiStreamAppend writes to three streams at once and reports each revision and one position',
    async run({ client, prefix }) {
      assert.equal(await supports(client, APPEND_SESSION), true, 'GetSupportedMethods lists v2 AppendSession');
      const [a, b, c] = [`${prefix}-m-a`, `${prefix}-m-b`, `${prefix}-m-c`];
      await client.appendToStream(b, evs(2));
      const result = await client.multiStreamAppend([
        { streamName: a, expectedState: NO_STREAM, events: evs(2, 'A') },
        { streamName: b, expectedState: 1n, events: evs(1, 'B') },
        { streamName: c, expectedState: ANY, events: evs(3, 'C') },
      ]);
      assert.deepEqual(
        result.responses.map((r) => [r.streamName, r.revision]),
        [[a, 1n], [b, 2n], [c, 2n]],
      );
      assert.equal(typeof result.position, 'bigint');
      assert.ok(result.position > 0n);
      assert.deepEqual((await read(client, a)).map((e) => e.type), ['A', 'A']);
      assert.deepEqual(revisions(await read(client, b)), [0n, 1n, 2n]);
      assert.equal((await read(client, c)).length, 3);
    },
  },
  {
    rule: 'multi-stream-append',
    // S2 VerifyCommitChecks: every stream idempotent → AlreadyCommitted with each stream's last
    // revision and the max of their log positions → the replay answers exactly like the original.
    name: 'replaying a multiStreamAppend (same ids, same expected revisions) writes nothing and returns the original result',
    async run({ client, prefix }) {
      const [a, b] = [`${prefix}-mr-a`, `${prefix}-mr-b`];
      const request = () => [
        { streamName: a, expectedState: NO_STREAM as typeof NO_STREAM, events: batchA },
        { streamName: b, expectedState: NO_STREAM as typeof NO_STREAM, events: batchB },
      ];
      const batchA = evs(2, 'A');
      const batchB = evs(1, 'B');
      const first = await client.multiStreamAppend(request());
      const replay = await client.multiStreamAppend(request());
      assert.deepEqual(replay, first);
      assert.deepEqual(ids(await read(client, a)), idsOf(batchA));
      assert.deepEqual(ids(await read(client, b)), idsOf(batchB));
    },
  },
  {
    rule: 'multi-stream-append',
    // S2 VerifyCommitChecks: a mixture of idempotent and new streams is a consistency failure,
    // reported for the first failing (here: the idempotent) stream.
    name: 'a multiStreamAppend replay that adds a new stream fails with wrong expected version and writes nothing',
    async run({ client, prefix }) {
      const [a, b] = [`${prefix}-mm-a`, `${prefix}-mm-b`];
      const batchA = evs(2, 'A');
      await client.multiStreamAppend([{ streamName: a, expectedState: NO_STREAM, events: batchA }]);
      await expectWrongExpectedVersion(
        client.multiStreamAppend([
          { streamName: a, expectedState: NO_STREAM, events: batchA },
          { streamName: b, expectedState: NO_STREAM, events: evs(1, 'B') },
        ]),
        { streamName: a, expectedState: NO_STREAM, actualState: 1n },
      );
      await expectNotFound(client, b);
      assert.equal((await read(client, a)).length, 2);
    },
  },
  {
    rule: 'multi-stream-append',
    // S5 MapToError: WrongExpectedVersion → StreamRevisionConflict (FAILED_PRECONDITION) for the
    // first failing stream; the client maps it to WrongExpectedVersionError.fromRevisionConflict.
    name: 'multiStreamAppend is all-or-nothing: one wrong expected revision fails it and no stream changes',
    async run({ client, prefix }) {
      const [a, b, c] = [`${prefix}-mx-a`, `${prefix}-mx-b`, `${prefix}-mx-c`];
      await client.appendToStream(b, evs(1));
      await expectWrongExpectedVersion(
        client.multiStreamAppend([
          { streamName: a, expectedState: NO_STREAM, events: evs(1) },
          { streamName: b, expectedState: NO_STREAM, events: evs(1) },
          { streamName: c, expectedState: ANY, events: evs(1) },
        ]),
        { streamName: b, expectedState: NO_STREAM, actualState: 0n },
      );
      await expectNotFound(client, a);
      await expectNotFound(client, c);
      assert.equal((await read(client, b)).length, 1);
    },
  },
  {
    rule: 'multi-stream-append',
    // The sink's own transport (src/sink/h2-append.ts): the whole AppendSession as one HTTP/2
    // request with hand-encoded records. Must land like the client's multiStreamAppend, and fail
    // with the client's error classes (only plain-text connections use it).
    name: "the sink's one-write AppendSession lands atomically and fails with the client's errors",
    async run({ client, prefix }) {
      const transport = createH2AppendTransport(client);
      assert.ok(transport, 'the client exposes execute/callArguments/resolveAuthorizationHeader');
      try {
        const [a, b] = [`${prefix}-h2-a`, `${prefix}-h2-b`];
        const record = (type: string) => encodeAppendRecordSized(randomUUID(), type, JSON.stringify({ n: 1 }), { 'source.commitLsn': '0/1A' }).record;
        await client.appendToStream(b, evs(1));
        const result = await transport.append([
          { streamName: a, expectedState: 'no_stream', records: [record('A1'), record('A2')] },
          { streamName: b, expectedState: 0n, records: [record('B2')] },
        ]);
        assert.deepEqual(result.responses, [
          { streamName: a, revision: 1n },
          { streamName: b, revision: 1n },
        ]);
        assert.equal(typeof result.position, 'bigint');
        assert.ok(result.position > 0n);
        const [last] = await read(client, b, { direction: BACKWARDS, fromRevision: END, maxCount: 1 });
        assert.equal(last?.type, 'B2');
        assert.deepEqual(last?.metadata, { 'source.commitLsn': '0/1A', '$schema.name': 'B2', '$schema.format': 'Json' });
        assert.deepEqual((await read(client, a)).map((e) => e.type), ['A1', 'A2']);
        await expectWrongExpectedVersion(
          transport.append([
            { streamName: a, expectedState: 'no_stream', records: [record('A3')] },
            { streamName: `${prefix}-h2-c`, expectedState: 'any', records: [record('C1')] },
          ]),
          { streamName: a, expectedState: NO_STREAM, actualState: 1n },
        );
        await expectNotFound(client, `${prefix}-h2-c`);
      } finally {
        transport?.close();
      }
    },
  },
  {
    rule: 'multi-stream-append',
    // S5 AppendSessionCommand.WithRequest: a stream already in the session (compared
    // case-insensitively) → StreamAlreadyInAppendSession, status ABORTED. Client 1.3.1 maps an
    // ABORTED status whose details are not AppendTransactionSizeExceeded to TimeoutError.
    name: 'multiStreamAppend naming the same stream twice is rejected (ABORTED) and writes nothing',
    async run({ client, prefix }) {
      const a = `${prefix}-twice`;
      const other = `${prefix}-twice-other`;
      await assert.rejects(
        client.multiStreamAppend([
          { streamName: a, expectedState: ANY, events: evs(1) },
          { streamName: other, expectedState: ANY, events: evs(1) },
          { streamName: a, expectedState: ANY, events: evs(1) },
        ]),
        (error: unknown) => {
          assert.ok(error instanceof TimeoutError, `expected the client's TimeoutError (for ABORTED), got ${describe(error)}`);
          assert.equal(error.code, GRPC_ABORTED);
          return true;
        },
      );
      await expectNotFound(client, a);
      await expectNotFound(client, other);
      // the comparison is case-insensitive (StringComparison.OrdinalIgnoreCase)
      await assert.rejects(
        client.multiStreamAppend([
          { streamName: `${a}-Case`, expectedState: ANY, events: evs(1) },
          { streamName: `${a}-case`, expectedState: ANY, events: evs(1) },
        ]),
        (error: unknown) => {
          assert.ok(error instanceof Error && (error as { code?: number }).code === GRPC_ABORTED, `expected ABORTED, got ${describe(error)}`);
          return true;
        },
      );
      await expectNotFound(client, `${a}-Case`);
      await expectNotFound(client, `${a}-case`);
    },
  },
  {
    rule: 'multi-stream-append',
    // S5 BuildMessage: a session with no requests → AppendSessionNoRequests (FAILED_PRECONDITION,
    // no details the client knows) → the client's UnknownError carrying the status code.
    name: 'an empty multiStreamAppend is rejected with FAILED_PRECONDITION',
    async run({ client }) {
      await assert.rejects(client.multiStreamAppend([]), (error: unknown) => {
        assert.ok(error instanceof Error && (error as { code?: number }).code === GRPC_FAILED_PRECONDITION, `expected FAILED_PRECONDITION, got ${describe(error)}`);
        return true;
      });
    },
  },
  {
    rule: 'multi-stream-append',
    // FIELD-NOTES + client multiStreamAppend.js: non-string metadata values throw before any RPC.
    // S8: properties are stored as record properties and read back (v1 Read) as JSON metadata
    // with "$schema.name" (event type) and "$schema.format" ("Json") added — since 25.1.0.
    name: 'multiStreamAppend metadata must be string-valued; string metadata reads back with $schema.* keys',
    async run({ client, prefix }) {
      const a = `${prefix}-mmeta`;
      await assert.rejects(
        client.multiStreamAppend([{ streamName: a, expectedState: ANY, events: [ev('Bad', {}, randomUUID(), { n: 1 })] }]),
        /string keys and string values/,
      );
      await expectNotFound(client, a);
      const good = ev('Good', { v: 1 }, randomUUID(), { 'source.commitLsn': '0/1A2B3C', 'transaction.index': '0' });
      await client.multiStreamAppend([{ streamName: a, expectedState: NO_STREAM, events: [good] }]);
      const [recorded] = await read(client, a);
      assert.ok(recorded);
      assert.equal(recorded.id, good.id);
      assert.equal(recorded.type, 'Good');
      assert.deepEqual(recorded.data, { v: 1 });
      const metadata = recorded.metadata as Record<string, unknown>;
      assert.equal(metadata['source.commitLsn'], '0/1A2B3C');
      assert.equal(metadata['transaction.index'], '0');
      assert.equal(metadata['$schema.name'], 'Good');
      assert.equal(metadata['$schema.format'], 'Json');
    },
  },
  {
    rule: 'multi-stream-append',
    // S5 MapToError: StreamDeleted → StreamTombstoned (FAILED_PRECONDITION + details).
    name: 'multiStreamAppend to a tombstoned stream fails with StreamTombstonedError and writes nothing',
    async run({ client, prefix }) {
      const dead = `${prefix}-mt-dead`;
      const live = `${prefix}-mt-live`;
      await client.tombstoneStream(dead);
      await assert.rejects(
        client.multiStreamAppend([
          { streamName: live, expectedState: ANY, events: evs(1) },
          { streamName: dead, expectedState: ANY, events: evs(1) },
        ]),
        (error: unknown) => {
          assert.ok(error instanceof StreamTombstonedError, `expected StreamTombstonedError, got ${describe(error)}`);
          assert.equal(error.stream, dead);
          return true;
        },
      );
      await expectNotFound(client, live);
    },
  },
  {
    rule: 'multi-stream-append',
    needs: ['features'],
    options: { features: { multiStreamAppend: false } },
    // Client 1.3.1 index.js checks GetSupportedMethods for AppendSession first.
    name: 'without AppendSession advertised, multiStreamAppend fails with UnsupportedError before sending',
    async run({ client, prefix }) {
      const a = `${prefix}-nomulti`;
      await assert.rejects(client.multiStreamAppend([{ streamName: a, expectedState: ANY, events: evs(1) }]), (error: unknown) => {
        assert.ok(error instanceof UnsupportedError, `expected UnsupportedError, got ${describe(error)}`);
        assert.equal(error.minimumVersion, '25.1');
        return true;
      });
      await expectNotFound(client, a);
    },
  },

  // ----- reads through the native bridge -----
  {
    rule: 'bridge-reads',
    name: 'readStream and readAll (native bridge) return JSON and binary events intact',
    async run({ client, prefix }) {
      const stream = `${prefix}-bridge`;
      const json = ev('Json', { text: 'zażółć', n: 1.5, list: [1, 2] }, randomUUID(), { 'source.table': 'invoice' });
      const bytes = new Uint8Array([0, 1, 2, 254, 255]);
      const binary = binaryEvent({ id: randomUUID(), type: 'Binary', data: bytes, metadata: new Uint8Array([9, 8]) });
      const result = await client.appendToStream(stream, [json, binary]);
      const [j, b] = await read(client, stream);
      assert.ok(j && b);
      assert.equal(j.id, json.id);
      assert.equal(j.isJson, true);
      assert.deepEqual(j.data, { text: 'zażółć', n: 1.5, list: [1, 2] });
      assert.deepEqual(j.metadata, { 'source.table': 'invoice' });
      assert.ok(j.created instanceof Date && !Number.isNaN(j.created.getTime()));
      assert.equal(b.id, binary.id);
      assert.equal(b.isJson, false);
      assert.deepEqual(new Uint8Array(b.data as Uint8Array), bytes);
      const fromAll = (await readAllEvents(client, { direction: BACKWARDS, fromPosition: END, maxCount: 200 })).filter((e) => e.streamId === stream);
      assert.deepEqual(ids(fromAll), [binary.id, json.id]);
      assert.deepEqual(fromAll[0]!.position, result.position, 'the last event of an append sits at the append position');
    },
  },

  {
    rule: 'bridge-reads',
    name: 'long reads page through the bridge: 1,500 events forwards, backwards, filtered readAll and a catch-up subscription',
    async run({ client, prefix }) {
      const stream = `${prefix}-long`;
      const total = 1500;
      for (let i = 0; i < total; i += 500) await client.appendToStream(stream, evs(500, 'Bulk'));
      const forwards = await read(client, stream);
      assert.equal(forwards.length, total);
      assert.ok(forwards.every((e, i) => e.revision === BigInt(i)), 'revisions are contiguous');
      const backwards = await read(client, stream, { direction: BACKWARDS, fromRevision: END });
      assert.equal(backwards.length, total);
      assert.equal(backwards[0]!.revision, BigInt(total - 1));
      const filtered = await readAllEvents(client, { filter: streamNameFilter({ prefixes: [stream] }) });
      assert.equal(filtered.length, total, 'readAll with a stream-name filter returns exactly that stream');
      assert.ok(filtered.every((e) => e.streamId === stream));
      const subscription = client.subscribeToStream(stream, { fromRevision: START });
      const seen = collect<ResolvedEvent>(subscription);
      try {
        await seen.until(`${total} events`, () => seen.received.length >= total, 30_000);
        assert.ok(seen.received.every((r, i) => r.event?.revision === BigInt(i)));
      } finally {
        await subscription.unsubscribe();
      }
    },
  },

  // ----- fault injection (in-memory only) -----
  {
    rule: 'fault-injection',
    target: 'in-memory',
    name: 'failNextAppends(1, unavailable): the append fails with UnavailableError, a retry with the same ids succeeds once',
    async run({ client, prefix, inMemory }) {
      assert.ok(inMemory);
      const stream = `${prefix}-fail`;
      const batch = evs(2);
      inMemory.failNextAppends(1, 'unavailable');
      await assert.rejects(client.appendToStream(stream, batch, { streamState: NO_STREAM }), (error: unknown) => {
        assert.ok(error instanceof UnavailableError, `expected UnavailableError, got ${describe(error)}`);
        return true;
      });
      await expectNotFound(client, stream);
      const retried = await client.appendToStream(stream, batch, { streamState: NO_STREAM });
      assert.equal(retried.nextExpectedRevision, 1n);
      assert.deepEqual(ids(await read(client, stream)), idsOf(batch));
    },
  },
  {
    rule: 'fault-injection',
    target: 'in-memory',
    name: 'failNextAppends(2, internal): two appends fail with a client error, the third succeeds',
    async run({ client, prefix, inMemory }) {
      assert.ok(inMemory);
      const stream = `${prefix}-fail2`;
      const batch = evs(1);
      inMemory.failNextAppends(2, 'internal');
      for (const attempt of [1, 2]) {
        await assert.rejects(client.appendToStream(stream, batch, { streamState: NO_STREAM }), (error: unknown) => {
          assert.ok(error instanceof Error && isCommandError(error), `attempt ${attempt}: expected a client CommandError, got ${describe(error)}`);
          return true;
        });
      }
      const ok = await client.appendToStream(stream, batch, { streamState: NO_STREAM });
      assert.equal(ok.nextExpectedRevision, 0n);
      assert.equal((await read(client, stream)).length, 1);
    },
  },
  {
    rule: 'fault-injection',
    target: 'in-memory',
    name: 'stop() then start() on the same port keeps every event and revision',
    async run(ctx) {
      assert.ok(ctx.inMemory);
      const stream = `${ctx.prefix}-stopstart`;
      const batch = evs(3);
      await ctx.client.appendToStream(stream, batch);
      await ctx.inMemory.stop();
      await ctx.inMemory.start();
      const client = await ctx.reconnect();
      assert.deepEqual(ids(await read(client, stream)), idsOf(batch));
      const next = await client.appendToStream(stream, evs(1), { streamState: 2n });
      assert.equal(next.nextExpectedRevision, 3n);
    },
  },
  {
    rule: 'fault-injection',
    target: 'in-memory',
    name: 'setAppendLatency delays append acknowledgements by at least the latency',
    async run({ client, prefix, inMemory }) {
      assert.ok(inMemory);
      const stream = `${prefix}-latency`;
      inMemory.setAppendLatency(300);
      try {
        const started = Date.now();
        const result: AppendResult = await client.appendToStream(stream, evs(1));
        assert.ok(Date.now() - started >= 250, 'the acknowledgement waited for the latency');
        assert.equal(result.nextExpectedRevision, 0n);
      } finally {
        inMemory.setAppendLatency(0);
      }
      const after = await client.appendToStream(stream, evs(1));
      assert.equal(after.nextExpectedRevision, 1n, 'appends keep working once the latency is reset');
    },
  },
];

/** $all filter cases: stream-name prefix/regex, event-type prefix/regex, exclude system events. */
function filterCases(): ConformanceCase[] {
  const filtered = (
    name: string,
    make: (prefix: string, typePrefix: string) => { filter: Filter; keep: Array<[string, string]>; drop: Array<[string, string]> },
  ): ConformanceCase => ({
    rule: 'subscribe-all-filters',
    name,
    async run({ client, prefix }: ConformanceContext) {
      const typePrefix = `T${prefix.replace(/-/g, '')}`;
      const { filter, keep, drop } = make(prefix, typePrefix);
      // half before subscribing (catch-up), half after (live)
      const half = Math.ceil(keep.length / 2);
      const appended: string[] = [];
      const appendAll = async (pairs: Array<[string, string]>, track: boolean) => {
        for (const [stream, type] of pairs) {
          const e = ev(type);
          await client.appendToStream(stream, e);
          if (track) appended.push(e.id);
        }
      };
      await appendAll(drop, false);
      await appendAll(keep.slice(0, half), true);
      const subscription = client.subscribeToAll({ fromPosition: START, filter });
      const seen = collect<AllStreamResolvedEvent>(subscription);
      const mine = () => seen.received.filter((r) => r.event && r.event.streamId.startsWith(prefix));
      try {
        await seen.until('the catch-up matches', () => mine().length >= half);
        await appendAll(keep.slice(half), true);
        await appendAll(drop, false);
        const marker = ev(keep.at(-1)![1]);
        await client.appendToStream(keep.at(-1)![0], marker);
        appended.push(marker.id);
        await seen.until('the live matches', () => mine().some((r) => r.event?.id === marker.id));
        assert.deepEqual(mine().map((r) => r.event?.id), appended, 'exactly the matching events, in order');
      } finally {
        await subscription.unsubscribe();
      }
    },
  });

  return [
    filtered('a $all subscription with a stream-name prefix filter delivers only matching streams (catch-up and live)', (prefix) => ({
      filter: streamNameFilter({ prefixes: [`${prefix}-keep`, `${prefix}-also`] }),
      keep: [[`${prefix}-keep-1`, 'E'], [`${prefix}-also-2`, 'E'], [`${prefix}-keep-3`, 'E']],
      drop: [[`${prefix}-drop-1`, 'E'], [`${prefix}-xkeep-1`, 'E']],
    })),
    filtered('a $all subscription with a stream-name regex filter delivers only matching streams', (prefix) => ({
      filter: streamNameFilter({ regex: `^${prefix}-(inv|ord)-[0-9]+$` }),
      keep: [[`${prefix}-inv-1`, 'E'], [`${prefix}-ord-22`, 'E']],
      drop: [[`${prefix}-inv-x`, 'E'], [`${prefix}-cus-1`, 'E']],
    })),
    filtered('a $all subscription with an event-type prefix filter delivers only matching types', (prefix, tp) => ({
      filter: eventTypeFilter({ prefixes: [`${tp}Invoice`] }),
      keep: [[`${prefix}-a`, `${tp}InvoiceIssued`], [`${prefix}-b`, `${tp}InvoicePaid`]],
      drop: [[`${prefix}-a`, `${tp}OrderPlaced`], [`${prefix}-c`, `X${tp}Invoice`]],
    })),
    filtered('a $all subscription with an event-type regex filter delivers only matching types', (prefix, tp) => ({
      filter: eventTypeFilter({ regex: `^${tp}(Issued|Paid)V[0-9]$` }),
      keep: [[`${prefix}-a`, `${tp}IssuedV1`], [`${prefix}-b`, `${tp}PaidV2`]],
      drop: [[`${prefix}-a`, `${tp}IssuedVx`], [`${prefix}-b`, `${tp}Voided`]],
    })),
    {
      rule: 'subscribe-all-filters',
      // client filter.js: excludeSystemEvents() = eventTypeFilter regex "^[^$].*"
      name: 'a $all subscription excluding system events never delivers $-typed events ($metadata, $streamDeleted)',
      async run({ client, prefix }) {
        const stream = `${prefix}-sys`;
        await client.appendToStream(stream, evs(1));
        await client.setStreamMetadata(stream, { maxCount: 5 });
        const subscription = client.subscribeToAll({ fromPosition: START, filter: excludeSystemEvents() });
        const seen = collect<AllStreamResolvedEvent>(subscription);
        try {
          await seen.until('the first user event', () => seen.received.some((r) => r.event?.streamId === stream));
          await client.tombstoneStream(`${prefix}-sys-dead`);
          await client.setStreamMetadata(stream, { maxCount: 6 });
          const marker = ev('Marker');
          await client.appendToStream(`${prefix}-sys-marker`, marker);
          await seen.until('the marker', () => seen.received.some((r) => r.event?.id === marker.id));
          const systemTyped = seen.received.filter((r) => r.event?.type.startsWith('$'));
          assert.deepEqual(systemTyped.map((r) => `${r.event?.streamId}:${r.event?.type}`), []);
          assert.ok(!seen.received.some((r) => r.event?.streamId === `$$${stream}`), 'metadata events are excluded');
        } finally {
          await subscription.unsubscribe();
        }
      },
    },
  ];
}
