/**
 * The KurrentDB appender.
 *
 * Exactly-once per stream rests on three things (DESIGN invariant 3):
 *  1. every append names a *specific* expected revision (or `no_stream`) — never `any`, whose
 *     deduplication is a bounded in-memory cache that a server restart empties;
 *  2. every event carries a receipt (receipt.ts), so the tail of a stream says which unit and
 *     which of its events were applied last. On first touch after a start the sink appends
 *     optimistically with `no_stream` (most streams are new); only when the server says the
 *     stream exists — a wrong expected version, or an idempotent answer (the events were already
 *     there: a replay) — does it read the stream's tail (backwards, one event) to learn its
 *     revision and receipt, and go on from there;
 *  3. event ids are deterministic, so a retry whose earlier attempt did land is answered by the
 *     server's strong idempotency check (same ids at the same revisions) instead of duplicating.
 *
 * A wrong-expected-version is either explained by the receipt (an earlier attempt of ours
 * landed: skip what is there, continue after it) or it is another writer: stop, loudly.
 */
import { z } from 'zod';
import { BACKWARDS, END, KurrentDBClient, NO_STREAM, type AppendStreamRequest } from '@kurrent/kurrentdb-client';
import v2StreamsGrpc from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v2/streams/streams_grpc_pb.js';
import { canonicalLsn, isLsn } from '../source/position.js';
import { prepareEvent, splitBySize, unitReceiptPart, uuidv5, type PreparedEvent } from './encoding.js';
import { createH2AppendTransport, isInsecureConnectionString } from './h2-append.js';
import { readerConnectionString } from './reader-connection.js';
import { appendEncoded, supportsEncodedAppend, type EncodedStreamAppend } from './v2-append.js';
import { OversizedEventError, SinkError, StreamConflictError, type StreamConflictDetails } from './errors.js';
import type { AppendOutcome, KurrentDBSink, SinkBatch, SinkEvent, SinkMode, SinkPosition, SinkStatus, StreamAppendOutcome } from './index.js';
import { compareReceipts, compareUnits, receiptsComparable, receiptToMetadata, receiptFromMetadata, type Receipt, type ReceiptUnit } from './receipt.js';
import { backoffDelay, DEFAULT_RETRY, isTransientError, type RetryPolicy } from './retry.js';

export const DEFAULT_TIMEOUT_MS = 30_000;

/** KurrentDB's default `MaxAppendSize` (1 MiB). */
export const DEFAULT_MAX_APPEND_SIZE = 1_048_576;

/** The sink logs through this; any structured logger adapts in two lines. */
export interface SinkLogger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
}

/** Instrumentation points (tests use them to simulate a crash between two appends). */
export interface SinkHooks {
  /** Called before each append request is sent (not before its retries). Throwing aborts the call. */
  beforeAppend?(request: { readonly streams: readonly string[]; readonly events: number; readonly mode: SinkMode }): void | Promise<void>;
}

export interface KurrentDBSinkOptions {
  /** KurrentDB connection string, e.g. `kurrentdb://localhost:2113?tls=false`. */
  readonly connectionString: string;
  /** The assembler's name: stamped in every receipt (one assembler owns its streams) and names the checkpoint stream. */
  readonly assembler: string;
  /**
   * `auto` uses multi-stream append when the server advertises it (KurrentDB 25.1+), else
   * per-stream appends; `multi-stream` fails at start-up when the server lacks it.
   * @default 'auto'
   */
  readonly mode?: 'auto' | 'multi-stream' | 'per-stream';
  /** The server's `MaxAppendSize` in bytes (`Event.SizeOnDisk` summed over one append). @default 1048576 */
  readonly maxAppendSize?: number;
  /** Backoff for destination outages. @default { initialDelayMs: 100, maxDelayMs: 5000 } with unlimited attempts */
  readonly retry?: Partial<RetryPolicy>;
  /**
   * Stream of the assembler's own checkpoint events, appended with (multi-stream) or after
   * (per-stream) each unit's events. `false` turns them off.
   * @default `event-assembler.checkpoint-<assembler>`
   */
  readonly checkpointStream?: string | false;
  /**
   * Longest wait for one call before it counts as failed and is retried. The client's BatchAppend
   * (its per-stream append path) sets no client-side deadline — it relies on the server honouring
   * the deadline sent in the request — so without this a hung server would hang the pipeline.
   * A timed-out write may still land; the retry is then answered by idempotency or the receipt.
   * @default 30000
   */
  readonly timeoutMs?: number;
  /**
   * Streams whose revision and receipt stay cached (least recently used are forgotten; their next
   * touch is a first touch again — correct, only slower when the stream exists).
   * @default 100000
   */
  readonly maxCachedStreams?: number;
  /** @default silent */
  readonly logger?: SinkLogger;
  readonly hooks?: SinkHooks;
}

export function checkpointStreamName(assembler: string): string {
  return `event-assembler.checkpoint-${assembler}`;
}

/** Type name of the sink's checkpoint events. */
export const CHECKPOINT_EVENT_TYPE = 'CheckpointRecorded';

const OptionsSchema = z.object({
  connectionString: z.string().min(1, 'give the KurrentDB connection string, e.g. kurrentdb://localhost:2113?tls=false'),
  assembler: z.string().regex(/^[A-Za-z0-9_.-]+$/, 'use letters, digits, "_", "." or "-" (it names a stream and is stamped in receipts)'),
  mode: z.enum(['auto', 'multi-stream', 'per-stream']).optional(),
  maxAppendSize: z.number().int().positive('give the server\'s MaxAppendSize in bytes').optional(),
  retry: z
    .object({
      initialDelayMs: z.number().int().positive().optional(),
      maxDelayMs: z.number().int().positive().optional(),
      maxAttempts: z.number().int().positive().optional(),
    })
    .optional(),
  checkpointStream: z.union([z.string().min(1), z.literal(false)]).optional(),
  timeoutMs: z.number().int().positive().optional(),
  maxCachedStreams: z.number().int().positive().optional(),
});

interface SinkConfig {
  readonly connectionString: string;
  readonly assembler: string;
  readonly mode: 'auto' | 'multi-stream' | 'per-stream';
  readonly maxAppendSize: number;
  readonly retry: RetryPolicy;
  readonly checkpointStream: string | null;
  readonly timeoutMs: number;
  readonly maxCachedStreams: number;
}

