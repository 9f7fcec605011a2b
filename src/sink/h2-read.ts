/**
 * Stream tail reads (`Streams.Read`, backwards from the end, one event) as one HTTP/2 request
 * each (plain text or TLS: h2-transport.ts).
 *
 * Why not through the client: its `readStream` goes through the native bridge (`@kurrent/bridge`),
 * which takes milliseconds per read when reads come one at a time (measured against the in-memory
 * server in another process: 4.6–10 ms serially, 0.4 ms here) and ~60–80 µs of CPU per read with
 * many in flight — about what node:http2 costs per request too, so at 64+ reads in flight this
 * path saves latency, not CPU (bench/tail-read.bench.ts).
 *
 * Everything around the bytes stays the client's (h2-grpc.ts: `execute`, channel target, headers,
 * credentials, deadline, error conversion), and the answers are what its `readStream` gives: a
 * deleted (tombstoned) stream is `StreamDeletedError` (`type: 'stream-deleted'`), a server that
 * is down `UnavailableError`, one that does not answer in time `DeadlineExceededError`. A missing
 * (or soft-deleted) stream is not an error here but `{ kind: 'not-found' }`, where the client
 * throws `StreamNotFoundError`.
 */
import type { KurrentDBClient } from '@kurrent/kurrentdb-client';
import streamsGrpc from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/streams_grpc_pb.js';
import { createFramedCaller } from './h2-framed-call.js';
import { createH2GrpcCaller, forEachGrpcMessage } from './h2-grpc.js';
import type { H2Transport } from './h2-transport.js';
import { decodeTailReadResponse, encodeTailReadRequest, type TailRead } from './v1-read.js';

export type { TailRead } from './v1-read.js';

const PATH = '/event_store.client.streams.Streams/Read';

export interface H2TailReader {
  /** The stream's last event (its revision, id, type and custom metadata), or why there is none. */
  readTail(stream: string): Promise<TailRead>;
  close(): void;
}

const NOT_FOUND: TailRead = { kind: 'not-found' };

/** The response's answer: the first event or `stream_not_found`; `not-found` too when the read ended without either. */
function decodeResponse(data: Buffer): TailRead {
  let answer: TailRead | null = null;
  forEachGrpcMessage(data, (bytes, start, end) => {
    answer ??= decodeTailReadResponse(bytes, start, end);
  });
  return answer ?? NOT_FOUND;
}

/** Null when the client lacks the internals the HTTP/2 path needs (then read through `readStream`). */
export function createH2TailReader(client: KurrentDBClient, transport?: H2Transport): H2TailReader | null {
  const caller = createH2GrpcCaller(client, transport);
  if (!caller) return null;
  return {
    readTail(stream) {
      return caller.call(streamsGrpc.StreamsClient, 'readStream', PATH, encodeTailReadRequest(stream), decodeResponse);
    },
    close() {
      caller.close();
    },
  };
}

export interface FramedTailReader {
  /** The tail when the response's messages show it (an event, or `stream_not_found`); `null` when they do not — ask `H2TailReader`/the bridge. */
  readTail(stream: string): Promise<TailRead | null>;
  /** Reads answered here, and reads given back (`null`). */
  readonly counts: { readonly answered: number; readonly passed: number };
  close(): void;
}

/** The response's answer, or null when its messages do not show one. */
function answerOf(data: Buffer): TailRead | null {
  let answer: TailRead | null = null;
  forEachGrpcMessage(data, (bytes, start, end) => {
    answer ??= decodeTailReadResponse(bytes, start, end);
  });
  return answer;
}

/**
 * Tail reads on a hand-framed HTTP/2 connection (h2-framed-call.ts): it answers only what the
 * response's messages prove — the stream's last event, or `stream_not_found` — and gives `null`
 * for the rest (a tombstoned stream, a read that ends without either, an error status, a lost
 * connection, a missed deadline): the caller then reads through the full path, whose answers and
 * errors are the client's. Null when the client lacks the internals this needs. `firstStreamId`: for tests.
 */
export function createFramedTailReader(client: KurrentDBClient, options: { transport?: H2Transport; firstStreamId?: number } = {}): FramedTailReader | null {
  const caller = createFramedCaller(client, streamsGrpc.StreamsClient, 'readStream', PATH, options);
  if (!caller) return null;
  return {
    counts: caller.counts,
    readTail: (stream) => caller.call(encodeTailReadRequest(stream), answerOf),
    close: () => caller.close(),
  };
}
