/**
 * One gRPC call as one plain HTTP/2 request (node:http2): the request's messages written in one
 * go, the response's collected until the status. Used where the client's own path is slow: the
 * multi-stream append (h2-append.ts — grpc-js sends one client-stream message per event-loop
 * turn) and the tail read (h2-read.ts — the native bridge takes milliseconds per read when reads
 * come one at a time). node:http2 itself costs ~45–50 µs of CPU per request here (measured: a
 * bare `session.request` loop), the floor of this path.
 *
 * Everything around the bytes stays the client's: the call runs inside the client's `execute`
 * (its channel, endpoint discovery and reconnect-on-failure), the target is the channel's (the
 * channel itself never connects), the headers carry the client's connection name and credentials,
 * and errors are converted by the client's `convertToCommandError` from the gRPC status and
 * trailers — the same error classes as its own calls. Plain text or TLS as the connection string
 * says (h2-transport.ts).
 *
 * What grpc-js's channel did that this must do itself: no Nagle on the socket, a deadline, and
 * noticing a dead connection — a call past its deadline pings the connection, and one that does
 * not answer is dropped so the next call reconnects (grpc-js does this with keepalive pings).
 */
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import type { KurrentDBClient } from '@kurrent/kurrentdb-client';
import commandErrors from '@kurrent/kurrentdb-client/dist/utils/CommandError.js';
import { PLAIN_TRANSPORT, type H2Transport } from './h2-transport.js';
import type { ClientInternals as BaseClientInternals } from './v2-append.js';

/** The client internals this relies on: `execute`, `callArguments`, and the authorization header (1.x, not in the typings). */
export interface ClientInternals extends BaseClientInternals {
  resolveAuthorizationHeader(perCall?: unknown): Promise<string | undefined>;
}

export interface H2GrpcCaller {
  /**
   * Sends `body` (gRPC-framed messages: flag 0, 4-byte big-endian length, the message) to `path` as one HTTP/2 request through
   * the client's `execute` with `service` (the generated grpc-js client class whose channel the
   * client keys; `debugName` is for its debug log). Once the call ends with status OK, resolves
   * with `decode(the response body)` (its gRPC frames; see `forEachGrpcMessage`); a non-OK status,
   * a broken connection, the deadline, or `decode` throwing reject with the client's error class.
   */
  call<T>(service: unknown, debugName: string, path: string, body: Buffer, decode: (data: Buffer) => T): Promise<T>;
  close(): void;
}

/** `dns:127.0.0.1:2113`, `127.0.0.1:2113`, `dns:[::1]:2113` → an http URL authority. */
function authorityOf(target: string): string {
  let rest = target.replace(/^dns:(\/\/[^/]*\/)?/, '');
  if (rest.startsWith('//')) rest = rest.slice(2);
  return rest;
}

/** Calls `each(data, start, end)` for every message of a response body; throws when the framing is broken. */
export function forEachGrpcMessage(data: Buffer, each: (data: Buffer, start: number, end: number) => void): void {
  let o = 0;
  while (o < data.length) {
    if (data.length - o < 5) throw new Error(`truncated gRPC frame header (${data.length - o} bytes)`);
    // We never offer compression (no grpc-accept-encoding), so a compressed message is an error.
    if (data[o] !== 0) throw new Error(`compressed gRPC message (flag ${data[o]})`);
    const end = o + 5 + data.readUInt32BE(o + 1);
    if (end > data.length) throw new Error(`truncated gRPC message (${end - data.length} bytes missing)`);
    each(data, o + 5, end);
    o = end;
  }
}

/** A gRPC status as grpc-js reports it (what the client's error conversion reads). */
function serviceError(code: number, details: string, metadata: grpc.Metadata = new grpc.Metadata()): Error {
  const name = grpc.status[code] ?? String(code);
  return Object.assign(new Error(`${code} ${name}: ${details}`), { code, details, metadata });
}

interface Session {
  readonly authority: string;
  readonly h2: http2.ClientHttp2Session;
  inFlight: number;
  /** Streams opened: a client has 2^30 stream ids (odd, below 2^31) per connection. */
  streams: number;
  pinging: boolean;
}

/** Streams per connection before a new one is opened (the old one closes once its calls end). */
const MAX_STREAMS_PER_SESSION = 2 ** 30 - 1024;

/** How often calls in flight are checked against their deadline (a connection that stopped answering). */
const SWEEP_MS = 100;

/**
 * One call in flight. The stream's listeners are shared functions that find their call on the
 * stream (`this[CALL]`): at ~10,000 calls/s, closures per call showed as GC time.
 */
interface Call {
  readonly session: Session;
  readonly path: string;
  readonly decode: (data: Buffer) => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
  /** `Date.now()` after which the call is given up (the deadline plus a second for the server's own answer). */
  readonly giveUpAt: number;
  readonly timeoutMs: number;
  /** The caller's calls with a deadline, this one among them until it ends. */
  readonly timed: Set<Call> | null;
  chunks: Buffer | Buffer[] | null;
  status: number;
  trailers: http2.IncomingHttpHeaders | null;
  settled: boolean;
  stream: http2.ClientHttp2Stream | null;
}

