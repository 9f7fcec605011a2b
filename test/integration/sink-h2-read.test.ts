// Tail reads over one HTTP/2 request each (src/sink/h2-read.ts) against the in-memory KurrentDB:
// the same answers as the client's own `readStream` (through its native bridge), and the client's
// error classes for deleted streams and for a server that is down or does not answer.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binaryEvent, DeadlineExceededError, jsonEvent, KurrentDBClient, StreamDeletedError, UnavailableError } from '@kurrent/kurrentdb-client';
import { createH2AppendTransport } from '../../src/sink/h2-append.js';
import { createH2TailReader, type H2TailReader } from '../../src/sink/h2-read.js';
import { createBridgeTailReader, type TailReader } from '../../src/sink/tail-reader.js';
import { receiptFromMetadata, receiptToMetadata } from '../../src/sink/receipt.js';
import { isTransientError } from '../../src/sink/retry.js';
import { encodeAppendRecordSized } from '../../src/sink/v2-append.js';
import { decodeTailReadResponse } from '../../src/sink/v1-read.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/index.js';
import { startBlackholeProxy } from '../support/blackhole-proxy.js';
import { toReadResp } from '../../src/testing/kurrentdb/streams-read.js';

async function waitFor<T>(what: string, attempt: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const result = await attempt();
    if (result !== undefined) return result;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

const receipt = (n: number) => receiptToMetadata({ kind: 'transaction', assembler: 'orders', source: '7391029384756102938', commitLsn: `0/${(0x1000 + n).toString(16).toUpperCase()}`, xid: 700 + n, ordinal: 0, count: 1 });

describe('tail reads over HTTP/2', () => {
  let db: InMemoryKurrentDB;
  let client: KurrentDBClient;
  let bridge: TailReader;
  let reader: H2TailReader;
  /** Every stream a test wrote or read, for the comparison with the bridge. */
  const touched = new Set<string>();
  const read = (stream: string) => {
    touched.add(stream);
    return reader.readTail(stream);
  };

  beforeAll(async () => {
    db = await startInMemoryKurrentDB();
    client = KurrentDBClient.connectionString(db.connectionString);
    // The sink's bridge reader: tails through the client's `readStream` (its native bridge).
    bridge = createBridgeTailReader(db.connectionString);
    const created = createH2TailReader(client);
    if (!created) throw new Error('this client version lacks the internals the HTTP/2 reader needs');
    reader = created;
  });
  afterAll(async () => {
    reader.close();
    await client.dispose();
    await bridge.close();
    await db.close();
  });

  it('reads the last event of a stream: revision, id, type, and metadata with the receipt', async () => {
    const stream = `invoice-${randomUUID()}`;
    const events = [0, 1, 2].map((n) => jsonEvent({ type: `Invoice${n}`, data: { n }, metadata: { origin: 'change', ...receipt(n) } }));
    await client.appendToStream(stream, events);
    const tail = await read(stream);
    expect(tail).toEqual({ kind: 'event', revision: 2n, id: events[2]!.id, type: 'Invoice2', metadata: { origin: 'change', ...receipt(2) } });
    expect(receiptFromMetadata(tail.kind === 'event' ? tail.metadata : null)).toMatchObject({ assembler: 'orders', commitLsn: '0/1002', xid: 702, ordinal: 0, count: 1 });
  });

  it('reads what the sink appends (v2 records: properties as metadata, the schema keys added)', async () => {
    const stream = `invoice-${randomUUID()}`;
    const append = createH2AppendTransport(client)!;
    const ids = [randomUUID(), randomUUID()];
    try {
      await append.append([{ streamName: stream, expectedState: 'no_stream', records: ids.map((id, n) => encodeAppendRecordSized(id, 'InvoiceIssued', JSON.stringify({ n }), receipt(n)).record) }]);
    } finally {
      append.close();
    }
    const tail = await read(stream);
    expect(tail).toMatchObject({ kind: 'event', revision: 1n, id: ids[1], type: 'InvoiceIssued', metadata: { ...receipt(1), '$schema.name': 'InvoiceIssued' } });
  });

  it('a missing, a soft-deleted and a fully truncated stream have no tail', async () => {
    expect(await read(`missing-${randomUUID()}`)).toEqual({ kind: 'not-found' });

    const deleted = `deleted-${randomUUID()}`;
    await client.appendToStream(deleted, jsonEvent({ type: 'A', data: {} }));
    await client.deleteStream(deleted);
    expect(await read(deleted)).toEqual({ kind: 'not-found' });

    const truncated = `truncated-${randomUUID()}`;
    await client.appendToStream(truncated, [jsonEvent({ type: 'A', data: {} }), jsonEvent({ type: 'B', data: {} })]);
    await client.setStreamMetadata(truncated, { truncateBefore: 5 });
    expect(await read(truncated)).toEqual({ kind: 'not-found' });
  });

  it('a tombstoned stream is StreamDeletedError, as from readStream', async () => {
    const stream = `tombstoned-${randomUUID()}`;
    await client.appendToStream(stream, jsonEvent({ type: 'A', data: {} }));
    await client.tombstoneStream(stream);
    const error = await read(stream).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StreamDeletedError);
    expect((error as StreamDeletedError).type).toBe('stream-deleted');
    expect((error as StreamDeletedError).streamName).toBe(stream);
    expect(isTransientError(error)).toBe(false);
    const fromBridge = await bridge.readTail(stream).catch((e: unknown) => e);
    expect((fromBridge as StreamDeletedError).type).toBe('stream-deleted');
  });

  it('non-ASCII stream names and metadata', async () => {
    const stream = `Rechnung-ÄÖÜ-日本語-🧾-${randomUUID()}`;
    const metadata = { ...receipt(9), 'entity.name': 'Müller & Søn — 株式会社 🧾', 'quote"and\\slash': 'line\nbreak' };
    const event = jsonEvent({ type: 'Überweisung', data: { a: 'ß' }, metadata });
    await client.appendToStream(stream, event);
    expect(await read(stream)).toEqual({ kind: 'event', revision: 0n, id: event.id, type: 'Überweisung', metadata });
  });

  it('metadata that is not JSON comes back as its bytes; no metadata as undefined', async () => {
    const stream = `binary-${randomUUID()}`;
    const bytes = new Uint8Array([0xff, 0x00, 0x7b, 0x22, 0x80]);
    await client.appendToStream(stream, binaryEvent({ type: 'Blob', data: new Uint8Array([1, 2, 3]), metadata: bytes }));
    const tail = await read(stream);
    expect(tail.kind === 'event' && tail.metadata).toBeInstanceOf(Uint8Array);
    expect(tail.kind === 'event' && [...(tail.metadata as Uint8Array)]).toEqual([...bytes]);

    const bare = `bare-${randomUUID()}`;
    await client.appendToStream(bare, binaryEvent({ type: 'Bare', data: new Uint8Array([1]) }));
    expect(await read(bare)).toMatchObject({ kind: 'event', type: 'Bare', metadata: undefined });
  });

  it('decodes ids in the structured form too', () => {
    const id = randomUUID();
    const stored = { id, streamName: 's', revision: 12345678901n, position: 99n, type: 'T', contentType: 'application/json', created: 0n, data: new Uint8Array(), metadata: Buffer.from('{"a":"b"}') };
    for (const uuidAsString of [true, false]) {
      const bytes = Buffer.from(toReadResp(stored as unknown as Parameters<typeof toReadResp>[0], { uuidAsString }).serializeBinary());
      expect(decodeTailReadResponse(bytes, 0, bytes.length)).toEqual({ kind: 'event', revision: 12345678901n, id, type: 'T', metadata: { a: 'b' } });
    }
  });

  it('2,000 concurrent reads each get their own stream\'s tail', async () => {
    const streams = Array.from({ length: 2_000 }, (_, i) => `many-${i}-${randomUUID()}`);
    const ids = new Map<string, string>();
    for (let i = 0; i < streams.length; i += 200) {
      await Promise.all(
        streams.slice(i, i + 200).map(async (stream, j) => {
          const events = Array.from({ length: 1 + ((i + j) % 3) }, (_, n) => jsonEvent({ type: `E${n}`, data: {}, metadata: receipt(i + j) }));
          await client.appendToStream(stream, events);
          ids.set(stream, events.at(-1)!.id);
        }),
      );
    }
    const tails = await Promise.all(streams.map((stream) => reader.readTail(stream)));
    tails.forEach((tail, i) => {
      const stream = streams[i]!;
      const last = i % 3;
      expect(tail).toEqual({ kind: 'event', revision: BigInt(last), id: ids.get(stream), type: `E${last}`, metadata: receipt(i) });
    });
    for (const stream of streams.slice(0, 50)) touched.add(stream);
  });

  it('answers as the client\'s readStream does, for every stream read above', async () => {
    expect(touched.size).toBeGreaterThan(50);
    for (const stream of touched) {
      const [mine, theirs] = await Promise.all([
        reader.readTail(stream).catch((e: unknown) => ({ error: (e as { type?: unknown }).type })),
        bridge.readTail(stream).catch((e: unknown) => ({ error: (e as { type?: unknown }).type })),
      ]);
      expect(mine, stream).toEqual(theirs);
    }
  });

  it('a stopped server is a transient UnavailableError; reads succeed again after start()', async () => {
    const stream = `restart-${randomUUID()}`;
    const event = jsonEvent({ type: 'R', data: {} });
    await client.appendToStream(stream, event);
    await db.stop();
    const error = await reader.readTail(stream).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnavailableError);
    expect(isTransientError(error)).toBe(true);
    await db.start();
    const tail = await waitFor('a read after the restart', () => reader.readTail(stream).catch((e: unknown) => (isTransientError(e) ? undefined : Promise.reject(e))));
    expect(tail).toMatchObject({ kind: 'event', id: event.id });
  });
});

