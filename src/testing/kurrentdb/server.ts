// An in-memory KurrentDB that the real `@kurrent/kurrentdb-client` (and its native reader,
// `@kurrent/bridge`) talks to over gRPC on loopback. For tests, the demo, and users' own
// integration tests; production uses a real KurrentDB.
import * as grpc from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import * as net from 'node:net';
import type * as http2 from 'node:http2';
import { createWritePath, type InjectedFailureKind, type InjectedFailureOptions, type ServerContext } from './context.js';
import { serverFeaturesGrpc, streamsGrpc, v2StreamsGrpc } from './proto.js';
import { createServerFeaturesService } from './server-features-service.js';
import { createEventStore } from './store.js';
import { createStreamsService, streamsV1ServiceDefinition } from './streams-service.js';
import { READ_PATH, serveStreamRead } from './streams-read-h2.js';
import type { RegisterSubscription } from './streams-subscribe.js';
import { APPEND_SESSION_PATH, createStreamsV2Service, serveAppendSession, streamsV2ServiceDefinition } from './streams-v2-service.js';

export interface InMemoryKurrentDBOptions {
  /** Port on 127.0.0.1. Default: a free port chosen by the OS. */
  port?: number;
  /** Milliseconds added before each append (or delete) is applied. Default: 0. */
  appendLatencyMs?: number;
  /**
   * Largest append, in bytes of `Event.SizeOnDisk` (data + metadata + 2 x type length), summed
   * over the request. Default: 1_048_576 — the server's MaxAppendSize up to 24.x
   * (KurrentDB 25.1 raised its default to the chunk size, 256 MiB).
   */
  maxAppendSize?: number;
  /**
   * Capacity, in events, of the recent-event-id cache behind weak idempotency (appends with
   * `any` / `stream_exists`): a FIFO that a restart empties. Default: bounded like the server's
   * (IndexWriter `_committedEvents`, a BoundedCache limited to ESConsts.CommittedEventsMemCacheLimit
   * = 8 MiB of ~70-byte entries for short stream names, i.e. roughly 100,000 recent events).
   */
  idempotencyCacheSize?: number;
  /**
   * Optional server features. When false, the method is neither advertised by
   * ServerFeatures.GetSupportedMethods nor served (calls get UNIMPLEMENTED).
   * Defaults: both true. `batchAppend: false` makes the client use Streams.Append;
   * `multiStreamAppend: false` makes `client.multiStreamAppend` throw UnsupportedError.
   */
  features?: { batchAppend?: boolean; multiStreamAppend?: boolean };
  /**
   * Who serves AppendSession: `'http2'` (default) parses the gRPC frames off the HTTP/2 stream
   * (`serveAppendSession`); `'grpc-js'` goes through grpc-js's client-stream handling, about
   * 0.1 ms of CPU per stream of a call more. Same checks and answers either way (both are tested).
   */
  appendSessionHandler?: 'http2' | 'grpc-js';
  /**
   * Who serves plain stream reads (Streams.Read on a stream with a count — tail reads) and catch-up
   * subscriptions: `'http2'` (default) off the HTTP/2 stream (`serveStreamRead`), `'grpc-js'`
   * through grpc-js, about twice the CPU per read and per event delivered. Same answers either way
   * (both are tested); $all reads always go through grpc-js.
   */
  streamReadHandler?: 'http2' | 'grpc-js';
  /**
   * Serve TLS (as a real KurrentDB does by default) with this certificate and key (PEM files, for
   * 127.0.0.1); the connection string then names `caFile` (`tls=true&tlsCAFile=…`), the CA that
   * signed it. Default: plain text (`tls=false`).
   */
  tls?: { readonly certFile: string; readonly keyFile: string; readonly caFile: string };
}

export interface StoredEvent {
  readonly id: string;
  readonly type: string;
  readonly revision: bigint;
  readonly data: Uint8Array;
  readonly metadata: Uint8Array;
  readonly contentType: string;
  readonly position: bigint;
}