const CALL = Symbol('call');
type CallStream = http2.ClientHttp2Stream & { [CALL]: Call };

function onResponse(this: CallStream, headers: http2.IncomingHttpHeaders): void {
  const call = this[CALL];
  const httpStatus = Number(headers[':status']);
  if (httpStatus !== 200 && headers['grpc-status'] === undefined) {
    call.status = httpStatus === 503 || httpStatus === 502 ? grpc.status.UNAVAILABLE : grpc.status.UNKNOWN;
    call.trailers = { 'grpc-message': `HTTP status ${httpStatus}` };
    return;
  }
  onTrailers.call(this, headers);
}

function onTrailers(this: CallStream, headers: http2.IncomingHttpHeaders): void {
  const value = headers['grpc-status'];
  if (value === undefined) return;
  const call = this[CALL];
  call.status = Number(value);
  call.trailers = headers;
}

function onData(this: CallStream, chunk: Buffer): void {
  const call = this[CALL];
  if (call.chunks === null) call.chunks = chunk;
  else if (Array.isArray(call.chunks)) call.chunks.push(chunk);
  else call.chunks = [call.chunks, chunk];
}

function onError(this: CallStream, error: Error): void {
  const call = this[CALL];
  settle(call, serviceError(grpc.status.UNAVAILABLE, `${call.path}: ${error.message}`));
}

function onClose(this: CallStream): void {
  const call = this[CALL];
  if (call.settled) return;
  if (call.status < 0) {
    return settle(call, serviceError(grpc.status.UNAVAILABLE, `${call.path}: the connection closed before a status (${this.rstCode !== undefined ? `RST ${this.rstCode}` : 'no trailers'})`));
  }
  if (call.status !== grpc.status.OK) {
    const raw = String(call.trailers?.['grpc-message'] ?? '');
    let message = raw;
    try {
      message = decodeURIComponent(raw);
    } catch {
      // not percent-encoded after all: as sent
    }
    return settle(call, serviceError(call.status, message, grpc.Metadata.fromHttp2Headers(call.trailers ?? {})));
  }
  const chunks = call.chunks;
  const data: Buffer = chunks === null ? Buffer.alloc(0) : Array.isArray(chunks) ? Buffer.concat(chunks) : chunks;
  let result: unknown;
  try {
    result = call.decode(data);
  } catch (error) {
    return settle(call, serviceError(grpc.status.INTERNAL, `${call.path}: undecodable response (${data.length} bytes): ${(error as Error).message}`));
  }
  settle(call, null, result);
}

/** Ends a call once: resolves it, or rejects it with the client's error class for the gRPC error. */
function settle(call: Call, error: Error | null, result?: unknown): void {
  if (call.settled) return;
  call.settled = true;
  call.timed?.delete(call);
  const session = call.session;
  if (--session.inFlight === 0 && !session.h2.destroyed) session.h2.unref();
  if (error) call.reject(commandErrors.convertToCommandError(error));
  else call.resolve(result);
}

/** The client's internals the HTTP/2 paths need, or null when this client version lacks them. */
export function grpcInternalsOf(client: KurrentDBClient): ClientInternals | null {
  const candidate = client as unknown as Partial<ClientInternals>;
  if (typeof candidate.execute !== 'function' || typeof candidate.callArguments !== 'function' || typeof candidate.resolveAuthorizationHeader !== 'function') return null;
  if (typeof commandErrors?.convertToCommandError !== 'function') return null;
  return candidate as ClientInternals;
}

/** Where a call inside the client's `execute` goes and what it sends: the channel's authority, the request headers (the client's metadata and credentials), the deadline. */
export async function callTarget(internals: ClientInternals, grpcClient: grpc.Client, path: string): Promise<{ authority: string; headers: http2.OutgoingHttpHeaders; deadline: Date | undefined }> {
  const [metadata, options] = internals.callArguments({ requiresLeader: false });
  const headers: http2.OutgoingHttpHeaders = {
    ':method': 'POST',
    ':path': path,
    'content-type': 'application/grpc',
    te: 'trailers',
  };
  const map = metadata.getMap();
  for (const key in map) headers[key] = String(map[key]);
  const authorization = await internals.resolveAuthorizationHeader();
  if (authorization) headers['authorization'] = authorization;
  const deadline = options.deadline instanceof Date ? options.deadline : undefined;
  return { authority: authorityOf(grpcClient.getChannel().getTarget()), headers, deadline };
}

