/**
 * The KurrentDB appender.
 *
 * Exactly-once per stream rests on three things (DESIGN invariant 3):
 *  1. every append names a *specific* expected revision (or `no_stream`) — never `any`, whose
 *     deduplication is a bounded in-memory cache that a server restart empties;
 *  2. every event carries a receipt (receipt.ts), so the tail of a stream says which unit and
 *     which of its events were applied last. A stream the sink knows nothing of is first
 *     touched optimistically as new, or — when recent first touches met existing streams — has
 *     its tail read first (stream-states.ts); either way its receipt decides what remains;
 *  3. event ids are deterministic, so a retry whose earlier attempt did land is answered by the
 *     server's strong idempotency check (same ids at the same revisions) instead of duplicating.
 *
 * A wrong-expected-version is either explained by the receipt (an earlier attempt of ours
 * landed: skip what is there, continue after it) or it is another writer: stop, loudly.
 *
 * This file wires the steps: options.ts (settings), stream-states.ts (what is known of each
 * stream), units.ts (batches → events with receipts → outcomes), multi-stream.ts and
 * per-stream.ts (the two ways of appending), conflicts.ts (what remains, who wrote).
 */
import { setMaxListeners } from 'node:events';
import { KurrentDBClient } from '@kurrent/kurrentdb-client';
import { oversized } from './conflicts.js';
import { errorMessage, errorType, type SinkContext, type SinkStats } from './context.js';
import { SinkError } from './errors.js';
import { createH2AppendTransport } from './h2-append.js';
import { transportOf } from './h2-transport.js';
import { appendMultiStream } from './multi-stream.js';
import { parseOptions, type KurrentDBSinkOptions, type SinkLogger } from './options.js';
import { kurrentdbAddress, readerConnectionString } from './reader-connection.js';
import { appendStreams, PER_STREAM_CONCURRENCY } from './per-stream.js';
import { backoffDelay, isTransientError } from './retry.js';
import { loadStates, saveStates } from './state-carry.js';
import { createStreamStates, type CallStates } from './stream-states.js';
import { createTailReader } from './tail-reader.js';
import type { AppendOutcome, KurrentDBSink, SinkBatch, SinkStatus } from './types.js';
import { callOutcomes, prepareBatch, prepareCall } from './units.js';
import { appendEncoded, serverSupportsMultiStreamAppend, supportsEncodedAppend, type EncodedStreamAppend } from './v2-append.js';

export {
  checkpointStreamName,
  CHECKPOINT_EVENT_TYPE,
  DEFAULT_MAX_APPEND_SIZE,
  DEFAULT_TIMEOUT_MS,
  type KurrentDBSinkOptions,
  type SinkHooks,
  type SinkLogger,
} from './options.js';

const silentLogger: SinkLogger = { info() {}, warn() {} };

