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
import { callTarget, createH2GrpcCaller, forEachGrpcMessage, grpcInternalsOf } from './h2-grpc.js';
import { encodeHeaderBlock, openFramedConnection, type FramedConnection } from './h2-frames.js';
import { PLAIN_TRANSPORT, type H2Transport } from './h2-transport.js';
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

interface Route {
  readonly host: string;
  readonly port: number;
  readonly headerBlock: Buffer;
  readonly timeoutMs: number;
}

/** The client's deadline when it sets none per call (its `defaultDeadline` default). */
const DEFAULT_TIMEOUT_MS = 10_000;
/** After a connection failed: this long on the full path alone (which reports the outage). */
const REST_MS = 1_000;

/** The response's answer, or null when its messages do not show one (or do not decode). */
function answerOf(data: Buffer): TailRead | null {
  let answer: TailRead | null = null;
  try {
    forEachGrpcMessage(data, (bytes, start, end) => {
      answer ??= decodeTailReadResponse(bytes, start, end);
    });
  } catch {
    return null;
  }
  return answer;
}

/**
 * Tail reads on a hand-framed HTTP/2 connection (h2-frames.ts): ≈ a sixth of a request's CPU
 * through node:http2 or the bridge. It sees only the response's messages, never its status, so
 * it answers only what they prove — the stream's last event, or `stream_not_found` — and gives
 * `null` for the rest (a tombstoned stream, a read that ends without either, an error status, a
 * lost connection, a missed deadline): the caller then reads through the full path, whose answers
 * and errors are the client's. Where it connects and what it sends (authority, the client's
 * metadata and credentials, the deadline) it takes from the client's `execute` once per connection.
 * Null when the client lacks the internals this needs. `firstStreamId`: for tests.
 */
export function createFramedTailReader(client: KurrentDBClient, options: { transport?: H2Transport; firstStreamId?: number } = {}): FramedTailReader | null {
  const transport = options.transport ?? PLAIN_TRANSPORT;
  const internals = grpcInternalsOf(client);
  if (!internals) return null;
  const counts = { answered: 0, passed: 0 };
  let route: Route | null = null;
  let routing: Promise<Route | null> | null = null;
  let connection: FramedConnection | null = null;
  let restUntil = 0;
  let closed = false;

  async function resolveRoute(): Promise<Route | null> {
    try {
      return await internals!.execute(streamsGrpc.StreamsClient, 'readStream', async (grpcClient) => {
        const target = await callTarget(internals!, grpcClient, PATH);
        const url = new URL(`${transport.scheme}://${target.authority}`);
        const { ':method': method, ':path': path, ...rest } = target.headers;
        const headers: [string, string][] = [[':method', String(method)], [':scheme', transport.scheme], [':path', String(path)], [':authority', target.authority]];
        for (const [name, value] of Object.entries(rest)) headers.push([name, String(value)]);
        const timeoutMs = target.deadline ? Math.max(1, target.deadline.getTime() - Date.now()) : DEFAULT_TIMEOUT_MS;
        return { host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port), headerBlock: encodeHeaderBlock(headers), timeoutMs };
      });
    } catch {
      return null;
    }
  }

  function pass(): null {
    counts.passed += 1;
    return null;
  }

  return {
    counts,
    async readTail(stream) {
      if (closed || Date.now() < restUntil) return pass();
      if (!route) {
        routing ??= resolveRoute();
        const resolved = await routing;
        routing = null;
        if (!resolved) {
          restUntil = Date.now() + REST_MS;
          return pass();
        }
        route ??= resolved;
      }
      const r = route;
      if (!connection?.usable) {
        connection?.close();
        connection = openFramedConnection({ host: r.host, port: r.port, connect: transport.connect, firstStreamId: options.firstStreamId });
      }
      const used = connection;
      const data = await used.call(r.headerBlock, encodeTailReadRequest(stream), r.timeoutMs);
      const answer = data && answerOf(data);
      if (answer) {
        counts.answered += 1;
        return answer;
      }
      if (!used.usable && route === r) {
        // Gone away, out of stream ids or lost: ask the client where to go again — after a rest if it was lost.
        route = null;
        if (used.lost) restUntil = Date.now() + REST_MS;
      }
      return pass();
    },
    close() {
      closed = true;
      connection?.close();
      connection = null;
    },
  };
}
