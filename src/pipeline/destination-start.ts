/**
 * Opening the destination at start-up: the appender's sink and the checkpoint writer's sink
 * (each checks the server's features), the checkpoint stream's last position and the snapshot
 * store's state, all in parallel with the wait for PostgreSQL — independent round trips that one
 * after the other took 1.2 s against the in-memory server (each new client's first read ≈ 0.5 s).
 * An unreachable KurrentDB is waited for like PostgreSQL (startup.ts); a stop ends the wait.
 */
import type { ResolvedConfig } from '../config/schema.js';
import { createKurrentDBSink, isTlsFailure, isTransientError, kurrentdbAddress, SinkError, stateStreamName, type KurrentDBSink, type Sink, type SinkMode } from '../sink/index.js';
import { DestinationConnectionError, StartupUnavailableError } from './errors.js';
import type { Logger } from './logger.js';
import { StopBeforeStart, type RunControl } from './run-control.js';
import type { SnapshotState } from './snapshot-state.js';
import { createKurrentDBSnapshotStore } from './snapshot-store.js';
import { readLastCheckpoint, type LastCheckpoint } from './start-decision.js';
import { reachPostgres, retryAtStartup, type StartupGuard } from './startup.js';

export interface OpenedDestination {
  readonly appendSink: Sink;
  /** `null` with a custom sink: no checkpoint records, no checkpoint-vs-slot check. */
  readonly checkpointSink: KurrentDBSink | null;
  readonly mode: SinkMode | null;
  readonly last: LastCheckpoint | null;
}

function sinkOptions(config: ResolvedConfig, log: Logger, guard: StartupGuard) {
  return {
    connectionString: config.destination.connectionString,
    assembler: config.name,
    mode: config.destination.mode,
    logger: log,
    checkpointStream: false as const,
    maxCachedStreams: config.limits.maxCachedStreams,
    startSignal: guard.signal,
    ...(config.destination.maxAppendSize !== undefined ? { maxAppendSize: config.destination.maxAppendSize } : {}),
    ...(config.destination.timeoutMs !== undefined ? { timeoutMs: config.destination.timeoutMs } : {}),
    ...(config.destination.retry !== undefined ? { retry: config.destination.retry } : {}),
  };
}

/** A sink whose start was aborted: the stop, or the start-up deadline, named; a TLS handshake that cannot succeed, named as such. */
function startAborted(error: unknown, guard: StartupGuard, address: string): unknown {
  if (isTlsFailure(error)) return new DestinationConnectionError(address, tlsReason(error));
  if (!(error instanceof SinkError) || error.code !== 'SINK_START_ABORTED') return error;
  if (!guard.expired) return new StopBeforeStart();
  const cause = (error as { cause?: unknown }).cause;
  return new StartupUnavailableError({ server: 'KurrentDB', address, waitedMs: Date.now() - guard.startedAt, reason: cause instanceof Error ? cause.message : null });
}

/**
 * OpenSSL's reason (`…:SSL routines:ssl3_get_record:wrong version number:…` → `wrong version
 * number`), or the certificate check's (grpc-js: `No connection established. Last error: Error:
 * unable to verify the first certificate. …` → `unable to verify the first certificate`), else the
 * message's first line.
 */
function tlsReason(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  const reason = /SSL routines:[^:]*:([^:\n]+)/.exec(text)?.[1] ?? /Last error: (?:Error: )?([^.\n]+)/.exec(text)?.[1];
  return reason?.trim() ?? text.split('\n')[0]!.replace(/^\d+ [A-Z_]+: /, '');
}

/**
 * The caller's start-up guard, plus an abort of its own: the first failure that waiting does not
 * cure ends the other waits at once. (A TLS mismatch fails the sinks' first call, while the
 * checkpoint read — through the client's native reader, which reports only "UnavailableError" —
 * would wait for the start-up deadline, or for ever without one.)
 */
function failFastGuard(guard: StartupGuard): StartupGuard & { abort(): void } {
  const aborter = new AbortController();
  const abort = (): void => aborter.abort();
  guard.signal.addEventListener('abort', abort, { once: true });
  if (guard.signal.aborted) abort();
  return {
    signal: aborter.signal,
    get expired() {
      return guard.expired;
    },
    startedAt: guard.startedAt,
    dispose: () => guard.signal.removeEventListener('abort', abort),
    abort,
  };
}

export async function openDestination(
  config: ResolvedConfig,
  run: { readonly log: Logger; readonly control: RunControl; readonly guard: StartupGuard; readonly snapshots: SnapshotState; readonly sink?: Sink },
): Promise<OpenedDestination> {
  const { log, control, snapshots } = run;
  const guard = failFastGuard(run.guard);
  try {
    /** The first failure while nothing was aborted: the cause; what failed after it failed because of the abort. */
    let cause: { error: unknown } | null = null;
    const failFast = <T>(promise: Promise<T>): Promise<T> =>
      promise.catch((error: unknown) => {
        if (!guard.signal.aborted) {
          cause = { error };
          guard.abort();
        }
        throw error;
      });
    const source = failFast(reachPostgres(config.source.connection, guard, log));
    if (run.sink) {
      await source;
      return { appendSink: run.sink, checkpointSink: null, mode: (run.sink as Partial<KurrentDBSink>).mode ?? null, last: null };
    }
    const address = kurrentdbAddress(config.destination.connectionString);
    snapshots.store = createKurrentDBSnapshotStore(config.destination.connectionString, config.name, config.destination.retry ?? {});
    snapshots.stored = snapshots.store.load();
    snapshots.stored.catch(() => undefined); // reported when the start decision awaits it
    const options = sinkOptions(config, log, guard);
    const [checkpointSide, appendSide, lastSide, sourceSide] = await Promise.allSettled([
      failFast(createKurrentDBSink({ ...options, logger: { info() {}, warn: log.warn } })),
      // The append sink carries what it knows of its streams over a stop (sink/state-carry.ts).
      failFast(createKurrentDBSink({ ...options, stateStream: stateStreamName(config.name) })),
      failFast(retryAtStartup({ name: 'KurrentDB', address }, () => readLastCheckpoint(config.destination.connectionString, config.name, control), { guard, log, transient: isTransientError })),
      source,
    ]);
    const failed = [sourceSide, checkpointSide, appendSide, lastSide].find((r) => r.status === 'rejected');
    if (failed) {
      // Whatever did open is closed again: a failed start leaves nothing running.
      await Promise.allSettled([checkpointSide, appendSide].map((r) => (r.status === 'fulfilled' ? r.value.close() : undefined)));
      throw startAborted((cause as { error: unknown } | null)?.error ?? (failed as PromiseRejectedResult).reason, guard, address);
    }
    const checkpointSink = (checkpointSide as PromiseFulfilledResult<KurrentDBSink>).value;
    return {
      appendSink: (appendSide as PromiseFulfilledResult<KurrentDBSink>).value,
      checkpointSink,
      mode: checkpointSink.mode,
      last: (lastSide as PromiseFulfilledResult<LastCheckpoint | null>).value,
    };
  } finally {
    guard.dispose();
  }
}