export interface InMemoryKurrentDB {
  /** `kurrentdb://127.0.0.1:<port>?tls=false` (with `tls`: `?tls=true&tlsCAFile=<caFile>`) */
  readonly connectionString: string;
  readonly port: number;
  /** Stops listening and drops every connection; data is kept. */
  stop(): Promise<void>;
  /** Listens again on the same port; data is kept. */
  start(): Promise<void>;
  /**
   * Like a server process restart: events and stream revisions survive (they are "on disk");
   * what the server only holds in memory is lost — the weak-idempotency cache, open connections
   * and subscriptions. A retried `any` append after a restart therefore duplicates, as it would.
   */
  restart(): Promise<void>;
  /** Stops for good. */
  close(): Promise<void>;
  /**
   * The next `count` writes (appends, deletes) fail with UNAVAILABLE (default), INTERNAL or
   * UNIMPLEMENTED — before anything is written, or with `{ afterWrite: true }` after it (a lost
   * acknowledgement). The client reports the first two as UnavailableError.
   */
  failNextAppends(count: number, kind?: InjectedFailureKind, options?: InjectedFailureOptions): void;
  setAppendLatency(ms: number): void;
  /**
   * The streams of the writes received and not yet applied (waiting out the append latency, or
   * queued behind one), one entry per write and stream. A client killed now still gets these
   * written — what a crash test aims at for "mid-append".
   */
  pendingStreams(): string[];
  /** The same, one entry per write (its streams): how many writes a kill would leave in flight. */
  pendingWrites(): string[][];
  /** Every event of a stream as stored (including those hidden by `$tb`/`$maxCount`), no gRPC. */
  readStreamEvents(stream: string): ReadonlyArray<StoredEvent>;
  /** Names of all streams holding at least one record, including `$$` metadata streams. */
  streamNames(): string[];
  /** Records written in all (every stream, `$$` metadata streams included): a cheap progress measure for tests. */
  recordCount(): number;
}

/**
 * Serves AppendSession (`serveAppendSession`) and plain stream reads (`serveStreamRead`) off the
 * HTTP/2 stream instead of through grpc-js's per-call and per-message machinery; every other call
 * goes to grpc-js as before. Relies on grpc-js keeping its HTTP/2 servers in `http2Servers` and
 * handling them on 'stream' (1.x): when that is not so, grpc-js serves everything — slower, the
 * same answers.
 */
function routeRawCalls(server: grpc.Server, context: ServerContext, routes: { appendSession: boolean; streamRead: RegisterSubscription | null }): void {
  const servers = (server as unknown as { http2Servers?: Map<http2.Http2Server, unknown> }).http2Servers;
  if (!(servers instanceof Map) || (!routes.appendSession && !routes.streamRead)) return;
  for (const h2 of servers.keys()) {
    // Flow-control windows as Kestrel's defaults (KurrentDB's HTTP/2 server): 768 KiB per stream,
    // 1 MiB per connection — grpc-js's 64 KiB made a 450 KB append wait for several window updates.
    if (routes.appendSession) {
      h2.on('session', (session: http2.ServerHttp2Session) => {
        session.settings({ initialWindowSize: 768 * 1024 });
        session.setLocalWindowSize(1024 * 1024);
      });
    }
    const grpcHandlers = h2.listeners('stream') as ((...args: unknown[]) => void)[];
    if (grpcHandlers.length === 0) continue;
    h2.removeAllListeners('stream');
    h2.on('stream', (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, ...rest: unknown[]) => {
      const toGrpc = () => {
        for (const handler of grpcHandlers) handler.call(h2, stream, headers, ...rest);
      };
      const path = headers[':path'];
      if ((path === APPEND_SESSION_PATH && routes.appendSession) || (path === READ_PATH && routes.streamRead)) {
        if (String(headers['content-type'] ?? '').startsWith('application/grpc')) {
          if (path === READ_PATH) serveStreamRead({ store: context.store, registerSubscription: routes.streamRead! }, stream, toGrpc);
          else serveAppendSession(context, stream);
          return;
        }
      }
      toGrpc();
    });
  }
}

/**
 * A listening loopback socket whose connections are handed to the gRPC server. Owning the sockets
 * lets `stop()` drop them the way a crashed process does (the client sees UNAVAILABLE, "connection
 * dropped"), instead of grpc-js's graceful shutdown that cancels calls one by one (CANCELLED).
 */
