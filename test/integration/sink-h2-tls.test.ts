// The sink's own HTTP/2 connections over TLS (src/sink/h2-transport.ts), as a real KurrentDB is
// reached by default: appends through node:http2 and tail reads as frames, against the in-memory
// KurrentDB serving TLS with a self-signed certificate made for the test (test/support/tls-cert.ts).
// The connection string's TLS options mean what they mean to the client: a certificate it does
// not trust is refused on both paths, `tlsVerifyCert=false` accepts it; a server whose ALPN does
// not choose h2 gets no request. The snapshot progress record's appender (json-append.ts) takes the same framed path.
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonEvent, KurrentDBClient } from '@kurrent/kurrentdb-client';
import { createAppender } from '../../src/pipeline/appender.js';
import { uuidv5 } from '../../src/sink/encoding.js';
import { encodeHeaderBlock, openFramedConnection } from '../../src/sink/h2-frames.js';
import { createFramedTailReader, createH2TailReader } from '../../src/sink/h2-read.js';
import { createJsonAppender } from '../../src/sink/json-append.js';
import { transportOf } from '../../src/sink/h2-transport.js';
import { createKurrentDBSink, type KurrentDBSink, type SinkBatch } from '../../src/sink/index.js';
import { createBridgeTailReader, createTailReader } from '../../src/sink/tail-reader.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/index.js';
import { createTestCertificate, type TestCertificate } from '../support/tls-cert.js';
import type { LogLine } from '../support/kurrentdb-rig.js';

let dir: string;
let certificate: TestCertificate;
let db: InMemoryKurrentDB;
let client: KurrentDBClient;

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ea-tls-'));
  certificate = createTestCertificate(dir);
  db = await startInMemoryKurrentDB({ tls: certificate });
  client = KurrentDBClient.connectionString(db.connectionString);
});
afterAll(async () => {
  await client?.dispose();
  await db?.close();
  await fs.rm(dir, { recursive: true, force: true });
});

const SYSTEM_ID = '7391029384756102938';
function unit(n: number, stream: string): SinkBatch {
  const commitLsn = `0/${(0x10000 + n * 0x100).toString(16).toUpperCase()}`;
  return {
    position: { checkpoint: `v1:${SYSTEM_ID}:1:slot_a:${commitLsn}:${800 + n}`, commitLsn, xid: 800 + n, systemId: SYSTEM_ID },
    events: [{ id: uuidv5(JSON.stringify(['tls', n])), stream, type: 'OrderStatusChanged', data: { n }, metadata: { contract: 'OrderStatusChanged@1' } }],
  };
}

async function feed(sink: KurrentDBSink, units: readonly SinkBatch[]) {
  const appender = createAppender(sink);
  return Promise.all(units.map((u) => appender.append(u)));
}

