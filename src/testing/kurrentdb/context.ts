// What the gRPC services share: the store, the limits, and the single ordered write path through
// which every append passes (latency and fault injection live there).
import type { RpcError } from './errors.js';
import { injectedFailure } from './errors.js';
import type { EventStore } from './store.js';

/** UNAVAILABLE, INTERNAL, or UNIMPLEMENTED (a server that does not serve the call, as an older KurrentDB behind a failover would). */
export type InjectedFailureKind = 'unavailable' | 'internal' | 'unimplemented';

export interface ServerContext {
  readonly store: EventStore;
  /** MaxAppendSize: the total `Event.SizeOnDisk` of one append request, in bytes. */
  readonly maxAppendSize: number;
  /** MaxAppendEventSize: the size of a single event, in bytes. */
  readonly maxAppendEventSize: number;
  /**
   * Applies a write after the configured latency, in arrival order — the server has a single
   * writer (StorageWriterService), so two appends never overtake each other. Rejects with an
   * injected failure when `failNextAppends` asked for one (before or after applying).
   */
  applyWrite<T>(apply: () => T, streams?: readonly string[]): Promise<T>;
}

export interface InjectedFailureOptions {
  /**
   * Apply the write first, then fail the call: the events are stored but the client gets the
   * error — a lost acknowledgement, after which only idempotent retries avoid duplicates.
   * Default: false (fail before anything is written).
   */
  afterWrite?: boolean;
}

export interface WritePath {
  applyWrite<T>(apply: () => T, streams?: readonly string[]): Promise<T>;
  setLatency(ms: number): void;
  /** The streams of the writes received and not yet applied (or failed), one entry per write and stream. */
  pendingStreams(): string[];
  /** The same, one entry per write: its streams. */
  pendingWrites(): string[][];
  failNext(count: number, kind: InjectedFailureKind, options?: InjectedFailureOptions): void;
}

export function createWritePath(initialLatencyMs: number): WritePath {
  let latencyMs = initialLatencyMs;
  let failuresLeft = 0;
  let failureKind: InjectedFailureKind = 'unavailable';
  let failAfterWrite = false;
  let tail: Promise<unknown> = Promise.resolve();
  /** Per write received and not yet applied (a token of its own), its streams. */
  const pendingWrites = new Map<object, readonly string[]>();

  return {
    pendingStreams() {
      return [...pendingWrites.values()].flat();
    },
    pendingWrites() {
      return [...pendingWrites.values()].map((streams) => [...streams]);
    },
    applyWrite<T>(apply: () => T, streams: readonly string[] = []): Promise<T> {
      const write = {};
      pendingWrites.set(write, streams);
      // Latency is paid concurrently (like a pipelined fsync), application happens in order.
      const delay = latencyMs > 0 ? new Promise<void>((resolve) => setTimeout(resolve, latencyMs)) : Promise.resolve();
      const run = tail.then(
        () => delay,
        () => delay,
      ).then(() => {
        pendingWrites.delete(write);
        if (failuresLeft === 0) return apply();
        failuresLeft -= 1;
        if (failAfterWrite) apply();
        const failure: RpcError = injectedFailure(failureKind);
        throw failure;
      });
      tail = run.catch(() => undefined);
      return run;
    },
    setLatency(ms: number): void {
      latencyMs = ms;
    },
    failNext(count: number, kind: InjectedFailureKind, options: InjectedFailureOptions = {}): void {
      failuresLeft = count;
      failureKind = kind;
      failAfterWrite = options.afterWrite ?? false;
    },
  };
}