function listenOn(port: number, injector: grpc.ConnectionInjector): Promise<{ port: number; drop(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const listener = net.createServer((socket) => {
    // No Nagle, as KurrentDB's Kestrel and grpc-js's own listener do: a small response written
    // behind an unacknowledged frame (a WINDOW_UPDATE) would otherwise wait for the client's
    // delayed ACK — ~40 ms per call, measured as the floor of commit → append latency.
    socket.setNoDelay(true);
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    injector.injectConnection(socket);
  });
  return new Promise((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(port, '127.0.0.1', () => {
      listener.off('error', reject);
      resolve({
        port: (listener.address() as net.AddressInfo).port,
        drop: () =>
          new Promise<void>((closed) => {
            for (const socket of sockets) socket.destroy();
            listener.close(() => closed());
          }),
      });
    });
  });
}

export async function startInMemoryKurrentDB(options: InMemoryKurrentDBOptions = {}): Promise<InMemoryKurrentDB> {
  const features = {
    batchAppend: options.features?.batchAppend ?? true,
    multiStreamAppend: options.features?.multiStreamAppend ?? true,
  };
  const store = createEventStore({ idempotencyCacheSize: options.idempotencyCacheSize });
  const writePath = createWritePath(options.appendLatencyMs ?? 0);
  const context: ServerContext = {
    store,
    maxAppendSize: options.maxAppendSize ?? 1_048_576,
    // MaxAppendEventSize defaults to TFConsts.MaxLogRecordSize (16 MiB); never below MaxAppendSize here.
    maxAppendEventSize: Math.max(16 * 1024 * 1024, options.maxAppendSize ?? 0),
    applyWrite: (apply, streams) => writePath.applyWrite(apply, streams),
  };

  // Live subscriptions register here so that stop() can detach them from the store.
  const subscriptions = new Set<() => void>();
  const registerSubscription = (cancel: () => void) => {
    subscriptions.add(cancel);
    return () => subscriptions.delete(cancel);
  };

  let running: { server: grpc.Server; drop(): Promise<void> } | undefined;
  let port = options.port ?? 0;
  let closed = false;

  async function listen(): Promise<void> {
    if (closed) throw new Error('This in-memory KurrentDB was closed');
    if (running) return;
    const server = new grpc.Server({ 'grpc.max_receive_message_length': -1 });
    const streamsService = createStreamsService(context, registerSubscription);
    if (!features.batchAppend) delete streamsService.batchAppend; // grpc-js answers UNIMPLEMENTED
    server.addService(streamsV1ServiceDefinition(streamsGrpc.StreamsService), streamsService);
    server.addService(serverFeaturesGrpc.ServerFeaturesService, createServerFeaturesService(features));
    if (features.multiStreamAppend) server.addService(streamsV2ServiceDefinition(v2StreamsGrpc.StreamsServiceService), createStreamsV2Service(context));
    const credentials = options.tls
      ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: readFileSync(options.tls.certFile), private_key: readFileSync(options.tls.keyFile) }], false)
      : grpc.ServerCredentials.createInsecure();
    const injector = server.createConnectionInjector(credentials);
    routeRawCalls(server, context, {
      appendSession: features.multiStreamAppend && options.appendSessionHandler !== 'grpc-js',
      streamRead: options.streamReadHandler !== 'grpc-js' ? registerSubscription : null,
    });
    const listening = await listenOn(port, injector);
    port = listening.port;
    running = { server, drop: listening.drop };
  }

  async function stop(): Promise<void> {
    for (const cancel of [...subscriptions]) cancel();
    subscriptions.clear();
    const current = running;
    running = undefined;
    if (!current) return;
    // A stopped or crashed server does not say goodbye: its connections just drop.
    await current.drop();
    current.server.forceShutdown();
  }

  await listen();

  return {
    get connectionString() {
      return options.tls ? `kurrentdb://127.0.0.1:${port}?tls=true&tlsCAFile=${options.tls.caFile}` : `kurrentdb://127.0.0.1:${port}?tls=false`;
    },
    get port() {
      return port;
    },
    stop,
    start: listen,
    async restart() {
      await stop();
      store.forgetVolatileState();
      await listen();
    },
    async close() {
      await stop();
      closed = true;
    },
    failNextAppends(count, kind = 'unavailable', failureOptions) {
      writePath.failNext(count, kind, failureOptions);
    },
    setAppendLatency(ms) {
      writePath.setLatency(ms);
    },
    pendingStreams() {
      return writePath.pendingStreams();
    },
    pendingWrites() {
      return writePath.pendingWrites();
    },
    readStreamEvents(stream) {
      return store.streamEvents(stream).map(({ id, type, revision, data, metadata, contentType, position }) => ({
        id,
        type,
        revision,
        data,
        metadata,
        contentType,
        position,
      }));
    },
    streamNames: () => store.streamNames(),
    recordCount: () => store.recordCount(),
  };
}
