// The vocabulary of the in-memory KurrentDB's store: events proposed and recorded, append and
// delete requests and their results, read results — and `StoreWriter`, the part of the store the
// append and delete rules (store-append.ts, store-deletes.ts) write through.
import type { ExpectedRevision, IndexView } from './check-commit.js';

export interface ProposedEvent {
  readonly id: string;
  readonly type: string;
  readonly contentType: string;
  readonly data: Uint8Array;
  readonly metadata: Uint8Array;
}

export interface RecordedEvent {
  readonly streamName: string;
  readonly id: string;
  readonly type: string;
  readonly contentType: string;
  readonly data: Uint8Array;
  readonly metadata: Uint8Array;
  readonly revision: bigint;
  /**
   * Position in the global log. The real server's positions are byte offsets in its transaction
   * file; so are ours (approximately: a fixed record header plus the payload), so they are neither
   * contiguous nor revision-like. Commit and prepare positions are equal for every record, as for
   * the server's implicit single-chunk transactions.
   */
  readonly position: bigint;
  /** Creation time in .NET ticks (100 ns) since the Unix epoch, as in the `created` read metadata. */
  readonly created: bigint;
}

/** The payload size the server counts against MaxAppendSize (`Event.SizeOnDisk`, Data/Event.cs). */
export function eventSizeOnDisk(event: Pick<ProposedEvent, 'type' | 'data' | 'metadata'>): number {
  return event.data.length + event.metadata.length + event.type.length * 2;
}

export interface AppendRequest {
  readonly streamName: string;
  readonly expectedRevision: ExpectedRevision;
  readonly events: ReadonlyArray<ProposedEvent>;
}

export type StreamAppendResult =
  | { readonly kind: 'ok'; readonly streamName: string; readonly currentRevision: bigint; readonly position: bigint | undefined }
  | {
      readonly kind: 'wrong_expected_version';
      readonly streamName: string;
      readonly expectedRevision: ExpectedRevision;
      /** The stream's actual revision, `-1` when it has no events. */
      readonly currentRevision: bigint;
    }
  | { readonly kind: 'stream_deleted'; readonly streamName: string };

export interface AppendResult {
  /** True when all streams were written (or the whole request was an idempotent retry). */
  readonly ok: boolean;
  /**
   * One result per request, in request order. On failure, only the failing streams are listed
   * (StorageMessage.ConsistencyChecksFailed: failures and idempotent streams, in request order).
   */
  readonly streams: ReadonlyArray<StreamAppendResult>;
  /**
   * The single OperationResult of a failed write (RequestManagerBase): StreamDeleted as soon as one
   * failing stream is tombstoned or soft-deleted-but-expected-to-exist, else WrongExpectedVersion.
   */
  readonly failure?: 'stream_deleted' | 'wrong_expected_version';
  /** Log position of the write (the last record written, or of the original write for a retry). */
  readonly position: bigint | undefined;
}

/** A soft delete or tombstone: the log position of the record written, or why nothing was. */
export type DeleteResult = { readonly kind: 'ok'; readonly position: bigint } | Exclude<StreamAppendResult, { kind: 'ok' }>;

export type ReadStreamResult =
  | { readonly kind: 'ok'; readonly events: ReadonlyArray<RecordedEvent>; readonly lastRevision: bigint }
  | { readonly kind: 'not_found' }
  | { readonly kind: 'deleted' };

export type StreamStart = 'start' | 'end' | bigint;
export type AllStart = 'start' | 'end' | bigint;

export type CommitListener = (events: ReadonlyArray<RecordedEvent>) => void;

/** What the append and delete rules need of the store: a view for CheckCommit, two ways to write, the listeners. */
export interface StoreWriter {
  readonly index: IndexView;
  /** Writes an event at the stream's next revision and remembers its id for weak idempotency. */
  appendEvent(streamName: string, event: ProposedEvent): RecordedEvent;
  /** Writes a tombstone record (revision DELETED_STREAM); its id is not remembered. */
  writeTombstone(streamName: string, event: ProposedEvent): RecordedEvent;
  /** The stream's latest event (for a metastream: its current metadata). */
  lastEvent(streamName: string): RecordedEvent | undefined;
  /** Tells the commit listeners what was written, in log order. */
  notify(events: ReadonlyArray<RecordedEvent>): void;
}