/** `transport`: how to connect — `transportOf(the connection string)` (plain text by default, for tests). */
export function createH2GrpcCaller(client: KurrentDBClient, transport: H2Transport = PLAIN_TRANSPORT): H2GrpcCaller | null {
  const internals = grpcInternalsOf(client);
  if (!internals) return null;

  let current: Session | null = null;
  let closed = false;

  function sessionFor(authority: string): Session {
    const s = current;
    if (s && s.authority === authority && !s.h2.closed && !s.h2.destroyed && s.streams < MAX_STREAMS_PER_SESSION) return s;
    if (s && !s.h2.destroyed) {
      if (s.authority === authority) s.h2.close(); // out of stream ids: let its calls finish
      else s.h2.destroy();
    }
    const url = new URL(`${transport.scheme}://${authority}`);
    const h2 = http2.connect(url, {
      settings: { enablePush: false },
      createConnection: () => transport.connect(url.hostname.replace(/^\[|\]$/g, ''), Number(url.port)),
    });
    h2.on('error', () => undefined); // each request reports its own failure
    const entry: Session = { authority, h2, inFlight: 0, streams: 0, pinging: false };
    h2.once('close', () => {
      if (current === entry) current = null;
    });
    h2.unref();
    current = entry;
    return entry;
  }

  /** After a missed deadline: a connection that does not answer a PING in time is dropped (its calls fail as UNAVAILABLE). */
  function checkAlive(session: Session, timeoutMs: number): void {
    const h2 = session.h2;
    if (session.pinging || h2.destroyed || h2.closed) return;
    if (h2.connecting) {
      h2.destroy(); // still connecting after a whole deadline: the next call tries afresh
      return;
    }
    session.pinging = true;
    const timer = setTimeout(() => h2.destroy(), Math.min(10_000, Math.max(1_000, timeoutMs)));
    timer.unref();
    const sent = h2.ping((error) => {
      clearTimeout(timer);
      session.pinging = false;
      if (error && !h2.destroyed) h2.destroy();
    });
    if (!sent) {
      // Too many pings outstanding: those decide.
      clearTimeout(timer);
      session.pinging = false;
    }
  }

  /** Calls in flight with a deadline, checked every SWEEP_MS while there are any. */
  const timed = new Set<Call>();
  let sweeper: ReturnType<typeof setInterval> | null = null;

  function sweep(): void {
    const now = Date.now();
    for (const call of timed) {
      if (now >= call.giveUpAt) {
        // The server enforces grpc-timeout itself; this is for a connection that stopped answering.
        call.stream?.close(http2.constants.NGHTTP2_CANCEL);
        settle(call, serviceError(grpc.status.DEADLINE_EXCEEDED, 'Deadline exceeded'));
        checkAlive(call.session, call.timeoutMs);
      }
    }
    if (timed.size === 0 && sweeper) {
      clearInterval(sweeper);
      sweeper = null;
    }
  }

  function request(authority: string, body: Buffer, headers: http2.OutgoingHttpHeaders, deadline: Date | undefined, decode: (data: Buffer) => unknown): Promise<unknown> {
    return new Promise((resolve, reject) => {
      let session: Session;
      try {
        session = sessionFor(authority);
      } catch (error) {
        return reject(commandErrors.convertToCommandError(serviceError(grpc.status.UNAVAILABLE, `connect ${authority}: ${(error as Error).message}`)));
      }
      if (session.inFlight++ === 0) session.h2.ref();
      session.streams += 1;
      const timeoutMs = deadline ? Math.max(0, deadline.getTime() - Date.now()) : -1;
      const call: Call = {
        session,
        path: String(headers[':path']),
        decode,
        resolve,
        reject,
        giveUpAt: timeoutMs < 0 ? Infinity : Date.now() + timeoutMs + 1000,
        timeoutMs,
        timed: timeoutMs < 0 ? null : timed,
        chunks: null,
        status: -1,
        trailers: null,
        settled: false,
        stream: null,
      };
      let stream: CallStream;
      try {
        if (timeoutMs >= 0) headers['grpc-timeout'] = `${Math.max(1, Math.ceil(timeoutMs))}m`;
        stream = session.h2.request(headers) as CallStream;
      } catch (error) {
        // A session that went away between the check and the request.
        if (current === session) current = null;
        return settle(call, serviceError(grpc.status.UNAVAILABLE, `${call.path}: ${(error as Error).message}`));
      }
      call.stream = stream;
      stream[CALL] = call;
      if (call.timed) {
        timed.add(call);
        if (!sweeper) {
          sweeper = setInterval(sweep, SWEEP_MS);
          sweeper.unref();
        }
      }
      stream.on('response', onResponse);
      stream.on('trailers', onTrailers);
      stream.on('data', onData);
      stream.on('error', onError);
      stream.on('close', onClose);
      stream.end(body);
    });
  }

  return {
    call<T>(service: unknown, debugName: string, path: string, body: Buffer, decode: (data: Buffer) => T): Promise<T> {
      if (closed) return Promise.reject(new Error(`the HTTP/2 transport for ${debugName} is closed`));
      return internals.execute(service, debugName, async (grpcClient) => {
        const { authority, headers, deadline } = await callTarget(internals, grpcClient, path);
        return request(authority, body, headers, deadline, decode) as Promise<T>;
      });
    },
    close() {
      closed = true;
      current?.h2.close(); // calls in flight end as the server answers (or at their deadline)
      current = null;
    },
  };
}
