// The sink's failure kinds. Client errors are translated into these at the adapter boundary
// (kurrentdb-sink.ts); nothing above the sink sees a `@kurrent/kurrentdb-client` error class.
import { EventAssemblerError } from '../errors.js';

export type SinkErrorCode =
  | 'SINK_EVENT_OVERSIZED'
  | 'SINK_STREAM_CONFLICT'
  | 'SINK_STREAM_DELETED'
  | 'SINK_INVALID_EVENT'
  | 'SINK_INVALID_POSITION'
  | 'SINK_INVALID_CONFIG'
  | 'SINK_MULTI_STREAM_UNSUPPORTED'
  | 'SINK_RETRIES_EXHAUSTED'
  | 'SINK_CLOSED'
  | 'SINK_START_ABORTED'
  | 'SINK_APPEND_FAILED';

/** A base for the sink's errors so callers can `instanceof` the whole stage. */
export class SinkError extends EventAssemblerError {
  declare readonly code: SinkErrorCode;

  constructor(code: SinkErrorCode, message: string, details: Readonly<Record<string, unknown>> = {}, options?: { cause?: unknown }) {
    super(code, message, details, options);
  }
}

export type OversizedEventDetails = {
  readonly stream: string;
  readonly type: string;
  readonly eventId: string;
  /** `Event.SizeOnDisk` as the server counts it: data + metadata bytes + 2 × type length. */
  readonly size: number;
  readonly limit: number;
  /** The source transaction the event comes from (`null` for a snapshot record's). */
  readonly position?: { readonly commitLsn: string; readonly xid: number } | null;
};

/**
 * One event is larger than the server accepts in a single append. Never dropped: the line stops
 * (or the pipeline parks the transaction) and the mapper or the server's MaxAppendSize must change.
 */
export class OversizedEventError extends SinkError {
  declare readonly details: OversizedEventDetails;

  constructor(details: OversizedEventDetails) {
    const from = details.position ? ` (source transaction at commitLsn ${details.position.commitLsn} xid ${details.position.xid})` : '';
    super(
      'SINK_EVENT_OVERSIZED',
      `event ${details.type} (${details.eventId}) for stream "${details.stream}"${from} is ${details.size} bytes, over the append limit of ${details.limit} bytes; ` +
        'shrink the event in its mapper or raise the server\'s MaxAppendSize (and the sink\'s maxAppendSize)',
      details,
    );
  }
}

export type StreamConflictDetails = {
  readonly stream: string;
  /** What we expected the stream's revision to be (`no_stream` or a revision, as text). */
  readonly expected: string;
  /** What the server says it is (as text), when known. */
  readonly actual: string;
  /**
   * The receipt we were appending after (the unit's first event here), its fields as flat
   * `receipt.*` keys (receipt.ts `flatReceiptMetadata`; events carry it as one `receipt` property).
   */
  readonly ours: Readonly<Record<string, string>> | null;
  /** The receipt found at the stream's tail, the same way (`null`: the tail carries no receipt of this assembler). */
  readonly theirs: Readonly<Record<string, string>> | null;
  /** The tail event's id and type, for a human to look up. */
  readonly tailEvent: { readonly id: string; readonly type: string; readonly revision: string } | null;
  readonly reason: 'foreign-tail' | 'unexplained-revision' | 'receipt-from-other-source';
};

/**
 * Someone other than this assembler wrote to a stream it owns (or the stream's history no longer
 * matches what the receipts say). Appending anyway could duplicate or reorder events, so the
 * line stops: find the other writer, then resume.
 */
export class StreamConflictError extends SinkError {
  declare readonly details: StreamConflictDetails;

  constructor(details: StreamConflictDetails, options?: { cause?: unknown }) {
    const why = {
      'foreign-tail': 'its last event carries no receipt of this assembler',
      'unexplained-revision': 'its revision moved and its last receipt does not show our events',
      'receipt-from-other-source': 'its last receipt comes from another source system',
    }[details.reason];
    super(
      'SINK_STREAM_CONFLICT',
      `another writer on stream "${details.stream}": expected ${asRevision(details.expected)}, found ${asRevision(details.actual)}; ${why} ` +
        `(our receipt ${formatReceipt(details.ours)}, theirs ${formatReceipt(details.theirs)}` +
        `${details.tailEvent ? `, tail event ${details.tailEvent.type} ${details.tailEvent.id} at ${details.tailEvent.revision}` : ''}). ` +
        'One assembler owns its streams: stop the other writer before resuming',
      details,
      options,
    );
  }
}

function asRevision(text: string): string {
  return /^(\d+|no_stream)$/.test(text) ? `revision ${text}` : text;
}

function formatReceipt(metadata: Readonly<Record<string, string>> | null): string {
  if (!metadata) return 'none';
  return Object.entries(metadata)
    .map(([key, value]) => `${key.replace(/^receipt\./, '')}=${value}`)
    .join(' ');
}
