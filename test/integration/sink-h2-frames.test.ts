// Tail reads on a hand-framed HTTP/2 connection (src/sink/h2-frames.ts, `createFramedTailReader`
// in src/sink/h2-read.ts) against the in-memory KurrentDB, and the frames themselves against a
// plain node:http2 server: the answers the client's own `readStream` gives where the response's
// messages prove them, a read given back (`null`) everywhere else, and the sink's reader
// (`createTailReader`) answering with the client's errors for those.
import { randomUUID } from 'node:crypto';
import http2 from 'node:http2';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonEvent, KurrentDBClient, StreamDeletedError, UnavailableError } from '@kurrent/kurrentdb-client';
import { encodeHeaderBlock, openFramedConnection } from '../../src/sink/h2-frames.js';
import { createFramedTailReader, type FramedTailReader } from '../../src/sink/h2-read.js';
import { createBridgeTailReader, createTailReader, type TailReader } from '../../src/sink/tail-reader.js';
import { receiptToMetadata } from '../../src/sink/receipt.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/index.js';
import { startBlackholeProxy } from '../support/blackhole-proxy.js';

async function waitFor<T>(what: string, attempt: () => Promise<T | null | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const result = await attempt();
    if (result !== undefined && result !== null) return result;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const receipt = (n: number) => receiptToMetadata({ kind: 'transaction', assembler: 'orders', source: '7391029384756102938', commitLsn: `0/${(0x1000 + n).toString(16).toUpperCase()}`, xid: 700 + n, ordinal: 0, count: 1 });
const errorOf = (promise: Promise<unknown>) => promise.then((value) => ({ value }), (error: unknown) => ({ error: (error as { type?: unknown }).type }));

describe('tail reads on a hand-framed HTTP/2 connection', () => {
  let db: InMemoryKurrentDB;
  let client: KurrentDBClient;
  let bridge: TailReader;
  let framed: FramedTailReader;

  beforeAll(async () => {
    db = await startInMemoryKurrentDB();
    client = KurrentDBClient.connectionString(db.connectionString);
    bridge = createBridgeTailReader(db.connectionString);
    framed = createFramedTailReader(client)!;
    expect(framed).not.toBeNull();
  });
  afterAll(async () => {
    framed.close();
    await client.dispose();
    await bridge.close();
    await db.close();
  });

  it('answers what readStream answers for streams with events and for missing and soft-deleted ones', async () => {
    const withEvents = `invoice-${randomUUID()}`;
    await client.appendToStream(withEvents, [0, 1, 2].map((n) => jsonEvent({ type: `Invoice${n}`, data: { n }, metadata: { origin: 'change', ...receipt(n) } })));
    const unicode = `Rechnung-ÄÖÜ-日本語-🧾-${randomUUID()}`;
    await client.appendToStream(unicode, jsonEvent({ type: 'Überweisung', data: {}, metadata: { 'entity.name': 'Müller & Søn — 株式会社 🧾' } }));
    const softDeleted = `deleted-${randomUUID()}`;
    await client.appendToStream(softDeleted, jsonEvent({ type: 'A', data: {} }));
    await client.deleteStream(softDeleted);
    const before = { ...framed.counts };
    for (const stream of [withEvents, unicode, softDeleted, `missing-${randomUUID()}`]) {
      const mine = await framed.readTail(stream);
      expect(mine, stream).not.toBeNull();
      expect(mine, stream).toEqual(await bridge.readTail(stream));
    }
    expect(framed.counts).toEqual({ answered: before.answered + 4, passed: before.passed });
  });

  it('gives back what the messages do not prove (a tombstone, a read that ends without an event); the sink\'s reader answers them as readStream does', async () => {
    const tombstoned = `tombstoned-${randomUUID()}`;
    await client.appendToStream(tombstoned, jsonEvent({ type: 'A', data: {} }));
    await client.tombstoneStream(tombstoned);
    const truncated = `truncated-${randomUUID()}`;
    await client.appendToStream(truncated, [jsonEvent({ type: 'A', data: {} }), jsonEvent({ type: 'B', data: {} })]);
    await client.setStreamMetadata(truncated, { truncateBefore: 5 });

    const passed = framed.counts.passed;
    expect(await framed.readTail(tombstoned)).toBeNull();
    expect(await framed.readTail(truncated)).toBeNull();
    expect(framed.counts.passed).toBe(passed + 2);

    const reader = createTailReader(db.connectionString, client);
    try {
      const error = await reader.readTail(tombstoned).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StreamDeletedError);
      expect(await reader.readTail(truncated)).toEqual({ kind: 'not-found' });
      expect(await errorOf(reader.readTail(truncated))).toEqual(await errorOf(bridge.readTail(truncated)));
    } finally {
      await reader.close();
    }
  });

  it('5,000 concurrent reads of streams with large metadata (well past both 64 KiB windows): each its own tail, none given back', async () => {
    const streams = Array.from({ length: 5_000 }, (_, i) => `many-${i}-${randomUUID()}`);
    const ids = new Map<string, string>();
    const filler = 'x'.repeat(400);
    for (let i = 0; i < streams.length; i += 250) {
      await Promise.all(
        streams.slice(i, i + 250).map(async (stream, j) => {
          const events = Array.from({ length: 1 + ((i + j) % 3) }, (_, n) => jsonEvent({ type: `E${n}`, data: {}, metadata: { ...receipt(i + j), filler } }));
          await client.appendToStream(stream, events);
          ids.set(stream, events.at(-1)!.id);
        }),
      );
    }
    const before = { ...framed.counts };
    const tails = await Promise.all(streams.map((stream) => framed.readTail(stream)));
    tails.forEach((tail, i) => {
      const last = i % 3;
      expect(tail).toEqual({ kind: 'event', revision: BigInt(last), id: ids.get(streams[i]!), type: `E${last}`, metadata: { ...receipt(i), filler } });
    });
    expect(framed.counts).toEqual({ answered: before.answered + 5_000, passed: before.passed });
  });

  it('moves to a new connection when one runs out of stream ids, without giving a read back', async () => {
    const own = KurrentDBClient.connectionString(db.connectionString);
    // Room for 10 streams per connection: 200 reads, 64 at a time, need 20 connections.
    const reader = createFramedTailReader(own, { firstStreamId: 2 ** 31 - 1 - 2 * 9 })!;
    try {
      const stream = `ids-${randomUUID()}`;
      const event = jsonEvent({ type: 'I', data: {} });
      await own.appendToStream(stream, event);
      let next = 0;
      await Promise.all(
        Array.from({ length: 64 }, async () => {
          while (next++ < 200) expect(await reader.readTail(stream)).toMatchObject({ kind: 'event', id: event.id });
        }),
      );
      expect(reader.counts).toEqual({ answered: 200, passed: 0 });
    } finally {
      reader.close();
      await own.dispose();
    }
  });

  it('a stopped server: reads given back, the sink\'s reader says UnavailableError; framed answers again after start()', async () => {
    const stream = `restart-${randomUUID()}`;
    const event = jsonEvent({ type: 'R', data: {} });
    await client.appendToStream(stream, event);
    const reader = createTailReader(db.connectionString, client);
    try {
      expect(await framed.readTail(stream)).toMatchObject({ kind: 'event', id: event.id });
      await db.stop();
      expect(await framed.readTail(stream)).toBeNull();
      const error = await reader.readTail(stream).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UnavailableError);
      await db.start();
      // After its rest (a second), the framed reader connects again.
      const tail = await waitFor('a framed read after the restart', () => framed.readTail(stream));
      expect(tail).toMatchObject({ kind: 'event', id: event.id });
    } finally {
      await reader.close();
    }
  });
});