describe('tail reads over HTTP/2 from a server that stops answering', () => {
  it('is a transient DeadlineExceededError, and the dead connection is replaced', async () => {
    const db = await startInMemoryKurrentDB();
    const proxy = await startBlackholeProxy(db.port);
    const client = KurrentDBClient.connectionString(`kurrentdb://127.0.0.1:${proxy.port}?tls=false&defaultDeadline=300`);
    const reader = createH2TailReader(client)!;
    try {
      const stream = `hung-${randomUUID()}`;
      const event = jsonEvent({ type: 'H', data: {} });
      await client.appendToStream(stream, event);
      expect(await reader.readTail(stream)).toMatchObject({ kind: 'event', id: event.id });

      proxy.blackhole();
      const error = await reader.readTail(stream).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DeadlineExceededError);
      expect(isTransientError(error)).toBe(true);

      // The swallowed connection does not answer the PING that follows a missed deadline: it is
      // dropped, and a later read goes through a new connection.
      const tail = await waitFor('a read through a new connection', () => reader.readTail(stream).catch((e: unknown) => (isTransientError(e) ? undefined : Promise.reject(e))));
      expect(tail).toMatchObject({ kind: 'event', id: event.id });
    } finally {
      reader.close();
      await client.dispose();
      await proxy.close();
      await db.close();
    }
  });
});