function parseOptions(options: KurrentDBSinkOptions): SinkConfig {
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(options)'}: ${issue.message}`);
    throw new SinkError('SINK_INVALID_CONFIG', `invalid KurrentDB sink options — ${problems.join('; ')}`, { problems });
  }
  const o = parsed.data;
  const retry: RetryPolicy = {
    initialDelayMs: o.retry?.initialDelayMs ?? DEFAULT_RETRY.initialDelayMs,
    maxDelayMs: o.retry?.maxDelayMs ?? DEFAULT_RETRY.maxDelayMs,
    ...(o.retry?.maxAttempts !== undefined ? { maxAttempts: o.retry.maxAttempts } : {}),
  };
  if (retry.maxDelayMs < retry.initialDelayMs) {
    throw new SinkError('SINK_INVALID_CONFIG', 'invalid KurrentDB sink options — retry.maxDelayMs: must be at least retry.initialDelayMs', { field: 'retry.maxDelayMs' });
  }
  return {
    connectionString: o.connectionString,
    assembler: o.assembler,
    mode: o.mode ?? 'auto',
    maxAppendSize: o.maxAppendSize ?? DEFAULT_MAX_APPEND_SIZE,
    retry,
    checkpointStream: o.checkpointStream === false ? null : (o.checkpointStream ?? checkpointStreamName(o.assembler)),
    timeoutMs: o.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    maxCachedStreams: o.maxCachedStreams ?? 100_000,
  };
}

type Revision = bigint | typeof NO_STREAM;

/** What the sink knows of one stream: its revision and the receipt at its tail. */
interface StreamState {
  readonly revision: Revision;
  readonly receipt: Receipt | null;
  readonly tail: { readonly id: string; readonly type: string; readonly revision: bigint } | null;
}

const EMPTY_STREAM: StreamState = { revision: NO_STREAM, receipt: null, tail: null };

/**
 * A stream touched for the first time in this process, its tail not read: assumed new, so the
 * append goes out optimistically with `no_stream`. Never cached; compared by identity.
 */
const ASSUMED_NEW: StreamState = { revision: NO_STREAM, receipt: null, tail: null };

/** Stream states, least recently used first (a Map keeps insertion order). */
function createStreamCache(capacity: number, onEvict: () => void = () => undefined) {
  const entries = new Map<string, StreamState>();
  return {
    get(stream: string): StreamState | undefined {
      const state = entries.get(stream);
      if (state) {
        entries.delete(stream);
        entries.set(stream, state);
      }
      return state;
    },
    set(stream: string, state: StreamState): void {
      entries.delete(stream);
      entries.set(stream, state);
      if (entries.size > capacity) {
        entries.delete(entries.keys().next().value!);
        onEvict();
      }
    },
    delete(stream: string): void {
      entries.delete(stream);
    },
    clear(): void {
      entries.clear();
    },
    get size(): number {
      return entries.size;
    },
  };
}

/** One stream's share of a unit. */
interface Group {
  readonly stream: string;
  readonly events: readonly PreparedEvent[];
}

/** Per-stream mode: streams of one call appended at the same time. */
const PER_STREAM_CONCURRENCY = 16;

/** Re-plans after explained conflicts before giving up (each one means an earlier attempt landed). */
const MAX_ROUNDS = 8;

const silentLogger: SinkLogger = { info() {}, warn() {} };

function errorType(error: unknown): string | undefined {
  const type = (error as { type?: unknown } | null)?.type;
  return typeof type === 'string' ? type : undefined;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function revisionText(revision: Revision | bigint | string | undefined | null): string {
  if (revision === undefined || revision === null) return 'unknown';
  return typeof revision === 'bigint' ? revision.toString() : revision;
}

/** Rejects with a retryable `deadline-exceeded` error when `promise` takes longer than `ms`. */
function withTimeout<T>(promise: Promise<T>, ms: number, operation: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`${operation} got no answer within ${ms} ms`), { type: 'deadline-exceeded' })), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

function jsonSafe(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)));
}

/**
 * Whether the client's cached server features list the v2 `AppendSession` (multi-stream append).
 * The client asks `ServerFeatures.GetSupportedMethods` once per connection and checks the same
 * list before its own `multiStreamAppend`; its `supports` is `protected` in the typings but a
 * public field at run time, so this reads the very answer the client will act on.
 */
async function serverSupportsMultiStreamAppend(client: KurrentDBClient): Promise<boolean | 'unknown'> {
  const supports = (client as unknown as { supports?: (method: { path: string }) => Promise<boolean> }).supports;
  if (typeof supports !== 'function') return 'unknown';
  return supports(v2StreamsGrpc.StreamsServiceService.appendSession);
}

/**
 * Connects, detects whether the server serves multi-stream append, logs the mode and returns the
 * sink. Waits out an unavailable server like any other call (retry policy).
 */
