// Plain stream reads and catch-up subscriptions of the in-memory KurrentDB have two handlers — off
// the HTTP/2 stream (streams-read-h2.ts, the default) and grpc-js's (streams-read.ts) — that must
// answer alike: through the client's native bridge (every read shape, missing, deleted, truncated
// streams), through its subscriptions (catch-up, live, filters, checkpoints, a stream tombstoned
// while subscribed, a server stopped), and on the wire for requests the raw handler leaves to
// grpc-js or refuses as grpc-js does.
import { randomUUID } from 'node:crypto';
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKWARDS, binaryEvent, END, FORWARDS, jsonEvent, KurrentDBClient, START, streamNameFilter } from '@kurrent/kurrentdb-client';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/index.js';
import { emptyPb, sharedPb, streamsPb } from '../../src/testing/kurrentdb/proto.js';
import { READ_PATH } from '../../src/testing/kurrentdb/streams-read-h2.js';

const HANDLERS = ['http2', 'grpc-js'] as const;
const RUN = randomUUID().slice(0, 8);
const S = {
  three: `order-${RUN}`,
  missing: `missing-${RUN}`,
  softDeleted: `soft-${RUN}`,
  tombstoned: `tomb-${RUN}`,
  truncated: `trunc-${RUN}`,
  maxCount: `max-${RUN}`,
  unicode: `Rechnung-ÄÖÜ-日本語-🧾-${RUN}`,
  binary: `binary-${RUN}`,
};

/** The same writes (same ids) on every server. */
const THREE = [0, 1, 2].map((n) => jsonEvent({ type: `Order${n}`, data: { n }, metadata: { origin: 'change', n: String(n) } }));
const MORE = [0, 1, 2, 3].map((n) => jsonEvent({ type: `E${n}`, data: { n } }));
const UNICODE = jsonEvent({ type: 'Überweisung', data: { a: 'ß' }, metadata: { 'entity.name': 'Müller & Søn — 株式会社 🧾' } });
const BINARY = binaryEvent({ type: 'Blob', data: new Uint8Array([1, 2, 3]), metadata: new Uint8Array([0xff, 0x00, 0x7b]) });

async function write(client: KurrentDBClient): Promise<void> {
  await client.appendToStream(S.three, THREE);
  await client.appendToStream(S.softDeleted, MORE[0]!);
  await client.deleteStream(S.softDeleted);
  await client.appendToStream(S.tombstoned, MORE[1]!);
  await client.tombstoneStream(S.tombstoned);
  await client.appendToStream(S.truncated, MORE.slice(0, 2));
  await client.setStreamMetadata(S.truncated, { truncateBefore: 1 });
  await client.appendToStream(S.maxCount, MORE);
  await client.setStreamMetadata(S.maxCount, { maxCount: 2 });
  await client.appendToStream(S.unicode, UNICODE);
  await client.appendToStream(S.binary, BINARY);
}

const READS = [
  { direction: FORWARDS, fromRevision: START, maxCount: 100 },
  { direction: BACKWARDS, fromRevision: END, maxCount: 1 },
  { direction: BACKWARDS, fromRevision: END, maxCount: 100 },
  { direction: FORWARDS, fromRevision: 1n, maxCount: 2 },
  { direction: BACKWARDS, fromRevision: 1n, maxCount: 5 },
  { direction: FORWARDS, fromRevision: END, maxCount: 5 },
] as const;

/** Every read of every stream through the bridge: events (without `created`) or the error's type. */
async function readEverything(client: KurrentDBClient): Promise<Record<string, unknown>> {
  const results: Record<string, unknown> = {};
  for (const stream of Object.values(S)) {
    for (const [i, options] of READS.entries()) {
      try {
        const events: unknown[] = [];
        for await (const resolved of client.readStream(stream, options)) {
          const { event } = resolved;
          if (event) events.push({ id: event.id, type: event.type, revision: event.revision, position: event.position, data: event.data, metadata: event.metadata, isJson: event.isJson, streamId: event.streamId });
        }
        results[`${stream} #${i}`] = events;
      } catch (error) {
        results[`${stream} #${i}`] = { error: (error as { type?: unknown }).type ?? String(error) };
      }
    }
  }
  return results;
}

