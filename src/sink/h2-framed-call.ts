/**
 * One gRPC method called on a hand-framed HTTP/2 connection (h2-frames.ts): ≈ a sixth of a
 * request's CPU through node:http2 or the client's bridge. The connection sees only a response's
 * messages, never its status, so a call answers only what its messages prove — the caller's
 * `answerOf` decides — and gives `null` for the rest (an error status, a reset, a lost connection,
 * a missed deadline, a body larger than the peer's stream window): the caller then asks again on
 * its full path, whose answers and errors are the client's. Where it connects and what it sends
 * (authority, the client's metadata and credentials, the deadline) it takes from the client's
 * `execute` once per connection. Used for tail reads (h2-read.ts) and appends (h2-append.ts).
 */
import type { KurrentDBClient } from '@kurrent/kurrentdb-client';
import { callTarget, grpcInternalsOf } from './h2-grpc.js';
import { encodeHeaderBlock, openFramedConnection, type FramedConnection } from './h2-frames.js';
import { PLAIN_TRANSPORT, type H2Transport } from './h2-transport.js';

export interface FramedCaller {
  /**
   * Sends `body` (its gRPC-framed messages) and resolves with `answerOf(response DATA)`, or `null`
   * when there is no response to decode or `answerOf` finds no answer in it (or throws). Never rejects.
   */
  call<T>(body: Buffer, answerOf: (data: Buffer) => T | null): Promise<T | null>;
  /** Calls answered here, and calls given back (`null`). */
  readonly counts: { readonly answered: number; readonly passed: number };
  close(): void;
}

export interface FramedCallerOptions {
  /** Plain text by default. */
  readonly transport?: H2Transport;
  /** The first stream id (odd); tests start near the end of the id space. */
  readonly firstStreamId?: number;
  /** Longest wait for an answer, when shorter than the client's deadline. */
  readonly timeoutMs?: number;
  /**
   * Ask the client where to go again after any call given back (not only after a lost
   * connection): for a method whose only unanswered calls are errors — an append refused by a
   * node that is no longer the leader goes to the leader next time.
   */
  readonly rerouteAfterPass?: boolean;
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

/** `debugName` and `path`: the method as the client's `execute` and the server know it. Null when the client lacks the internals this needs. */
export function createFramedCaller(client: KurrentDBClient, service: unknown, debugName: string, path: string, options: FramedCallerOptions = {}): FramedCaller | null {
  const transport = options.transport ?? PLAIN_TRANSPORT;
  const internals = grpcInternalsOf(client);
  if (!internals) return null;
  const counts = { answered: 0, passed: 0 };
  let route: Route | null = null;
  let routing: Promise<Route | null> | null = null;
  let connection: FramedConnection | null = null;
  /** Where `connection` goes (a new route may name another node: the leader after an election). */
  let connectedTo = '';
  let restUntil = 0;
  let closed = false;

  async function resolveRoute(): Promise<Route | null> {
    try {
      return await internals!.execute(service, debugName, async (grpcClient) => {
        const target = await callTarget(internals!, grpcClient, path);
        const url = new URL(`${transport.scheme}://${target.authority}`);
        const { ':method': method, ':path': targetPath, ...rest } = target.headers;
        const headers: [string, string][] = [[':method', String(method)], [':scheme', transport.scheme], [':path', String(targetPath)], [':authority', target.authority]];
        for (const [name, value] of Object.entries(rest)) headers.push([name, String(value)]);
        const deadlineMs = target.deadline ? Math.max(1, target.deadline.getTime() - Date.now()) : DEFAULT_TIMEOUT_MS;
        const timeoutMs = options.timeoutMs === undefined ? deadlineMs : Math.min(deadlineMs, options.timeoutMs);
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
    async call<T>(body: Buffer, answerOf: (data: Buffer) => T | null): Promise<T | null> {
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
      const address = `${r.host}:${r.port}`;
      if (!connection?.usable || connectedTo !== address) {
        connection?.close(); // its calls in flight still end as the server answers
        connection = openFramedConnection({ host: r.host, port: r.port, connect: transport.connect, firstStreamId: options.firstStreamId });
        connectedTo = address;
      }
      const used = connection;
      // Larger than a stream may carry without waiting for its window: the full path's (no fault of the route's).
      if (body.length > used.maxBody) return pass();
      const data = await used.call(r.headerBlock, body, r.timeoutMs);
      let answer: T | null = null;
      try {
        if (data) answer = answerOf(data);
      } catch {
        // Not a response this method answers with: the full path's.
      }
      if (answer !== null) {
        counts.answered += 1;
        return answer;
      }
      if (route === r && (!used.usable || options.rerouteAfterPass)) {
        // Gone away, out of stream ids or lost (or, when asked, any call given back): ask the client where to go again — after a rest if it was lost.
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