describe('tail reads on a hand-framed connection to a server that stops answering', () => {
  it('gives the reads back at the deadline (the full path answers them), drops the connection, and reads through a new one later', async () => {
    const db = await startInMemoryKurrentDB();
    const proxy = await startBlackholeProxy(db.port);
    const client = KurrentDBClient.connectionString(`kurrentdb://127.0.0.1:${proxy.port}?tls=false&defaultDeadline=300`);
    const framed = createFramedTailReader(client)!;
    const reader = createTailReader(`kurrentdb://127.0.0.1:${proxy.port}?tls=false&defaultDeadline=300`, client);
    try {
      const stream = `hung-${randomUUID()}`;
      const event = jsonEvent({ type: 'H', data: {} });
      await client.appendToStream(stream, event);
      expect(await framed.readTail(stream)).toMatchObject({ kind: 'event', id: event.id });
      expect(await reader.readTail(stream)).toMatchObject({ kind: 'event', id: event.id });

      proxy.blackhole();
      const started = Date.now();
      expect(await framed.readTail(stream)).toBeNull();
      expect(Date.now() - started).toBeLessThan(5_000);
      // The sink's reader: its framed read is given back at the deadline too, and the full path
      // (a new HTTP/2 connection, which the proxy forwards) answers it.
      const viaSink = Date.now();
      expect(await reader.readTail(stream)).toMatchObject({ kind: 'event', id: event.id });
      expect(Date.now() - viaSink).toBeGreaterThanOrEqual(250);

      const tail = await waitFor('a framed read through a new connection', () => framed.readTail(stream));
      expect(tail).toMatchObject({ kind: 'event', id: event.id });
    } finally {
      framed.close();
      await reader.close();
      await client.dispose();
      await proxy.close();
      await db.close();
    }
  });
});

