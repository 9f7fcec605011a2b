/**
 * The sink stage: appends one source unit's business events (a transaction or a snapshot
 * record) to KurrentDB, each event exactly once in its stream (DESIGN invariant 3), and tells
 * the caller only when they are durable (invariant 2: the pipeline acknowledges after `append`
 * resolves).
 *
 * The implementation is `kurrentdb-sink.ts`; receipts (how a replay is recognised) are in
 * `receipt.ts`.
 */
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
  /** Flat, string-valued. Keys starting with `receipt.` are the sink's and rejected here. */
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

/** One source transaction (or snapshot record) and the events mapped from it. */
export interface SinkBatch {
  readonly position: SinkPosition;
  readonly events: readonly SinkEvent[];
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
  /** Reads of the log's head (`$all`, at most one per sink, before its first optimistic append). */
  readonly logHeadReads?: number;
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

export {
  createKurrentDBSink,
  checkpointStreamName,
  CHECKPOINT_EVENT_TYPE,
  DEFAULT_MAX_APPEND_SIZE,
  DEFAULT_TIMEOUT_MS,
  type KurrentDBSinkOptions,
  type SinkLogger,
  type SinkHooks,
} from './kurrentdb-sink.js';
export {
  compareReceipts,
  compareGenerations,
  compareUnits,
  receiptsComparable,
  receiptToMetadata,
  receiptFromMetadata,
  receiptAt,
  RECEIPT_KEYS,
  RECEIPT_PREFIX,
  type Receipt,
  type ReceiptUnit,
  type TransactionUnit,
  type SnapshotUnit,
} from './receipt.js';
export { SinkError, OversizedEventError, StreamConflictError, type SinkErrorCode, type OversizedEventDetails, type StreamConflictDetails } from './errors.js';
export { eventSizeOnDisk } from './encoding.js';
export { DEFAULT_RETRY, type RetryPolicy } from './retry.js';
export { readerConnectionString } from './reader-connection.js';
