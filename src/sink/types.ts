// The sink stage's shapes: what callers hand over (batches of events with their source
// position) and what they get back (outcomes, status). The stage's interface is `Sink`.
import type { Lsn } from '../source/types.js';

/**
 * One event to append, as the sink needs it. The mapping SDK's `EventToAppend` fits; the
 * contract version travels in `metadata.contract` (`type@version`), so it is not read here.
 */
export interface SinkEvent {
  /** Deterministic UUID: the same delivery always has the same id (idempotent retries). */
  readonly id: string;
  readonly stream: string;
  readonly type: string;
  /** JSON-serializable. */
  readonly data: unknown;
  /** Flat, string-valued. The key `receipt` and keys starting with `receipt.` are the sink's and rejected here. */
  readonly metadata: Readonly<Record<string, string>>;
}

/** Where a transaction's events come from. A `SourcePosition` fits. */
export interface TransactionSinkPosition {
  readonly kind?: 'transaction';
  /** Opaque source checkpoint; recorded in the checkpoint stream. */
  readonly checkpoint: string;
  readonly commitLsn: Lsn;
  readonly xid: number;
  /** Source system id; stamped in receipts when given, so a different database is never mistaken for ours. */
  readonly systemId?: string;
}

/**
 * Where a snapshot record's events come from. The order among transactions comes from `lsn`
 * (the snapshot's consistent point, or the high watermark of an incremental chunk), and among
 * records of one generation from `sequence` — see `receipt.ts`.
 */
export interface SnapshotSinkPosition {
  readonly kind: 'snapshot';
  readonly checkpoint?: string;
  readonly systemId?: string;
  readonly snapshotGeneration: string;
  readonly lsn: Lsn;
  readonly sequence: number;
  readonly table: string;
  /** The row's key as text, for diagnosis. */
  readonly key: string;
}

export type SinkPosition = TransactionSinkPosition | SnapshotSinkPosition;

/**
 * A unit with more events than this is handed to the sink in slices ({@link SinkBatch.slice}),
 * so that no stage holds all of a bulk transaction's events at once. It decides how the sink
 * numbers the unit's events (receipt scope, see receipt.ts), so it must not depend on anything
 * but the unit: a replay must slice exactly when the first attempt did. Never change it.
 */
export const SLICED_UNIT_EVENTS = 1_000;

/** Where a slice's events sit in their unit (see {@link SinkBatch.slice}). */
export interface UnitSlice {
  /** The unit-wide index of the slice's first event. */
  readonly offset: number;
  /** The unit's events in all (more than {@link SLICED_UNIT_EVENTS}). */
  readonly total: number;
}

/** One source transaction (or snapshot record) and the events mapped from it — or one slice of them. */
export interface SinkBatch {
  readonly position: SinkPosition;
  readonly events: readonly SinkEvent[];
  /**
   * Set when the unit's events come in several batches, in order (a unit of more than
   * {@link SLICED_UNIT_EVENTS} events): `events[i]` is the unit's event `offset + i` of `total`.
   * Receipts then number each event by its place in the whole unit (scope `unit`, receipt.ts).
   * Slices of one unit are not atomic together: each call lands on its own. The checkpoint event
   * (when the sink writes one) goes with the last slice.
   */
  readonly slice?: UnitSlice;
}

export type SinkMode = 'multi-stream' | 'per-stream';

export interface StreamAppendOutcome {
  readonly stream: string;
  /**
   * Events this call's appends wrote — or found already written by identical earlier attempts
   * (a retry answered by the server's idempotency check counts here).
   */
  readonly appended: number;
  /** Events the stream's receipt showed as already applied (a replay, or another instance's write). */
  readonly skipped: number;
  /** The stream's revision afterwards (`null` when unknown). */
  readonly revision: bigint | null;
}

export interface AppendOutcome {
  readonly appended: number;
  readonly skipped: number;
  /** Business streams, in order of first appearance (the checkpoint stream is reported separately). */
  readonly streams: readonly StreamAppendOutcome[];
  /** The assembler's checkpoint event: written now, already there (replay), or not written (empty batch / disabled). */
  readonly checkpoint: 'appended' | 'skipped' | 'none';
  readonly mode: SinkMode;
}