/** Rejects with a retryable `deadline-exceeded` error when `promise` takes longer than `ms`. */
function withTimeout<T>(promise: Promise<T>, ms: number, operation: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`${operation} got no answer within ${ms} ms`), { type: 'deadline-exceeded' })), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** `promise`, or a rejection as soon as `signal` aborts (the promise is left to settle unobserved). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(new Error('aborted'));
  }
  return new Promise<T>((resolve, reject) => {
    const abort = (): void => reject(new Error('aborted'));
    signal.addEventListener('abort', abort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
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

/** Longest wait for the stream states to be written at close (a server that is down gets no save: the next start learns afresh). */
const CARRY_SAVE_TIMEOUT_MS = 5_000;
/** Longest wait for one attempt to read the carried states back (then it counts as unavailable and is retried). */
const LOAD_ATTEMPT_TIMEOUT_MS = 15_000;

/** At start: the states the previous sink of this assembler carried over its stop, taken as hints. Never fails the start. */
async function takeCarriedStates(ctx: SinkContext, stream: string, signal: AbortSignal): Promise<void> {
  const started = Date.now();
  try {
    // A fresh client per attempt: a client whose native bridge failed its first connection (an
    // outage at start-up) keeps answering UNAVAILABLE after the server is back (tail-reader.ts).
    const attempt = async () => {
      const reader = KurrentDBClient.connectionString(readerConnectionString(ctx.config.connectionString));
      try {
        return await withTimeout(loadStates(reader, stream, ctx.config.assembler), LOAD_ATTEMPT_TIMEOUT_MS, 'load-stream-states');
      } finally {
        void reader.dispose().catch(() => undefined);
      }
    };
    const states = await ctx.retrying('load-stream-states', { stream }, () => untilAborted(attempt(), signal));
    const taken = ctx.states.adoptCarried(states);
    if (taken > 0) ctx.logger.info('kurrentdb sink: stream states carried over from the last stop', { stream, states: taken, ms: Date.now() - started });
  } catch (error) {
    if (signal.aborted) throw error;
    ctx.logger.warn('kurrentdb sink: could not read the stream states carried over from the last stop; every stream is learned afresh', { stream, error: errorMessage(error) });
  }
}

/** At close: what the sink knows of its streams, for the next start. Never fails the close. */
async function carryStates(ctx: SinkContext, stream: string): Promise<void> {
  if (ctx.states.size === 0) return;
  if (ctx.stats.state === 'retrying') {
    // KurrentDB is not answering: a stop must not wait for it; the next start learns afresh.
    ctx.logger.info('kurrentdb sink: stream states not saved (KurrentDB is not answering)', { stream });
    return;
  }
  const started = Date.now();
  try {
    const parts = await withTimeout(saveStates(ctx.client, stream, ctx.states.carry()), CARRY_SAVE_TIMEOUT_MS, 'save-stream-states');
    ctx.logger.info('kurrentdb sink: stream states saved for the next start', { stream, states: ctx.states.size, parts, ms: Date.now() - started });
  } catch (error) {
    ctx.logger.warn('kurrentdb sink: could not save the stream states; the next start learns every stream afresh', { stream, error: errorMessage(error) });
  }
}

/**
 * Connects, detects whether the server serves multi-stream append, logs the mode and returns the
 * sink. Waits out an unavailable server like any other call (retry policy).
 */
export async function createKurrentDBSink(options: KurrentDBSinkOptions): Promise<KurrentDBSink> {
  const config = parseOptions(options);
  const logger = options.logger ?? silentLogger;
  // Appends go through `client` (grpc-js, or HTTP/2 requests on its channel); reads: tail-reader.ts.
  const client = KurrentDBClient.connectionString(config.connectionString);
  const encoded = supportsEncodedAppend(client);
  /** The encoded requests go as one HTTP/2 write per call (h2-append.ts), plain text or TLS as the client connects (h2-transport.ts). */
  const transport = transportOf(config.connectionString);
  const h2 = encoded ? createH2AppendTransport(client, { transport, timeoutMs: config.timeoutMs }) : null;
  const appendTransport = h2 ? `http2 (one write per call, framed when small${transport.scheme === 'https' ? ', TLS' : ''})` : encoded ? 'grpc-js (encoded records)' : 'grpc-js (client)';
  const reader = createTailReader(config.connectionString, client, transport);
  const closing = new AbortController();
  // Every call in flight waits on it (removed when the call ends): not a leak, however many.
  setMaxListeners(0, closing.signal);
  let closed = false;
  const address = kurrentdbAddress(config.connectionString);
  let queue: Promise<unknown> = Promise.resolve();
  /** `appendMany` calls in progress (they run concurrently, on disjoint streams). */
  const inFlightMany = new Set<Promise<unknown>>();
  const stats: SinkStats = { state: 'connected', attempts: 0, retries: 0, lastError: null, appendedEvents: 0, skippedEvents: 0, tailReads: 0, logHeadReads: 0, prefetchHits: 0, splitCalls: 0 };

  const closedError = (cause?: unknown): SinkError =>
    new SinkError('SINK_CLOSED', 'the KurrentDB sink was closed while a call was in progress; nothing after the last acknowledged unit is known to be durable', {}, { cause });

  async function retrying<T>(operation: string, details: Record<string, unknown>, call: () => Promise<T>): Promise<T> {
    let attempt = 0;
    for (;;) {
      if (closed) throw closedError();
      try {
        // A close (or an aborted start) ends the wait at once, not after `timeoutMs`.
        const result = await untilAborted(withTimeout(call(), config.timeoutMs, operation), closing.signal);
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
        logger.warn('kurrentdb sink: destination unavailable, retrying', { server: 'KurrentDB', address, operation, attempt, delayMs, error: errorMessage(error), ...details });
        await sleep(delayMs, closing.signal);
      }
    }
  }

  const ctx: SinkContext = {
    config,
    logger,
    hooks: options.hooks ?? {},
    client,
    states: createStreamStates({ maxCachedStreams: config.maxCachedStreams, reader, logger, retrying, stats }),
    stats,
    limit: config.maxAppendSize,
    mode: 'per-stream',
    encoded,
    sendEncoded: (requests: readonly EncodedStreamAppend[]) => (h2 ? h2.append(requests) : appendEncoded(client, requests)),
    retrying,
  };

  /**
   * Appends several units' events in one go (group commit): the units' events are merged per
   * stream, in unit order, each event with its own receipt; in multi-stream mode all streams go in
   * one atomic call (several when the max append size requires), in per-stream mode the streams are
   * appended concurrently, each in order. Resolves with one outcome per unit, in order.
   */
  async function appendUnits(batches: readonly SinkBatch[]): Promise<AppendOutcome[]> {
    if (closed) throw closedError();
    const call = prepareCall(config, batches);
    const known: CallStates = new Map();
    const appended = new Set<string>();
    if (call.groups.length > 0) {
      // Before any I/O: nothing of a call that cannot be appended is written.
      for (const group of call.groups) {
        for (const event of group.events) {
          const size = ctx.mode === 'multi-stream' ? event.multiStreamSize : event.size;
          if (size > ctx.limit) throw oversized(event, size, ctx.limit);
        }
      }
      let done = false;
      if (ctx.mode === 'multi-stream') {
        const slices = new Set<number>();
        batches.forEach((batch, u) => batch.slice && slices.add(u));
        done = await appendMultiStream(ctx, { label: call.label, groups: call.groups, unitOf: call.unitOf, slices, appended, known });
      }
      if (!done) {
        // The checkpoint event (when on) only after all the business streams.
        const business = call.checkpoint ? call.groups.slice(0, -1) : call.groups;
        const concurrency = batches.length === 1 && !batches[0]!.slice ? 1 : PER_STREAM_CONCURRENCY;
        await appendStreams(ctx, business, appended, known, concurrency);
        if (call.checkpoint) await appendStreams(ctx, call.groups.slice(-1), appended, known, 1);
      }
    }
    const revisionOf = (stream: string): bigint | null => {
      const revision = (known.get(stream) ?? ctx.states.cached(stream))?.revision;
      return typeof revision === 'bigint' ? revision : null;
    };
    const result = callOutcomes(call, appended, revisionOf, ctx.mode);
    stats.appendedEvents += result.appended;
    stats.skippedEvents += result.skipped;
    return result.outcomes;
  }

  // Start-up: learn what the server serves, and say which mode runs. An aborted start ends the
  // wait for an unreachable server like a close does.
  const abortStart = (): void => {
    closed = true;
    closing.abort();
  };
  options.startSignal?.addEventListener('abort', abortStart, { once: true });
  try {
    if (options.startSignal?.aborted) abortStart();
    if (config.mode === 'per-stream') {
      logger.info('kurrentdb sink started', { mode: ctx.mode, reason: 'configured', assembler: config.assembler, maxAppendSize: ctx.limit, checkpointStream: config.checkpointStream });
    } else {
      const supported = await retrying('detect-server-features', {}, () => serverSupportsMultiStreamAppend(client));
      if (supported !== true && config.mode === 'multi-stream') {
        throw new SinkError(
          'SINK_MULTI_STREAM_UNSUPPORTED',
          'mode "multi-stream" needs a server that serves multi-stream append (KurrentDB 25.1+); this one does not advertise it — use mode "auto" or "per-stream"',
          { mode: config.mode },
        );
      }
      ctx.mode = supported === true ? 'multi-stream' : 'per-stream';
      const reason = supported === true ? 'server advertises multi-stream append' : supported === 'unknown' ? 'server features unknown to this client' : 'server does not advertise multi-stream append';
      logger.info('kurrentdb sink started', { mode: ctx.mode, reason, transport: ctx.mode === 'multi-stream' ? appendTransport : 'grpc-js', assembler: config.assembler, maxAppendSize: ctx.limit, checkpointStream: config.checkpointStream });
    }
  } catch (error) {
    const aborted = options.startSignal?.aborted === true;
    closed = true;
    h2?.close();
    await Promise.allSettled([client.dispose(), reader.close()]);
    if (aborted) throw new SinkError('SINK_START_ABORTED', `start-up aborted while waiting for KurrentDB at ${address}`, { address }, { cause: error });
    throw error;
  } finally {
    options.startSignal?.removeEventListener('abort', abortStart);
  }
  // The log head is read before the first optimistic append; the first read through a new
  // client's native bridge takes ~0.5 s, so start it now, while the caller finishes starting up.
  ctx.states.warmUp();
  if (config.stateStream !== null) {
    try {
      await takeCarriedStates(ctx, config.stateStream, closing.signal);
    } catch (error) {
      // Only an aborted start gets here (a failed read is logged and the start goes on): close what opened.
      h2?.close();
      await Promise.allSettled([client.dispose(), reader.close()]);
      throw new SinkError('SINK_START_ABORTED', `start-up aborted while reading the stream states carried over from the last stop (${address})`, { address }, { cause: error });
    }
  }

  return {
    get mode() {
      return ctx.mode;
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
    prefetch(streams: readonly string[]): boolean {
      return !closed && ctx.states.prefetch(streams);
    },
    prepare(batch: SinkBatch): SinkBatch {
      // Only for encoded multi-stream appends, which need nothing but the records.
      return !closed && ctx.mode === 'multi-stream' && ctx.encoded ? prepareBatch(config, batch) : batch;
    },
    forget(names: readonly string[]): void {
      for (const name of names) ctx.states.drop(name);
    },
    status(): SinkStatus {
      return {
        mode: ctx.mode,
        state: closed ? 'closed' : stats.state,
        attempts: stats.attempts,
        retries: stats.retries,
        lastError: stats.lastError,
        cachedStreams: ctx.states.size,
        appendedEvents: stats.appendedEvents,
        skippedEvents: stats.skippedEvents,
        tailReads: stats.tailReads,
        framedTailReads: reader.framedReads ?? 0,
        framedAppends: h2?.framedAppends ?? 0,
        logHeadReads: stats.logHeadReads,
        prefetchHits: stats.prefetchHits,
        firstTouch: ctx.states.firstTouch,
        splitCalls: stats.splitCalls,
      };
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      closing.abort();
      await Promise.all([queue, ...inFlightMany]);
      if (config.stateStream !== null) await carryStates(ctx, config.stateStream);
      h2?.close();
      await Promise.allSettled([client.dispose(), reader.close()]);
      ctx.states.clear();
    },
  };
}
