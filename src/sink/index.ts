/**
 * The sink stage: appends one source unit's business events (a transaction or a snapshot
 * record) to KurrentDB, each event exactly once in its stream (DESIGN invariant 3), and tells
 * the caller only when they are durable (invariant 2: the pipeline acknowledges after `append`
 * resolves).
 *
 * Shapes are in `types.ts`; the KurrentDB implementation is `kurrentdb-sink.ts` (wiring), with
 * its steps beside it: `stream-states.ts` (what is known of each stream, tail reads),
 * `plan.ts` (what remains to append, cut into appends), `multi-stream.ts` and `per-stream.ts`
 * (the two ways of appending), `units.ts` (batches → events with receipts → outcomes),
 * `state-carry.ts` (what is known of the streams, carried over a stop);
 * receipts (how a replay is recognised) are in `receipt.ts`.
 */
export type * from './types.js';
export { SLICED_UNIT_EVENTS } from './types.js';
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
  parseReceipt,
  flatReceiptMetadata,
  isReceiptKey,
  receiptAt,
  RECEIPT_KEY,
  RECEIPT_KEYS,
  RECEIPT_PREFIX,
  type Receipt,
  type ReceiptUnit,
  type TransactionUnit,
  type SnapshotUnit,
} from './receipt.js';
export { SinkError, OversizedEventError, StreamConflictError, type SinkErrorCode, type OversizedEventDetails, type StreamConflictDetails } from './errors.js';
export { eventSizeOnDisk } from './encoding.js';
export { DEFAULT_RETRY, isTlsFailure, isTransientError, type RetryPolicy } from './retry.js';
export { kurrentdbAddress, readerConnectionString } from './reader-connection.js';
export { stateStreamName } from './state-carry.js';
