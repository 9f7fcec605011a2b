// Multi-stream append has two transports in the sink — one HTTP/2 write per call (h2-append.ts:
// hand-framed when the body fits a stream's window, else node:http2; over TLS too: sink-h2-tls.test.ts)
// and grpc-js's client stream (appendEncoded) — and the in-memory
// server two AppendSession handlers (raw HTTP/2 and grpc-js). Every pairing must give the same
// results and the client's own error classes.
import { randomUUID } from 'node:crypto';
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AppendRecordSizeExceededError,
  KurrentDBClient,
  StreamTombstonedError,
  UnavailableError,
  WrongExpectedVersionError,
} from '@kurrent/kurrentdb-client';
import { createH2AppendTransport } from '../../src/sink/h2-append.js';
import { appendEncoded, encodeAppendRecordSized, encodeAppendRequest, type EncodedStreamAppend, type MultiStreamAppendResult } from '../../src/sink/v2-append.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/index.js';

const record = (type: string, bytes = 20): Buffer => encodeAppendRecordSized(randomUUID(), type, JSON.stringify({ pad: 'x'.repeat(bytes) }), { 'source.commitLsn': '0/1A', origin: 'change' }).record;

for (const handler of ['http2', 'grpc-js'] as const) {
  describe(`multi-stream append, server handler ${handler}`, () => {
    let db: InMemoryKurrentDB;
    let client: KurrentDBClient;
    let transports: [string, (requests: readonly EncodedStreamAppend[]) => Promise<MultiStreamAppendResult>][];
    let close: () => void;

    beforeAll(async () => {
      db = await startInMemoryKurrentDB({ appendSessionHandler: handler, maxAppendSize: 64 * 1024 });
      client = KurrentDBClient.connectionString(db.connectionString);
      const h2 = createH2AppendTransport(client);
      const h2Only = createH2AppendTransport(client, { framed: false });
      if (!h2 || !h2Only) throw new Error('this client version lacks the internals the HTTP/2 transport needs');
      close = () => {
        h2.close();
        h2Only.close();
      };
      transports = [
        ['http2 transport (hand-framed first)', (requests) => h2.append(requests)],
        ['http2 transport (node:http2 only)', (requests) => h2Only.append(requests)],
        ['grpc-js transport', (requests) => appendEncoded(client, requests)],
      ];
    });
    afterAll(async () => {
      close();
      await client.dispose();
      await db.close();
    });

    it('appends atomically and answers with revisions and the log position, through either transport', async () => {
      for (const [name, append] of transports) {
        const a = `a-${randomUUID()}`;
        const b = `b-${randomUUID()}`;
        const result = await append([
          { streamName: a, expectedState: 'no_stream', records: [record('A1')] },
          { streamName: b, expectedState: 'any', records: [record('B1'), record('B2')] },
        ]);
        expect(result.responses, name).toEqual([
          { streamName: a, revision: 0n },
          { streamName: b, revision: 1n },
        ]);
        expect(result.position, name).toBe(db.readStreamEvents(b)[1]!.position);
        expect(db.readStreamEvents(a)[0]!.type).toBe('A1');

        // A conflict writes nothing of the call and names the stream with its actual revision.
        const conflict = await append([
          { streamName: b, expectedState: 1n, records: [record('B3')] },
          { streamName: a, expectedState: 7n, records: [record('A2')] },
        ]).catch((error: unknown) => error);
        expect(conflict, name).toBeInstanceOf(WrongExpectedVersionError);
        expect((conflict as WrongExpectedVersionError).streamName, name).toBe(a);
        expect((conflict as WrongExpectedVersionError).actualState, name).toBe(0n);
        expect(db.readStreamEvents(b), name).toHaveLength(2);
      }
    });

    it('a record over the limit and a tombstoned stream come back as the client errors', async () => {
      for (const [name, append] of transports) {
        const big = await append([{ streamName: `big-${randomUUID()}`, expectedState: 'any', records: [record('Big', 20_000), record('Big', 20_000), record('Big', 30_000)] }]).catch((e: unknown) => e);
        expect(big, name).toBeTruthy();
        expect((big as { type?: string }).type, name).toMatch(/transaction-max-size-exceeded|maximum-append-size-exceeded/);

        const dead = `dead-${randomUUID()}`;
        await append([{ streamName: dead, expectedState: 'any', records: [record('X')] }]);
        await client.tombstoneStream(dead);
        const tombstoned = await append([{ streamName: dead, expectedState: 'any', records: [record('Y')] }]).catch((e: unknown) => e);
        expect(tombstoned, name).toBeInstanceOf(StreamTombstonedError);
      }
    });

    it('a record larger than the event limit is AppendRecordSizeExceeded', async () => {
      const small = await startInMemoryKurrentDB({ appendSessionHandler: handler });
      const smallClient = KurrentDBClient.connectionString(small.connectionString);
      const h2 = createH2AppendTransport(smallClient)!;
      try {
        for (const append of [(r: readonly EncodedStreamAppend[]) => h2.append(r), (r: readonly EncodedStreamAppend[]) => appendEncoded(smallClient, r)]) {
          const error = await append([{ streamName: `huge-${randomUUID()}`, expectedState: 'any', records: [record('Huge', 17 * 1024 * 1024)] }]).catch((e: unknown) => e);
          expect(error).toBeInstanceOf(AppendRecordSizeExceededError);
        }
      } finally {
        h2.close();
        await smallClient.dispose();
        await small.close();
      }
    });

    it('a call whose body fits a stream window is answered framed (in several DATA frames past 16 KiB); a larger one, or one the server refuses, as a node:http2 request', async () => {
      const roomy = await startInMemoryKurrentDB({ appendSessionHandler: handler });
      const roomyClient = KurrentDBClient.connectionString(roomy.connectionString);
      // A short framed deadline: a call stuck on flow control would fall to node:http2 (and not count) within the test's time.
      const h2 = createH2AppendTransport(roomyClient, { timeoutMs: 3_000 })!;
      try {
        const small = `small-${randomUUID()}`;
        expect((await h2.append([{ streamName: small, expectedState: 'no_stream', records: [record('S')] }])).responses).toEqual([{ streamName: small, revision: 0n }]);
        expect(h2.framedAppends).toBe(1);
        // ≈ 40 KB: three DATA frames of at most the default 16 KiB.
        const medium = `medium-${randomUUID()}`;
        expect((await h2.append([{ streamName: medium, expectedState: 'no_stream', records: [record('M1', 20_000), record('M2', 20_000)] }])).responses).toEqual([{ streamName: medium, revision: 1n }]);
        expect(h2.framedAppends).toBe(2);
        // ≈ 1 MB, past the server's stream window (768 KiB; grpc-js's handler: 64 KiB): not sent framed, lands through node:http2.
        const large = `large-${randomUUID()}`;
        const records = Array.from({ length: 5 }, (_, i) => record(`L${i}`, 200_000));
        expect((await h2.append([{ streamName: large, expectedState: 'no_stream', records }])).responses).toEqual([{ streamName: large, revision: 4n }]);
        expect(h2.framedAppends).toBe(2);
        // Calls of ≈ 720 KB one after another. The raw HTTP/2 handler's windows are Kestrel's (768 KiB per
        // stream, 1 MiB per connection): each call goes out as the connection window allows — past what
        // the call before left of it — and is answered framed. grpc-js's 64 KiB stream window: node:http2.
        const bigOnesFramed = handler === 'http2' ? 3 : 0;
        for (let i = 0; i < 3; i++) {
          const big = `big-${randomUUID()}`;
          const bigRecords = Array.from({ length: 36 }, (_, n) => record(`G${n}`, 20_000));
          expect((await h2.append([{ streamName: big, expectedState: 'no_stream', records: bigRecords }])).responses).toEqual([{ streamName: big, revision: 35n }]);
          expect(h2.framedAppends).toBe(2 + Math.min(i + 1, bigOnesFramed));
        }
        // Refused (a trailers-only answer, no message): sent again as a request, whose error is the client's.
        const conflict = await h2.append([{ streamName: small, expectedState: 'no_stream', records: [record('S2')] }]).catch((error: unknown) => error);
        expect(conflict).toBeInstanceOf(WrongExpectedVersionError);
        expect(h2.framedAppends).toBe(2 + bigOnesFramed);
        // Still answering framed after the refusal (it asked the client for the route again).
        expect((await h2.append([{ streamName: small, expectedState: 0n, records: [record('S3')] }])).responses).toEqual([{ streamName: small, revision: 1n }]);
        expect(h2.framedAppends).toBe(3 + bigOnesFramed);
        expect(roomy.readStreamEvents(small).map((e) => e.type)).toEqual(['S', 'S3']);
        expect(roomy.readStreamEvents(medium).map((e) => e.type)).toEqual(['M1', 'M2']);
        expect(roomy.readStreamEvents(large).map((e) => e.type)).toEqual(['L0', 'L1', 'L2', 'L3', 'L4']);
      } finally {
        h2.close();
        await roomyClient.dispose();
        await roomy.close();
      }
    });

    it('parses requests whose gRPC frames arrive split at any byte', async () => {
      const a = `split-a-${randomUUID()}`;
      const b = `split-b-${randomUUID()}`;
      const body = Buffer.concat(
        [encodeAppendRequest(a, 'no_stream', [record('S1')]), encodeAppendRequest(b, 'no_stream', [record('S2'), record('S3')])].map((message) => {
          const header = Buffer.alloc(5);
          header.writeUInt32BE(message.length, 1);
          return Buffer.concat([header, message]);
        }),
      );
      const session = http2.connect(`http://127.0.0.1:${db.port}`);
      try {
        const request = session.request({ ':method': 'POST', ':path': '/kurrentdb.protocol.v2.streams.StreamsService/AppendSession', 'content-type': 'application/grpc', te: 'trailers' });
        const status = new Promise<string>((resolve) => {
          request.on('trailers', (trailers) => resolve(String(trailers['grpc-status'])));
          request.on('response', (headers) => headers['grpc-status'] !== undefined && resolve(String(headers['grpc-status'])));
        });
        request.resume();
        for (let at = 0; at < body.length; at += 3) await new Promise<void>((resolve) => request.write(body.subarray(at, at + 3), () => resolve()));
        request.end();
        expect(await status).toBe('0');
      } finally {
        session.close();
      }
      expect(db.readStreamEvents(a).map((e) => e.type)).toEqual(['S1']);
      expect(db.readStreamEvents(b).map((e) => e.type)).toEqual(['S2', 'S3']);
    });

    it('a stopped server is UnavailableError, and the next call after the restart lands', async () => {
      for (const [name, append] of transports) {
        await db.stop();
        const error = await append([{ streamName: `down-${randomUUID()}`, expectedState: 'any', records: [record('D')] }]).catch((e: unknown) => e);
        expect(error, name).toBeInstanceOf(UnavailableError);
        await db.start();
        const s = `up-${randomUUID()}`;
        // The client may need a reconnect attempt or two after the restart.
        let result: MultiStreamAppendResult | null = null;
        for (let attempt = 0; attempt < 20 && !result; attempt++) {
          result = await append([{ streamName: s, expectedState: 'no_stream', records: [record('U')] }]).catch(async (e: unknown) => {
            if (!(e instanceof UnavailableError)) throw e;
            await new Promise((r) => setTimeout(r, 100));
            return null;
          });
        }
        expect(result?.responses, name).toEqual([{ streamName: s, revision: 0n }]);
      }
    });
  });
}
