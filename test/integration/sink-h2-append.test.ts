// Multi-stream append has two transports in the sink — one HTTP/2 write per call (h2-append.ts;
// over TLS too: sink-h2-tls.test.ts) and grpc-js's client stream (appendEncoded) — and the in-memory
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
      if (!h2) throw new Error('this client version lacks the internals the HTTP/2 transport needs');
      close = () => h2.close();
      transports = [
        ['http2 transport', (requests) => h2.append(requests)],
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