describe('the frames against node:http2', () => {
  let server: http2.Http2Server;
  let port: number;
  const seen: http2.IncomingHttpHeaders[] = [];

  beforeAll(async () => {
    // Padded frames (the maximum padding), its own dynamic table use, trailers: what a real server may send.
    server = http2.createServer({ paddingStrategy: http2.constants.PADDING_STRATEGY_MAX, settings: { maxConcurrentStreams: 8 } });
    server.on('stream', (stream, headers) => {
      seen.push(headers);
      stream.on('error', () => undefined); // the reset below
      const parts: Buffer[] = [];
      stream.on('data', (d: Buffer) => parts.push(d));
      stream.on('end', () => {
        const body = Buffer.concat(parts);
        if (headers[':path'] === '/reset') return stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(headers[':path'] === '/empty' ? Buffer.alloc(0) : Buffer.concat([body, body]));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  const block = (path: string, extra: [string, string][] = []) =>
    encodeHeaderBlock([[':method', 'POST'], [':scheme', 'http'], [':path', path], [':authority', `127.0.0.1:${port}`], ['content-type', 'application/grpc'], ...extra]);

  it('sends literal header fields the server decodes exactly (long values, non-ASCII, authorization never indexed)', async () => {
    const connection = openFramedConnection({ host: '127.0.0.1', port });
    try {
      const long = 'v'.repeat(300);
      const authorization = `Basic ${Buffer.from('admin:changeit').toString('base64')}`;
      const data = await connection.call(block('/echo', [['x-long', long], ['authorization', authorization], ['x-name', 'Müller']]), Buffer.from('hello'), 5_000);
      expect(data?.toString()).toBe('hellohello');
      expect(seen.at(-1)).toMatchObject({ ':path': '/echo', 'x-long': long, authorization, 'x-name': Buffer.from('Müller', 'utf8').toString('latin1') });
    } finally {
      connection.destroy();
    }
  });

  it('many calls past the server\'s 8 concurrent streams and its 64 KiB window; an empty answer and a reset give null', async () => {
    const connection = openFramedConnection({ host: '127.0.0.1', port });
    try {
      // The server's SETTINGS (8 streams) arrive after the first calls went out: wait for the connection to learn them.
      await connection.call(block('/echo'), Buffer.from('x'), 5_000);
      const bodies = Array.from({ length: 8 }, (_, i) => Buffer.alloc(12_000, 97 + i));
      const answers = await Promise.all(bodies.map((body) => connection.call(block('/echo'), body, 5_000)));
      answers.forEach((answer, i) => expect(answer?.equals(Buffer.concat([bodies[i]!, bodies[i]!]))).toBe(true));
      // Beyond the server's limit a call is given back at once, not sent.
      const over = await Promise.all(Array.from({ length: 9 }, () => connection.call(block('/echo'), Buffer.from('y'), 5_000)));
      expect(over.filter((answer) => answer === null)).toHaveLength(1);
      // A body past the 16 KiB frame size goes in several DATA frames; past the stream window (64 KiB) it is given back unsent.
      const large = Buffer.alloc(40_000, 120);
      expect((await connection.call(block('/echo'), large, 5_000))?.equals(Buffer.concat([large, large]))).toBe(true);
      expect(connection.maxBody).toBe(65_535);
      expect(await connection.call(block('/echo'), Buffer.alloc(65_536, 121), 5_000)).toBeNull();
      expect(await connection.call(block('/empty'), Buffer.from('z'), 5_000)).toBeNull();
      expect(await connection.call(block('/reset'), Buffer.from('z'), 5_000)).toBeNull();
      expect(connection.usable).toBe(true);
      // 200 sequential rounds of 8: 19 MiB answered over one connection (window top-ups).
      for (let round = 0; round < 100; round++) {
        const again = await Promise.all(bodies.map((body) => connection.call(block('/echo'), body, 5_000)));
        expect(again.every((answer, i) => answer?.length === 2 * bodies[i]!.length)).toBe(true);
      }
    } finally {
      connection.destroy();
    }
  });

  it('a server that closes: calls in flight given back, the connection no longer usable and marked lost', async () => {
    const stubborn = net.createServer((socket) => socket.once('data', () => socket.destroy()));
    await new Promise<void>((resolve) => stubborn.listen(0, '127.0.0.1', resolve));
    const connection = openFramedConnection({ host: '127.0.0.1', port: (stubborn.address() as net.AddressInfo).port });
    try {
      expect(await connection.call(block('/echo'), Buffer.from('x'), 5_000)).toBeNull();
      expect({ usable: connection.usable, lost: connection.lost }).toEqual({ usable: false, lost: true });
      expect(await connection.call(block('/echo'), Buffer.from('x'), 5_000)).toBeNull();
    } finally {
      connection.destroy();
      await new Promise((resolve) => stubborn.close(resolve));
    }
  });
});