export async function createKurrentDBSink(options: KurrentDBSinkOptions): Promise<KurrentDBSink> {
  const config = parseOptions(options);
  const logger = options.logger ?? silentLogger;
  const hooks = options.hooks ?? {};
  // Appends go through grpc-js (`client`); reads go through the client's native bridge. A bridge
  // whose first connection attempt failed keeps answering UNAVAILABLE after the server is back
  // (seen with client 1.3.1), so tail reads use their own client, replaced after a failed read.
  const client = KurrentDBClient.connectionString(config.connectionString);
  /** Multi-stream appends with records encoded once, by hand (v2-append.ts); else the client's own. */
  const encoded = supportsEncodedAppend(client);
  /** On plain-text connections the encoded requests go as one HTTP/2 write per call (h2-append.ts). */
  const h2 = encoded && isInsecureConnectionString(config.connectionString) ? createH2AppendTransport(client) : null;
  const appendTransport = h2 ? 'http2 (one write per call)' : encoded ? 'grpc-js (encoded records)' : 'grpc-js (client)';
  const sendEncoded = (requests: readonly EncodedStreamAppend[]) => (h2 ? h2.append(requests) : appendEncoded(client, requests));
  let reader = KurrentDBClient.connectionString(readerConnectionString(config.connectionString));
  let readerSuspect = false;
  // Optimistic first touch (no tail read): a stream not in the cache is appended to with
  // `no_stream`. Success means the stream was new — or the server's strong idempotency found these
  // very events at revisions 0..n (a replay), and then the stream may go on after them. The answer
  // alone does not tell the two apart (both give revision n), its log position does: an idempotent
  // answer carries the original write's position, at or below the log's head read before our first
  // optimistic append; a fresh write lands above it. Idempotent (or position-less) answers are
  // followed by a tail read. A wrong expected version means the stream exists: read its tail and
  // apply the receipts, as a first touch always did.
  let logHead: bigint | null | undefined; // undefined: not read yet; null: unavailable (tails are read first)
  let logHeadRead: Promise<bigint | null> | undefined;
  let highestSeen = -1n; // highest log position our appends were answered with
  const streams = createStreamCache(config.maxCachedStreams, () => {
    // A forgotten stream may be one we wrote in this process: idempotent answers up to what we
    // have seen must read the tail too.
    if (typeof logHead === 'bigint' && highestSeen > logHead) logHead = highestSeen;
  });
  /** Streams whose state was dropped (a failure, `forget()`): their next touch reads the tail first. */
  const mustRead = new Set<string>();
  const closing = new AbortController();
  let closed = false;
  let limit = config.maxAppendSize;
  let mode: SinkMode = 'per-stream';
  let queue: Promise<unknown> = Promise.resolve();
  /** `appendMany` calls in progress (they run concurrently, on disjoint streams). */
  const inFlightMany = new Set<Promise<unknown>>();
  const stats = {
    state: 'connected' as SinkStatus['state'],
    attempts: 0,
    retries: 0,
    lastError: null as SinkStatus['lastError'],
    appendedEvents: 0,
    skippedEvents: 0,
    tailReads: 0,
    logHeadReads: 0,
  };

  const closedError = (cause?: unknown): SinkError =>
    new SinkError('SINK_CLOSED', 'the KurrentDB sink was closed while a call was in progress; nothing after the last acknowledged unit is known to be durable', {}, { cause });

  /** Runs one client call, waiting out destination outages with backoff. Everything else is thrown as is. */
  async function retrying<T>(operation: string, details: Record<string, unknown>, call: () => Promise<T>): Promise<T> {
    let attempt = 0;
    for (;;) {
      if (closed) throw closedError();
      try {
        const result = await withTimeout(call(), config.timeoutMs, operation);
        if (attempt > 0) logger.info('kurrentdb sink: destination answered again', { operation, failedAttempts: attempt, ...details });
        stats.attempts = 0;
        stats.state = 'connected';
        return result;
      } catch (error) {
        if (closed) throw closedError(error);
        if (!isTransientError(error)) throw error;
        attempt += 1;
        stats.attempts = attempt;
        stats.retries += 1;
        stats.state = 'retrying';
        const code = (error as { code?: unknown }).code;
        stats.lastError = { message: errorMessage(error), code: errorType(error) ?? (code === undefined ? null : String(code)), at: new Date() };
        if (config.retry.maxAttempts !== undefined && attempt >= config.retry.maxAttempts) {
          stats.state = 'connected';
          throw new SinkError(
            'SINK_RETRIES_EXHAUSTED',
            `KurrentDB stayed unavailable for ${operation} after ${attempt} attempt(s): ${errorMessage(error)}`,
            { operation, attempts: attempt, ...details },
            { cause: error },
          );
        }
        const delayMs = backoffDelay(config.retry, attempt);
        logger.warn('kurrentdb sink: destination unavailable, retrying', { operation, attempt, delayMs, error: errorMessage(error), ...details });
        await sleep(delayMs, closing.signal);
      }
    }
  }

  /** The reader for the next read: a fresh one when the last read saw the bridge unavailable. */
  function currentReader(): KurrentDBClient {
    if (readerSuspect) {
      const previous = reader;
      reader = KurrentDBClient.connectionString(readerConnectionString(config.connectionString));
      readerSuspect = false;
      void previous.dispose().catch(() => undefined);
    }
    return reader;
  }

  /**
   * The log's head (commit position of its last record), read once before the first optimistic
   * append. `null` when it cannot be read (e.g. no permission to read `$all`): then every first
   * touch reads the stream's tail first, as before.
   */
  function optimisticHead(): Promise<bigint | null> {
    logHeadRead ??= (async () => {
      stats.logHeadReads += 1;
      try {
        logHead = await retrying('read-tail', { stream: '$all' }, async () => {
          try {
            for await (const resolved of currentReader().readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1 })) {
              const position = resolved.event?.position?.commit ?? resolved.commitPosition;
              if (position !== undefined) return position;
            }
            return -1n;
          } catch (error) {
            if (errorType(error) === 'unavailable') readerSuspect = true;
            throw error;
          }
        });
      } catch (error) {
        if (error instanceof SinkError) throw error; // closed, or retries exhausted: try again next call
        logger.warn('kurrentdb sink: cannot read the log head ($all); each stream\'s tail is read on first touch instead (slower)', { error: errorMessage(error) });
        logHead = null;
      }
      return logHead;
    })().catch((error: unknown) => {
      logHeadRead = undefined;
      throw error;
    });
    return logHeadRead;
  }

  /** Notes an append's answered position; says whether it was a fresh write, an idempotent answer, or cannot tell. */
  function classify(position: bigint | undefined): 'fresh' | 'idempotent' | 'unknown' {
    if (position === undefined || position < 0n) return 'unknown';
    const head = logHead;
    const answer = typeof head !== 'bigint' ? 'unknown' : position > head ? 'fresh' : 'idempotent';
    if (position > highestSeen) highestSeen = position;
    return answer;
  }

  /** Reads a stream's last event: its revision and receipt. */
  async function readTail(stream: string): Promise<StreamState> {
    stats.tailReads += 1;
    return retrying('read-tail', { stream }, async () => {
      const reader = currentReader();
      try {
        for await (const resolved of reader.readStream(stream, { direction: BACKWARDS, fromRevision: END, maxCount: 1 })) {
          const event = resolved.event;
          if (!event) continue;
          return {
            revision: event.revision,
            receipt: receiptFromMetadata(event.metadata),
            tail: { id: event.id, type: event.type, revision: event.revision },
          };
        }
        return EMPTY_STREAM;
      } catch (error) {
        if (errorType(error) === 'stream-not-found') return EMPTY_STREAM;
        if (errorType(error) === 'stream-deleted') throw deletedError(stream, error);
        // Only the bridge's own UNAVAILABLE: a slow first read (it connects lazily) just times out.
        if (errorType(error) === 'unavailable') readerSuspect = true;
        throw error;
      }
    });
  }

  /** What is known of a stream: cached, or `ASSUMED_NEW` on an optimistic first touch, or its tail read now. */
  async function stateOf(stream: string): Promise<StreamState> {
    const cached = streams.get(stream);
    if (cached) return cached;
    if (!mustRead.has(stream) && (await optimisticHead()) !== null) return ASSUMED_NEW;
    return refresh(stream);
  }

  /** Reads the stream's tail and caches it. */
  async function refresh(stream: string): Promise<StreamState> {
    streams.delete(stream);
    const state = await readTail(stream);
    mustRead.delete(stream);
    streams.set(stream, state);
    return state;
  }

  /** Forgets a stream's state after a failure: its next touch reads the tail (did a write land?). */
  function drop(stream: string): void {
    streams.delete(stream);
    mustRead.delete(stream);
    mustRead.add(stream);
    if (mustRead.size > config.maxCachedStreams) mustRead.delete(mustRead.values().next().value!);
  }

  function deletedError(stream: string, cause: unknown): SinkError {
    return new SinkError('SINK_STREAM_DELETED', `stream "${stream}" is deleted or tombstoned in KurrentDB; the assembler will not recreate it silently`, { stream }, { cause });
  }

  function conflictError(
    stream: string,
    reason: StreamConflictDetails['reason'],
    expected: string,
    state: StreamState,
    ours: Receipt | null,
    cause?: unknown,
  ): StreamConflictError {
    drop(stream);
    return new StreamConflictError(
      {
        stream,
        expected,
        actual: revisionText(state.revision),
        ours: ours ? receiptToMetadata(ours) : null,
        theirs: state.receipt ? receiptToMetadata(state.receipt) : null,
        tailEvent: state.tail ? { id: state.tail.id, type: state.tail.type, revision: state.tail.revision.toString() } : null,
        reason,
      },
      cause === undefined ? undefined : { cause },
    );
  }

  /**
   * The events of `group` the stream's receipt does not show as applied. A group may hold several
   * units' events (a batch): each event is compared by its own receipt (unit, then ordinal).
   */
  function remaining(group: Group, state: StreamState): PreparedEvent[] {
    if (state.revision === NO_STREAM || group.events.length === 0) return [...group.events];
    const theirs = state.receipt;
    const first = group.events[0]!.receipt;
    if (!theirs || theirs.assembler !== first.assembler) {
      throw conflictError(group.stream, 'foreign-tail', `a tail written by assembler "${first.assembler}"`, state, first);
    }
    if (!receiptsComparable(theirs, first)) {
      throw conflictError(group.stream, 'receipt-from-other-source', `a receipt from source ${first.source ?? '?'}`, state, first);
    }
    return group.events.filter((event) => compareReceipts(event.receipt, theirs) > 0);
  }

  /**
   * After a wrong-expected-version: re-read the tail. If its receipt is ours and at or past the
   * first event we tried, an earlier attempt landed — the caller re-plans. Otherwise: another writer.
   */
  async function explainConflict(stream: string, expected: Revision, first: Receipt, cause: unknown): Promise<void> {
    const fresh = await refresh(stream);
    const theirs = fresh.receipt;
    if (theirs && receiptsComparable(theirs, first) && compareReceipts(theirs, first) >= 0) {
      logger.info('kurrentdb sink: an earlier attempt had landed; continuing after its receipt', {
        stream,
        expected: revisionText(expected),
        actual: revisionText(fresh.revision),
      });
      return;
    }
    const reason = !theirs || theirs.assembler !== first.assembler ? 'foreign-tail' : receiptsComparable(theirs, first) ? 'unexplained-revision' : 'receipt-from-other-source';
    throw conflictError(stream, reason, revisionText(expected), fresh, first, cause);
  }

  function oversized(event: PreparedEvent, size: number, max: number): OversizedEventError {
    return new OversizedEventError({ stream: event.stream, type: event.type, eventId: event.id, size, limit: max });
  }

  function learnServerLimit(serverLimit: unknown): void {
    if (typeof serverLimit === 'number' && serverLimit > 0 && serverLimit < limit) {
      logger.warn('kurrentdb sink: the server\'s max append size is smaller than configured; using the server\'s', { configured: limit, server: serverLimit });
      limit = serverLimit;
    }
  }

  /** Per-stream: the group's remaining events in appends of at most `limit` bytes, each at a specific revision. */
  async function appendPerStream(group: Group, appended: Set<string>): Promise<void> {
    const { stream } = group;
    // After an optimistic first attempt met an existing stream, the next request re-sends it at
    // the right revision: a retry of the same request, so the hook is not called again.
    let resend = false;
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const todo = remaining(group, await stateOf(stream));
      if (todo.length === 0) return;
      const parts = splitBySize(todo, limit, (event) => event.size);
      let replan = false;
      while (parts.length > 0 && !replan) {
        const part = parts.shift()!;
        const state = await stateOf(stream);
        const optimistic = state === ASSUMED_NEW;
        const expected = state.revision;
        if (!resend) await hooks.beforeAppend?.({ streams: [stream], events: part.length, mode: 'per-stream' });
        resend = false;
        try {
          const result = await retrying('append', { stream, events: part.length, expectedRevision: revisionText(expected) }, () =>
            client.appendToStream(
              stream,
              part.map((event) => event.eventData),
              { streamState: expected },
            ),
          );
          const answer = classify(result.position?.commit);
          if (optimistic && answer !== 'fresh') {
            // The stream existed and began with these very events (or we cannot tell): nothing was
            // duplicated, but the stream may go on after them — learn its tail and re-plan.
            if (answer === 'unknown') for (const event of part) appended.add(event.id);
            await refresh(stream);
            replan = true;
          } else {
            const last = part[part.length - 1]!;
            streams.set(stream, { revision: result.nextExpectedRevision, receipt: last.receipt, tail: { id: last.id, type: last.type, revision: result.nextExpectedRevision } });
            for (const event of part) appended.add(event.id);
          }
        } catch (error) {
          const type = errorType(error);
          if (type === 'wrong-expected-version') {
            if (optimistic) {
              // Not a new stream: nothing was written; read its tail and apply the receipts.
              await refresh(stream);
              resend = true;
            } else {
              await explainConflict(stream, expected, part[0]!.receipt, error);
            }
            replan = true;
          } else if (type === 'maximum-append-size-exceeded') {
            const serverLimit = (error as { maxAppendSize?: unknown }).maxAppendSize;
            const before = limit;
            learnServerLimit(serverLimit);
            if (part.length === 1) throw oversized(part[0]!, part[0]!.size, typeof serverLimit === 'number' ? serverLimit : limit);
            if (limit < before) {
              // The server's limit is smaller than configured: re-cut this part by it.
              parts.unshift(...splitBySize(part, limit, (event) => event.size));
            } else {
              // Our measure and the server's disagree: halve and go on (revisions continue part by part).
              const half = Math.ceil(part.length / 2);
              parts.unshift(part.slice(0, half), part.slice(half));
            }
          } else {
            drop(stream); // did it land? the next call re-reads the tail
            if (type === 'stream-deleted' || type === 'stream-tombstoned') throw deletedError(stream, error);
            throw error;
          }
        }
      }
      if (!replan) return;
    }
    throw new SinkError('SINK_APPEND_FAILED', `stream "${stream}" kept changing under the sink (${MAX_ROUNDS} re-plans)`, { stream });
  }

  /** Cuts the streams' remaining events into multi-stream appends of at most `max` bytes, in order. */
  function chunkAcrossStreams(plans: readonly Group[], max: number): Group[][] {
    const chunks: Group[][] = [];
    let chunk: Group[] = [];
    let size = 0;
    for (const plan of plans) {
      let part: PreparedEvent[] = [];
      for (const event of plan.events) {
        if (size + event.multiStreamSize > max && (chunk.length > 0 || part.length > 0)) {
          if (part.length > 0) chunk.push({ stream: plan.stream, events: part });
          chunks.push(chunk);
          chunk = [];
          part = [];
          size = 0;
        }
        part.push(event);
        size += event.multiStreamSize;
      }
      if (part.length > 0) chunk.push({ stream: plan.stream, events: part });
    }
    if (chunk.length > 0) chunks.push(chunk);
    return chunks;
  }

  /**
   * Multi-stream: the unit's events across all streams, checkpoint included, in one atomic call
   * (several only when the unit exceeds the max append size). Returns `null` when the server
   * turned out not to serve multi-stream append (mode `auto` then falls back to per-stream).
   */
  /**
   * Cuts a call's remaining events into multi-stream appends of at most `max` bytes at unit
   * boundaries: consecutive whole units per append, so each source transaction still lands
   * atomically; only a unit larger than `max` on its own is cut inside (chunkAcrossStreams), as
   * a single unit always was. Units are in call order, so every stream keeps its order.
   */
  function chunkByUnits(plans: readonly Group[], max: number, unitOf: ReadonlyMap<PreparedEvent, number>): { chunks: Group[][]; splitUnits: number } {
    const sizes = new Map<number, number>();
    for (const plan of plans) {
      for (const event of plan.events) {
        const unit = unitOf.get(event)!;
        sizes.set(unit, (sizes.get(unit) ?? 0) + event.multiStreamSize);
      }
    }
    const order = [...sizes.keys()].sort((a, b) => a - b);
    const ranges: { from: number; to: number }[] = [];
    let current: { from: number; to: number } | null = null;
    let size = 0;
    for (const unit of order) {
      const unitSize = sizes.get(unit)!;
      if (current && size + unitSize <= max) {
        current.to = unit;
        size += unitSize;
      } else {
        current = { from: unit, to: unit };
        ranges.push(current);
        size = unitSize;
      }
    }
    const chunks: Group[][] = [];
    let splitUnits = 0;
    for (const range of ranges) {
      const part: Group[] = [];
      for (const plan of plans) {
        const events = plan.events.filter((event) => {
          const unit = unitOf.get(event)!;
          return unit >= range.from && unit <= range.to;
        });
        if (events.length > 0) part.push({ stream: plan.stream, events });
      }
      const pieces = chunkAcrossStreams(part, max);
      if (pieces.length > 1) splitUnits += 1;
      chunks.push(...pieces);
    }
    return { chunks, splitUnits };
  }

  async function appendMultiStream(label: string, groups: readonly Group[], appended: Set<string>, unitOf: ReadonlyMap<PreparedEvent, number>): Promise<boolean> {
    let callLimit = limit;
    let resend = false; // as in appendPerStream: re-sending after an optimistic first attempt is a retry
    for (let round = 0; round < MAX_ROUNDS; round++) {
      // Tails that must be read are read in parallel; optimistic first touches read none.
      const states = await Promise.all(groups.map((group) => stateOf(group.stream)));
      const plans: Group[] = [];
      groups.forEach((group, i) => {
        const todo = remaining(group, states[i]!);
        if (todo.length > 0) plans.push({ stream: group.stream, events: todo });
      });
      if (plans.length === 0) return true;
      const { chunks, splitUnits } = chunkByUnits(plans, Math.min(callLimit, limit), unitOf);
      if (splitUnits > 0) {
        logger.warn('kurrentdb sink: unit exceeds the max append size; it is appended in several multi-stream appends (each atomic, the unit not)', {
          unit: label,
          appends: chunks.length,
          maxAppendSize: Math.min(callLimit, limit),
        });
      }
      let replan = false;
      for (const chunk of chunks) {
        const requests: { streamName: string; expectedState: Revision; events: readonly PreparedEvent[] }[] = [];
        const optimistic = new Set<string>();
        for (const plan of chunk) {
          const state = await stateOf(plan.stream);
          if (state === ASSUMED_NEW) optimistic.add(plan.stream);
          requests.push({ streamName: plan.stream, events: plan.events, expectedState: state.revision });
        }
        const eventCount = chunk.reduce((n, plan) => n + plan.events.length, 0);
        if (!resend) await hooks.beforeAppend?.({ streams: chunk.map((plan) => plan.stream), events: eventCount, mode: 'multi-stream' });
        resend = false;
        try {
          const result = await retrying('multi-stream-append', { streams: chunk.map((plan) => plan.stream), events: eventCount }, () =>
            encoded
              ? sendEncoded(requests.map((r) => ({ streamName: r.streamName, expectedState: r.expectedState, records: r.events.map((event) => event.record) })))
              : client.multiStreamAppend(requests.map((r): AppendStreamRequest => ({ streamName: r.streamName, expectedState: r.expectedState, events: r.events.map((event) => event.eventData) }))),
          );
          const answer = classify(result.position);
          const revisions = new Map(result.responses.map((response) => [response.streamName, response.revision]));
          for (const plan of chunk) {
            if (optimistic.has(plan.stream) && answer !== 'fresh') {
              // Idempotent (every stream of the call, or it would have failed) or cannot tell:
              // these streams existed with these events and may go on after them — tails below.
              if (answer === 'unknown') for (const event of plan.events) appended.add(event.id);
              continue;
            }
            const revision = revisions.get(plan.stream);
            const last = plan.events[plan.events.length - 1]!;
            if (revision === undefined) drop(plan.stream);
            else streams.set(plan.stream, { revision, receipt: last.receipt, tail: { id: last.id, type: last.type, revision } });
            for (const event of plan.events) appended.add(event.id);
          }
          if (optimistic.size > 0 && answer !== 'fresh') {
            await Promise.all([...optimistic].map((stream) => refresh(stream)));
            replan = true;
            break;
          }
        } catch (error) {
          // The call is atomic: either all of it landed or none; the receipts will tell.
          const type = errorType(error);
          const grpcCode = (error as { code?: unknown }).code;
          if (type === 'wrong-expected-version') {
            // Nothing was written. The error names one failing stream; first-touch streams of this
            // call may exist too: read all their tails at once, and explain a known stream's conflict.
            const conflicted = (error as { streamName?: unknown }).streamName;
            const found = chunk.findIndex((plan) => plan.stream === conflicted);
            const index = found >= 0 ? found : optimistic.size > 0 ? -1 : 0;
            const named = index >= 0 && !optimistic.has(chunk[index]!.stream) ? index : -1;
            await Promise.all([
              ...[...optimistic].map((stream) => refresh(stream)),
              ...(named >= 0 ? [explainConflict(chunk[named]!.stream, requests[named]!.expectedState as Revision, chunk[named]!.events[0]!.receipt, error)] : []),
            ]);
            resend = named < 0;
            replan = true;
            break;
          }
          for (const plan of chunk) drop(plan.stream);
          if (type === 'unsupported' || grpcCode === 12 /* UNIMPLEMENTED */) {
            if (config.mode === 'multi-stream') {
              throw new SinkError('SINK_MULTI_STREAM_UNSUPPORTED', 'the server no longer serves multi-stream append (mode "multi-stream" was required)', {}, { cause: error });
            }
            logger.warn('kurrentdb sink: the server does not serve multi-stream append; switching to per-stream appends', { error: errorMessage(error) });
            mode = 'per-stream';
            return false;
          }
          if (type === 'append-record-size-exceeded') {
            const e = error as { stream?: string; recordId?: string; size?: number; maxSize?: number };
            const event = chunk.flatMap((plan) => plan.events).find((candidate) => candidate.id === e.recordId) ?? chunk[0]!.events[0]!;
            throw oversized(event, e.size ?? event.multiStreamSize, e.maxSize ?? limit);
          }
          if (type === 'transaction-max-size-exceeded' || type === 'maximum-append-size-exceeded') {
            const serverLimit = (error as { maxSize?: unknown; maxAppendSize?: unknown }).maxSize ?? (error as { maxAppendSize?: unknown }).maxAppendSize;
            const before = limit;
            learnServerLimit(serverLimit);
            const only = chunk.length === 1 && chunk[0]!.events.length === 1 ? chunk[0]!.events[0]! : null;
            if (only) throw oversized(only, only.multiStreamSize, typeof serverLimit === 'number' ? serverLimit : limit);
            if (limit >= before) {
              // Our measure and the server's disagree: halve the chunk size for this unit.
              const chunkSize = chunk.reduce((n, plan) => n + plan.events.reduce((m, event) => m + event.multiStreamSize, 0), 0);
              callLimit = Math.max(1, Math.floor(chunkSize / 2));
            }
            replan = true;
            break;
          }
          if (type === 'stream-deleted' || type === 'stream-tombstoned') {
            const stream = (error as { streamName?: string; stream?: string }).streamName ?? (error as { stream?: string }).stream ?? chunk[0]!.stream;
            throw deletedError(stream, error);
          }
          throw error;
        }
      }
      if (!replan) return true;
    }
    throw new SinkError('SINK_APPEND_FAILED', `streams of ${label} kept changing under the sink (${MAX_ROUNDS} re-plans)`, { unit: label });
  }

  function describe(unit: ReceiptUnit): string {
    return unit.kind === 'transaction' ? `transaction ${unit.commitLsn}/${unit.xid}` : `snapshot record ${unit.generation}#${unit.sequence}`;
  }

  function unitOf(position: SinkPosition): ReceiptUnit {
    const invalid = (why: string): SinkError => new SinkError('SINK_INVALID_POSITION', `batch position ${why}`, { position: jsonSafe(position) });
    const source = position.systemId === undefined ? {} : { source: position.systemId };
    if (position.kind === 'snapshot') {
      if (!isLsn(position.lsn)) throw invalid(`has an lsn that is not a PostgreSQL LSN: ${JSON.stringify(position.lsn)}`);
      if (!Number.isSafeInteger(position.sequence) || position.sequence < 0) throw invalid('needs a non-negative integer sequence');
      return {
        kind: 'snapshot',
        assembler: config.assembler,
        ...source,
        lsn: canonicalLsn(position.lsn),
        generation: position.snapshotGeneration,
        sequence: position.sequence,
        table: position.table,
        key: position.key,
      };
    }
    if (typeof position.commitLsn !== 'string' || !isLsn(position.commitLsn)) throw invalid(`has a commitLsn that is not a PostgreSQL LSN: ${JSON.stringify(position.commitLsn)}`);
    if (!Number.isInteger(position.xid) || position.xid < 0) throw invalid('needs a non-negative integer xid');
    return { kind: 'transaction', assembler: config.assembler, ...source, commitLsn: canonicalLsn(position.commitLsn), xid: position.xid };
  }

  function checkpointEvent(stream: string, position: SinkPosition, unit: ReceiptUnit): PreparedEvent {
    const unitKey = unit.kind === 'transaction' ? ['transaction', unit.source ?? '', unit.commitLsn, unit.xid] : ['snapshot', unit.source ?? '', unit.generation, unit.sequence];
    const event: SinkEvent = {
      id: uuidv5(JSON.stringify(['checkpoint', config.assembler, ...unitKey])),
      stream,
      type: CHECKPOINT_EVENT_TYPE,
      data: { assembler: config.assembler, position: jsonSafe(position) },
      metadata: {
        contract: `${CHECKPOINT_EVENT_TYPE}@1`,
        ...(position.checkpoint !== undefined ? { 'source.checkpoint': position.checkpoint } : {}),
      },
    };
    return prepareEvent(event, unit, 0, 1);
  }

  /**
   * Appends several units' events in one go (group commit): the units' events are merged per
   * stream, in unit order, each event with its own receipt; in multi-stream mode all streams go in
   * one atomic call (several when the max append size requires), in per-stream mode the streams are
   * appended concurrently, each in order. Resolves with one outcome per unit, in order.
   */
  async function appendUnits(batches: readonly SinkBatch[]): Promise<AppendOutcome[]> {
    if (closed) throw closedError();
    const units = batches.map((batch) => unitOf(batch.position));
    const label = units.length === 1 ? describe(units[0]!) : `${units.length} units, ${describe(units[0]!)} … ${describe(units[units.length - 1]!)}`;

    // Group by stream in order of first appearance; ordinals count within a unit's share of a stream.
    const byStream = new Map<string, PreparedEvent[]>();
    /** Event id → the unit (index) that brought it. */
    const ids = new Map<string, number>();
    /** Prepared event → its unit's index in the call (multi-stream appends are cut at unit boundaries). */
    const unitOfEvent = new Map<PreparedEvent, number>();
    /** Per unit: its streams in order of first appearance and its prepared events. */
    const perUnit: { streams: string[]; events: PreparedEvent[]; duplicate: number }[] = [];
    let lastWithEvents = -1;
    /** Checks an event of unit `u` (its id unique in the call, not the checkpoint stream) and notes its id. */
    const admit = (event: SinkEvent, u: number): void => {
      if (ids.has(event.id)) {
        throw new SinkError('SINK_INVALID_EVENT', `event id ${event.id} appears twice in ${describe(units[u]!)}${units.length > 1 ? ' (or in an earlier unit of the same batch)' : ''}; ids must be unique per delivery`, { eventId: event.id, stream: event.stream });
      }
      ids.set(event.id, u);
      if (event.stream === config.checkpointStream) {
        throw new SinkError('SINK_INVALID_EVENT', `event ${event.type} targets the assembler's checkpoint stream "${event.stream}"`, { stream: event.stream, type: event.type });
      }
    };
    /** Adds a prepared event of unit `u` to its stream's events, in call order. */
    const place = (p: PreparedEvent, u: number): void => {
      let merged = byStream.get(p.stream);
      if (!merged) byStream.set(p.stream, (merged = []));
      merged.push(p);
      unitOfEvent.set(p, u);
    };
    for (let u = 0; u < batches.length; u++) {
      const batch = batches[u]!;
      const unit = units[u]!;
      const first = batch.events[0];
      const owner = first ? ids.get(first.id) : undefined;
      if (owner !== undefined && owner !== u && compareUnits(units[owner]!, unit) === 0) {
        // The same unit handed over twice in one batch (e.g. a snapshot record read again): the
        // second delivery is a replay of the first — nothing of it is appended again.
        perUnit.push({ streams: [], events: [], duplicate: batch.events.length });
        continue;
      }
      if (batch.events.length === 1) {
        // The common unit: one event — what the general path below does, without its maps.
        const event = batch.events[0]!;
        admit(event, u);
        const p = prepareEvent(event, unit, 0, 1);
        place(p, u);
        perUnit.push({ streams: [event.stream], events: [p], duplicate: 0 });
        lastWithEvents = u;
        continue;
      }
      const own = new Map<string, SinkEvent[]>();
      for (const event of batch.events) {
        admit(event, u);
        const list = own.get(event.stream);
        if (list) list.push(event);
        else own.set(event.stream, [event]);
      }
      const prepared: PreparedEvent[] = [];
      const unitPart = unitReceiptPart(unit);
      for (const events of own.values()) {
        events.forEach((event, ordinal) => {
          const p = prepareEvent(event, unitPart, ordinal, events.length);
          place(p, u);
          prepared.push(p);
        });
      }
      perUnit.push({ streams: [...own.keys()], events: prepared, duplicate: 0 });
      if (batch.events.length > 0) lastWithEvents = u;
    }
    const outcomes: AppendOutcome[] = [];
    if (lastWithEvents < 0) {
      for (let u = 0; u < batches.length; u++) outcomes.push({ appended: 0, skipped: perUnit[u]!.duplicate, streams: [], checkpoint: 'none', mode });
      return outcomes;
    }
    const groups: Group[] = [...byStream].map(([stream, events]) => ({ stream, events }));
    // One checkpoint event per call, for its last unit with events (a batch lands as a whole in multi-stream mode).
    const checkpoint = config.checkpointStream ? checkpointEvent(config.checkpointStream, batches[lastWithEvents]!.position, units[lastWithEvents]!) : null;
    if (checkpoint) {
      groups.push({ stream: config.checkpointStream!, events: [checkpoint] });
      unitOfEvent.set(checkpoint, lastWithEvents);
    }

    // Before any I/O: nothing of a call that cannot be appended is written.
    for (const group of groups) {
      for (const event of group.events) {
        const size = mode === 'multi-stream' ? event.multiStreamSize : event.size;
        if (size > limit) throw oversized(event, size, limit);
      }
    }

    const appended = new Set<string>();
    let done = false;
    if (mode === 'multi-stream') done = await appendMultiStream(label, groups, appended, unitOfEvent);
    if (!done) {
      // Tails that must be read (after a failure, or without optimistic first touches) are read in parallel.
      await Promise.all(groups.map((group) => stateOf(group.stream)));
      // One unit: its streams one after the other, in order of first appearance (a conflict stops
      // the rest). A batch of units: streams are independent, appended concurrently (bounded),
      // each in order — a crash may leave any subset of them written; the receipts make the
      // replay exact. The checkpoint event (when on) only after all of them.
      const business = checkpoint ? groups.slice(0, -1) : groups;
      const concurrency = units.length === 1 ? 1 : PER_STREAM_CONCURRENCY;
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < business.length) await appendPerStream(business[next++]!, appended);
      };
      await Promise.all(Array.from({ length: Math.min(concurrency, business.length) }, worker));
      if (checkpoint) await appendPerStream(groups[groups.length - 1]!, appended);
    }

    let appendedTotal = 0;
    let skippedTotal = 0;
    for (let u = 0; u < batches.length; u++) {
      const { streams: names, events, duplicate } = perUnit[u]!;
      if (duplicate > 0) {
        skippedTotal += duplicate;
        outcomes.push({ appended: 0, skipped: duplicate, streams: [], checkpoint: 'none', mode });
        continue;
      }
      const revisionOf = (stream: string): bigint | null => {
        const revision = streams.get(stream)?.revision;
        return typeof revision === 'bigint' ? revision : null;
      };
      let unitAppended = 0;
      let streamOutcomes: StreamAppendOutcome[];
      if (names.length === 1) {
        // One stream (the common unit): no per-stream tally needed.
        for (const event of events) if (appended.has(event.id)) unitAppended += 1;
        const stream = names[0]!;
        streamOutcomes = [{ stream, appended: unitAppended, skipped: events.length - unitAppended, revision: revisionOf(stream) }];
      } else {
        const counts = new Map<string, { appended: number; skipped: number }>();
        for (const stream of names) counts.set(stream, { appended: 0, skipped: 0 });
        for (const event of events) {
          const c = counts.get(event.stream)!;
          if (appended.has(event.id)) {
            c.appended += 1;
            unitAppended += 1;
          } else c.skipped += 1;
        }
        streamOutcomes = names.map((stream) => ({ stream, ...counts.get(stream)!, revision: revisionOf(stream) }));
      }
      const unitSkipped = events.length - unitAppended;
      appendedTotal += unitAppended;
      skippedTotal += unitSkipped;
      outcomes.push({
        appended: unitAppended,
        skipped: unitSkipped,
        streams: streamOutcomes,
        checkpoint: u === lastWithEvents && checkpoint ? (appended.has(checkpoint.id) ? 'appended' : 'skipped') : 'none',
        mode,
      });
    }
    stats.appendedEvents += appendedTotal;
    stats.skippedEvents += skippedTotal;
    return outcomes;
  }

  // Start-up: learn what the server serves, and say which mode runs.
  try {
    if (config.mode === 'per-stream') {
      mode = 'per-stream';
      logger.info('kurrentdb sink started', { mode, reason: 'configured', assembler: config.assembler, maxAppendSize: limit, checkpointStream: config.checkpointStream });
    } else {
      const supported = await retrying('detect-server-features', {}, () => serverSupportsMultiStreamAppend(client));
      if (supported !== true && config.mode === 'multi-stream') {
        throw new SinkError(
          'SINK_MULTI_STREAM_UNSUPPORTED',
          'mode "multi-stream" needs a server that serves multi-stream append (KurrentDB 25.1+); this one does not advertise it — use mode "auto" or "per-stream"',
          { mode: config.mode },
        );
      }
      mode = supported === true ? 'multi-stream' : 'per-stream';
      const reason = supported === true ? 'server advertises multi-stream append' : supported === 'unknown' ? 'server features unknown to this client' : 'server does not advertise multi-stream append';
      logger.info('kurrentdb sink started', { mode, reason, transport: mode === 'multi-stream' ? appendTransport : 'grpc-js', assembler: config.assembler, maxAppendSize: limit, checkpointStream: config.checkpointStream });
    }
  } catch (error) {
    closed = true;
    h2?.close();
    await Promise.allSettled([client.dispose(), reader.dispose()]);
    throw error;
  }
  // The log head is read before the first optimistic append; the first read through a new
  // client's native bridge takes ~0.5 s, so start it now, while the caller finishes starting up.
  void optimisticHead().catch(() => undefined);

  return {
    get mode() {
      return mode;
    },
    append(batch: SinkBatch): Promise<AppendOutcome> {
      const run = queue.then(() => appendUnits([batch])).then((outcomes) => outcomes[0]!);
      queue = run.catch(() => undefined);
      return run;
    },
    appendMany(batches: readonly SinkBatch[]): Promise<AppendOutcome[]> {
      // Not queued behind `append`: the caller runs concurrent calls on disjoint streams only.
      const run = appendUnits(batches);
      const settled = run.catch(() => undefined);
      inFlightMany.add(settled);
      void settled.finally(() => inFlightMany.delete(settled));
      return run;
    },
    forget(names: readonly string[]): void {
      for (const name of names) drop(name);
    },
    status(): SinkStatus {
      return {
        mode,
        state: closed ? 'closed' : stats.state,
        attempts: stats.attempts,
        retries: stats.retries,
        lastError: stats.lastError,
        cachedStreams: streams.size,
        appendedEvents: stats.appendedEvents,
        skippedEvents: stats.skippedEvents,
        tailReads: stats.tailReads,
        logHeadReads: stats.logHeadReads,
      };
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      closing.abort();
      await Promise.all([queue, ...inFlightMany]);
      h2?.close();
      await Promise.allSettled([client.dispose(), reader.dispose()]);
      streams.clear();
      mustRead.clear();
    },
  };
}