describe('the sink over TLS', () => {
  it('the connection string names TLS with the test CA', () => {
    expect(db.connectionString).toBe(`kurrentdb://127.0.0.1:${db.port}?tls=true&tlsCAFile=${certificate.caFile}`);
    expect(transportOf(db.connectionString).scheme).toBe('https');
    expect(transportOf(`kurrentdb://127.0.0.1:${db.port}?tls=false`).scheme).toBe('http');
    expect(transportOf('kurrentdb://h:2113?keepAliveTimeout=10&TLS=false').scheme).toBe('http');
    expect(transportOf('kurrentdb+discover://a:2113,b:2113?tlsVerifyCert=false').scheme).toBe('https');
  });

  it('tail reads — framed and through node:http2 — answer what the client answers (events, a missing stream)', async () => {
    const stream = `invoice-${randomUUID()}`;
    const events = [0, 1, 2].map((n) => jsonEvent({ type: `Invoice${n}`, data: { n }, metadata: { origin: 'change', n } }));
    await client.appendToStream(stream, events);
    const transport = transportOf(db.connectionString);
    const framed = createFramedTailReader(client, { transport })!;
    const h2 = createH2TailReader(client, transport)!;
    const bridge = createBridgeTailReader(db.connectionString);
    try {
      for (const name of [stream, `missing-${randomUUID()}`]) {
        const expected = await bridge.readTail(name);
        expect(await framed.readTail(name)).toEqual(expected);
        expect(await h2.readTail(name)).toEqual(expected);
      }
      expect(await framed.readTail(stream)).toMatchObject({ kind: 'event', revision: 2n, id: events[2]!.id, type: 'Invoice2', metadata: { n: 2 } });
      expect(framed.counts).toEqual({ answered: 3, passed: 0 });
    } finally {
      framed.close();
      h2.close();
      await bridge.close();
    }
  });

  it('appends go as HTTP/2 over TLS (framed when small); a sink that knows no stream reads the tails framed; every event once', async () => {
    const streams = Array.from({ length: 300 }, (_, i) => `order-${randomUUID()}-${i}`);
    const logs: LogLine[] = [];
    const open = () =>
      createKurrentDBSink({
        connectionString: db.connectionString,
        assembler: 'orders',
        mode: 'multi-stream',
        checkpointStream: false,
        retry: { initialDelayMs: 5, maxDelayMs: 50 },
        logger: { info: (message, fields) => logs.push({ level: 'info', message, fields }), warn: (message, fields) => logs.push({ level: 'warn', message, fields }) },
      });
    const first = await open();
    try {
      await feed(first, streams.map((stream, i) => unit(i, stream)));
      // A small call goes on the hand-framed connection, over TLS too (the 300 units above may have gone as one large call).
      const framed = first.status().framedAppends!;
      const extra = `order-${randomUUID()}-extra`;
      expect(await feed(first, [unit(10_000, extra)])).toMatchObject([{ appended: 1 }]);
      expect(first.status().framedAppends).toBe(framed + 1);
      expect(db.readStreamEvents(extra)).toHaveLength(1);
    } finally {
      await first.close();
    }
    expect(logs.find((line) => line.message === 'kurrentdb sink started')?.fields).toMatchObject({ transport: 'http2 (one write per call, framed when small, TLS)' });

    // A restart: the sink knows no stream; its first unit meets an existing one, then it reads tails.
    const second = await open();
    try {
      const outcomes = await feed(second, streams.map((stream, i) => unit(streams.length + i, stream)));
      expect(outcomes.reduce((n, o) => n + o.appended, 0)).toBe(streams.length);
      const status = second.status();
      expect(status.tailReads).toBeGreaterThan(streams.length / 2);
      expect(status.framedTailReads).toBe(status.tailReads);
      // Replayed, the whole second backlog is recognised by its receipts: nothing appended twice.
      const replayed = await feed(second, streams.map((stream, i) => unit(streams.length + i, stream)));
      expect(replayed.reduce((n, o) => n + o.skipped, 0)).toBe(streams.length);
    } finally {
      await second.close();
    }
    for (const [i, stream] of streams.entries()) {
      expect(db.readStreamEvents(stream).map((e) => e.id)).toEqual([unit(i, stream).events[0]!.id, unit(streams.length + i, stream).events[0]!.id]);
    }
  });

  it('the snapshot progress record\'s appender goes framed over TLS and reads back as the JSON event it sent', async () => {
    const appender = createJsonAppender(client, db.connectionString);
    try {
      const stream = `event-assembler.snapshot-tls-${randomUUID()}`;
      await appender.append(stream, 'SnapshotProgress', { progress: { generation: 'g1' }, pinnedRuns: [['public.invoice', '0/1A', 1, ['[["id","inv_1"]]']]] });
      expect(appender.framedAppends).toBe(1);
      const read = [];
      for await (const resolved of client.readStream(stream)) read.push(resolved.event!);
      expect(read).toHaveLength(1);
      expect(read[0]).toMatchObject({ type: 'SnapshotProgress', isJson: true, data: { progress: { generation: 'g1' } } });
    } finally {
      appender.close();
    }
  });

  it('a certificate the connection string does not trust: framed reads given back, the sink\'s reader fails as the client does; tlsVerifyCert=false accepts it', async () => {
    const stream = `trust-${randomUUID()}`;
    await client.appendToStream(stream, jsonEvent({ type: 'T', data: {} }));
    const untrusted = `kurrentdb://127.0.0.1:${db.port}?tls=true&defaultDeadline=2000`;
    const own = KurrentDBClient.connectionString(untrusted);
    const framed = createFramedTailReader(own, { transport: transportOf(untrusted) })!;
    const reader = createTailReader(untrusted, own);
    try {
      expect(await framed.readTail(stream)).toBeNull();
      const clientError = await own.readStream(stream, { maxCount: 1 }).next().catch((error: unknown) => error);
      const readerError = await reader.readTail(stream).catch((error: unknown) => error);
      expect(clientError).toBeInstanceOf(Error);
      expect(readerError).toBeInstanceOf(Error);
      expect((readerError as { type?: unknown }).type).toBe((clientError as { type?: unknown }).type);
    } finally {
      framed.close();
      await reader.close();
      await own.dispose();
    }

    const unverified = `kurrentdb://127.0.0.1:${db.port}?tls=true&tlsVerifyCert=false`;
    const lax = KurrentDBClient.connectionString(unverified);
    const laxFramed = createFramedTailReader(lax, { transport: transportOf(unverified) })!;
    try {
      expect(await laxFramed.readTail(stream)).toMatchObject({ kind: 'event', revision: 0n });
      expect(laxFramed.counts.answered).toBe(1);
    } finally {
      laxFramed.close();
      await lax.dispose();
    }
  });

  it('a TLS server whose ALPN does not choose h2: the connection fails, the call gives null, nothing is sent', async () => {
    const [cert, key] = await Promise.all([fs.readFile(certificate.certFile), fs.readFile(certificate.keyFile)]);
    let received = 0;
    const server = tls.createServer({ cert, key, ALPNProtocols: ['http/1.1'] }, (socket) => {
      socket.on('data', (chunk: Buffer) => (received += chunk.length));
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    const transport = transportOf(`kurrentdb://127.0.0.1:${port}?tls=true&tlsCAFile=${certificate.caFile}`);
    const connection = openFramedConnection({ host: '127.0.0.1', port, connect: transport.connect });
    try {
      const headers = encodeHeaderBlock([[':method', 'POST'], [':scheme', 'https'], [':path', '/x'], [':authority', `127.0.0.1:${port}`]]);
      expect(await connection.call(headers, Buffer.from([0, 0, 0, 0, 0]), 5_000)).toBeNull();
      expect(connection.lost).toBe(true);
      expect(received).toBe(0);
    } finally {
      connection.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