async function waitFor(what: string, condition: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** What a subscription saw, in order: events (stream, revision, id, type), checkpoints, caught-up, its end. */
interface Seen {
  log: string[];
  ended: string | null;
}

function watch(subscription: NodeJS.EventEmitter, seen: Seen = { log: [], ended: null }): Seen {
  subscription.on('data', (resolved: { event?: { streamId: string; revision: bigint; id: string; type: string } }) => {
    const e = resolved.event;
    // Records the server writes itself ($streamDeleted) get a fresh id on each server.
    if (e) seen.log.push(`${e.streamId}@${e.revision} ${e.type.startsWith('$') ? '(server id)' : e.id} ${e.type}`);
  });
  subscription.on('caughtUp', () => seen.log.push('caught-up'));
  subscription.on('error', (error: { type?: string }) => (seen.ended = error.type ?? 'error'));
  subscription.on('end', () => (seen.ended ??= 'end'));
  return seen;
}

/** Subscriptions through both handlers: catch-up, live events, a tombstone, then the server stops. */
async function subscriptions(db: InMemoryKurrentDB, client: KurrentDBClient): Promise<Record<string, Seen>> {
  const live = `live-${RUN}`;
  const all: Seen = { log: [], ended: null };
  const checkpointReached = () => void all.log.push('checkpoint');
  watch(client.subscribeToAll({ fromPosition: START, filter: streamNameFilter({ prefixes: [`order-${RUN}`, live], checkpointInterval: 1, maxSearchWindow: 2, checkpointReached }) }), all);
  const unfiltered = watch(client.subscribeToAll({ fromPosition: START }));
  const onStream = watch(client.subscribeToStream(S.three, { fromRevision: START }));
  const liveStream = watch(client.subscribeToStream(live, { fromRevision: END }));
  await waitFor('catch-up', () => [all, onStream, liveStream, unfiltered].every((seen) => seen.log.includes('caught-up')));
  await client.appendToStream(live, [MORE[0]!, MORE[1]!]);
  await client.appendToStream(S.three, MORE[2]!);
  await waitFor('live events', () => liveStream.log.length >= 3 && onStream.log.length >= 5);
  await client.tombstoneStream(live);
  await waitFor('the tombstone', () => liveStream.ended !== null);
  const beforeStop = all.log.length;
  await db.stop();
  await waitFor('the end of the $all subscriptions', () => all.ended !== null && unfiltered.ended !== null && onStream.ended !== null);
  await db.start();
  expect(beforeStop).toBeGreaterThan(3);
  // The unfiltered subscription saw the other tests' writes too, and system records: only its user events are compared.
  unfiltered.log = unfiltered.log.filter((line) => line.includes(RUN) && !line.startsWith('$'));
  return { all, unfiltered, onStream, liveStream };
}

function readRequest(stream: string): Buffer {
  const streamOptions = new streamsPb.ReadReq.Options.StreamOptions();
  streamOptions.setStreamIdentifier(new sharedPb.StreamIdentifier().setStreamName(Buffer.from(stream, 'utf8')));
  streamOptions.setEnd(new emptyPb.Empty());
  const options = new streamsPb.ReadReq.Options();
  options.setStream(streamOptions);
  options.setReadDirection(streamsPb.ReadReq.Options.ReadDirection.BACKWARDS);
  options.setCount('1');
  options.setNoFilter(new sharedPb.Empty());
  options.setUuidOption(new streamsPb.ReadReq.Options.UUIDOption().setString(new sharedPb.Empty()));
  const message = Buffer.from(new streamsPb.ReadReq().setOptions(options).serializeBinary());
  const framed = Buffer.alloc(5 + message.length);
  framed.writeUInt32BE(message.length, 1);
  message.copy(framed, 5);
  return framed;
}

interface RawAnswer {
  status: string | undefined;
  message: string | undefined;
  /** The DATA received, without `created` (a timestamp). */
  messages: number;
  bytes: number;
}

/** One Read call over a plain HTTP/2 connection, its request body written as `chunks` (each flushed before the next). */
async function rawRead(port: number, chunks: Buffer[]): Promise<RawAnswer> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  try {
    const request = session.request({ ':method': 'POST', ':path': READ_PATH, 'content-type': 'application/grpc', te: 'trailers' });
    let status: string | undefined;
    let message: string | undefined;
    const take = (headers: http2.IncomingHttpHeaders) => {
      if (headers['grpc-status'] !== undefined) status = String(headers['grpc-status']);
      if (headers['grpc-message'] !== undefined) message = decodeURIComponent(String(headers['grpc-message']));
    };
    request.on('response', take);
    request.on('trailers', take);
    const data: Buffer[] = [];
    request.on('data', (chunk: Buffer) => data.push(chunk));
    const ended = new Promise<void>((resolve, reject) => {
      request.on('close', resolve);
      request.on('error', reject);
    });
    for (const chunk of chunks) await new Promise<void>((resolve) => request.write(chunk, () => resolve()));
    request.end();
    await ended;
    const body = Buffer.concat(data);
    let messages = 0;
    for (let o = 0; o + 5 <= body.length; o += 5 + body.readUInt32BE(o + 1)) messages += 1;
    return { status, message, messages, bytes: body.length };
  } finally {
    session.close();
  }
}