export interface SinkStatus {
  readonly mode: SinkMode;
  /** `retrying` while a call waits out a destination outage. */
  readonly state: 'connected' | 'retrying' | 'closed';
  /** Failed attempts of the call in progress (0 when healthy). */
  readonly attempts: number;
  /** Retries since start. */
  readonly retries: number;
  readonly lastError: { readonly message: string; readonly code: string | null; readonly at: Date } | null;
  /** Streams whose revision and receipt are cached. */
  readonly cachedStreams: number;
  readonly appendedEvents: number;
  readonly skippedEvents: number;
  /**
   * Stream tails read since start. A stream's first touch appends optimistically (as a new
   * stream) and reads its tail only when that append says the stream exists — so appending to
   * new streams reads none. Optional: aggregates of several sinks may leave it out.
   */
  readonly tailReads?: number;
  /**
   * First touches whose state a look-ahead read had learned before their call asked (of
   * `tailReads`; see `Sink.prefetch`). Optional like `tailReads`.
   */
  readonly prefetchHits?: number;
  /**
   * Of `tailReads`, those answered on the hand-framed HTTP/2 connection (plain text or TLS:
   * src/sink/tail-reader.ts); the rest went through the client's own paths. Optional like `tailReads`.
   */
  readonly framedTailReads?: number;
  /**
   * Multi-stream appends answered on the hand-framed HTTP/2 connection (a call whose body fits a
   * stream's window: src/sink/h2-append.ts); the rest went as node:http2 requests. Optional like `tailReads`.
   */
  readonly framedAppends?: number;
  /** Reads of the log's head (`$all`, at most one per sink, before its first optimistic append). */
  readonly logHeadReads?: number;
  /**
   * How a stream not in the cache is first touched: appended to as if new (`optimistic`: most
   * streams are new), or its tail read first (`read`: recent first touches met existing streams,
   * e.g. a bulk update after a restart). Chosen by the sink from what it meets.
   */
  readonly firstTouch?: 'optimistic' | 'read';
  /** Append calls whose events were cut across several appends (max append size), each atomic, the call not. */
  readonly splitCalls?: number;
}

/** The stage's interface: a verb and `close()`. */
export interface Sink {
  /**
   * Appends one unit's events. Resolves once they — and every earlier unit's — are durable.
   * Calls are applied one at a time, in call order.
   */
  append(batch: SinkBatch): Promise<AppendOutcome>;
  /**
   * Appends several units at once (group commit): their events merged per stream, in unit order,
   * each event with its own receipt. Resolves with one outcome per unit. Not ordered with other
   * calls: the caller may run several at once only on disjoint sets of streams, and must not
   * start a call touching a stream before an earlier call touching it has resolved.
   */
  appendMany?(batches: readonly SinkBatch[]): Promise<AppendOutcome[]>;
  /**
   * A hint that units touching `streams` are queued: a sink that must learn the state of
   * streams it has not seen may start doing so now, for the calls that will append to them.
   * Only a hint — the append still checks everything it relies on. Gives whether the sink is
   * looking ahead now (`false`: it ignored the hint; asking again later may be useful).
   */
  prefetch?(streams: readonly string[]): boolean;
  /**
   * Called when a unit is queued, before its append: the sink may return a lighter batch to hold
   * until then — its events encoded, the mapper's objects let go — and then gets that batch, not
   * the one it was given, in `append`/`appendMany`. The returned batch keeps the position, the
   * slice and the events' ids, streams and types (in order); their data and metadata may be
   * rebuilt on access. A batch it cannot prepare it returns as it is.
   */
  prepare?(batch: SinkBatch): SinkBatch;
  /**
   * Drops what is cached about these streams (revision, receipt); the next append re-reads their
   * tails. For a pipeline that writes one stream through several sinks, one at a time.
   */
  forget?(streams: readonly string[]): void;
  close(): Promise<void>;
}

export interface KurrentDBSink extends Sink {
  appendMany(batches: readonly SinkBatch[]): Promise<AppendOutcome[]>;
  /** The mode chosen at start-up. */
  readonly mode: SinkMode;
  status(): SinkStatus;
}