describe('plain stream reads: the HTTP/2 and grpc-js handlers answer alike', () => {
  const servers = new Map<string, { db: InMemoryKurrentDB; client: KurrentDBClient }>();

  beforeAll(async () => {
    for (const handler of HANDLERS) {
      const db = await startInMemoryKurrentDB({ streamReadHandler: handler });
      const client = KurrentDBClient.connectionString(`${db.connectionString}&discoveryInterval=50`);
      await write(client);
      servers.set(handler, { db, client });
    }
  });
  afterAll(async () => {
    for (const { db, client } of servers.values()) {
      await client.dispose();
      await db.close();
    }
  });

  it('every read shape of every kind of stream, through the bridge', async () => {
    const [http2Results, grpcResults] = (await Promise.all(HANDLERS.map((h) => readEverything(servers.get(h)!.client)))) as [Record<string, unknown>, Record<string, unknown>];
    expect(http2Results).toEqual(grpcResults);
    // And they are what was written (spot checks, so that "alike" is not "alike and empty").
    expect((http2Results[`${S.three} #0`] as { id: string }[]).map((e) => e.id)).toEqual(THREE.map((e) => e.id));
    expect((http2Results[`${S.three} #1`] as { revision: bigint }[]).map((e) => e.revision)).toEqual([2n]);
    expect(http2Results[`${S.tombstoned} #0`]).toEqual({ error: 'stream-deleted' });
    expect(http2Results[`${S.missing} #1`]).toEqual({ error: 'stream-not-found' });
    expect((http2Results[`${S.maxCount} #0`] as { revision: bigint }[]).map((e) => e.revision)).toEqual([2n, 3n]);
    expect((http2Results[`${S.unicode} #1`] as { metadata: unknown }[])[0]!.metadata).toEqual(UNICODE.metadata);
  });

  it('on the wire: whole, split over two DATA frames, missing or repeated request messages', async () => {
    const answers: Record<string, Record<string, RawAnswer>> = {};
    for (const handler of HANDLERS) {
      const { port } = servers.get(handler)!.db;
      const request = readRequest(S.three);
      answers[handler] = {
        whole: await rawRead(port, [request]),
        split: await rawRead(port, [request.subarray(0, 7), request.subarray(7)]),
        tombstoned: await rawRead(port, [readRequest(S.tombstoned)]),
        missing: await rawRead(port, [readRequest(S.missing)]),
        none: await rawRead(port, []),
        twice: await rawRead(port, [request, request]),
      };
    }
    expect(answers['http2']).toEqual(answers['grpc-js']);
    const http2Answers = answers['http2']!;
    expect(http2Answers['whole']).toMatchObject({ status: '0', messages: 1 });
    expect(http2Answers['split']).toEqual(http2Answers['whole']);
    expect(http2Answers['tombstoned']).toMatchObject({ status: '9', message: `Event stream '${S.tombstoned}' is deleted.`, messages: 0 });
    expect(http2Answers['missing']).toMatchObject({ status: '0', messages: 1 });
    expect(http2Answers['none']).toMatchObject({ status: '12', messages: 0 });
    expect(http2Answers['twice']).toMatchObject({ status: '12', messages: 0 });
  });
});

describe('catch-up subscriptions: the HTTP/2 and grpc-js handlers deliver alike', () => {
  it('catch-up, filters and checkpoints, live events, a tombstone, a server stop', async () => {
    const results: Record<string, Record<string, Seen>> = {};
    for (const handler of HANDLERS) {
      const db = await startInMemoryKurrentDB({ streamReadHandler: handler });
      const client = KurrentDBClient.connectionString(`${db.connectionString}&discoveryInterval=50`);
      try {
        await write(client);
        results[handler] = await subscriptions(db, client);
      } finally {
        await client.dispose();
        await db.close();
      }
    }
    expect(results['http2']).toEqual(results['grpc-js']);
    const seen = results['http2']!;
    expect(seen['onStream']!.log.slice(0, 4)).toEqual([...THREE.map((e, n) => `${S.three}@${n} ${e.id} ${e.type}`), 'caught-up']);
    expect(seen['liveStream']).toEqual({ log: ['caught-up', `live-${RUN}@0 ${MORE[0]!.id} E0`, `live-${RUN}@1 ${MORE[1]!.id} E1`], ended: 'stream-deleted' });
    expect(seen['all']!.log.filter((line) => line === 'checkpoint').length).toBeGreaterThan(1);
  });
});
