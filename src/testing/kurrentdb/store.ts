// The store of the in-memory KurrentDB: the log and stream index (stream-log.ts), the append rules
// (store-append.ts over check-commit.ts), deletes (store-deletes.ts), stream reads (read-stream.ts),
// the weak-idempotency cache (recent-events.ts) and the commit listeners subscriptions hang on —
// wired together here. Everything is synchronous and transport-free; the gRPC services translate
// requests into these calls and results back into protocol messages.
//
// Rules follow KurrentDB's server source (github.com/kurrent-io/KurrentDB, src/KurrentDB.Core):
//   - IndexWriter.CheckCommit            (Services/Storage/ReaderIndex/IndexWriter.cs): check-commit.ts
//   - StorageWriterService               (Services/Storage/StorageWriterService.cs): VerifyCommitChecks,
//                                          soft delete / tombstone (WriteDelete), SoftUndeleteStream
//   - RequestManagerBase                 (Services/RequestManager/Managers/RequestManagerBase.cs):
//                                          ConsistencyChecksFailed -> StreamDeleted vs WrongExpectedVersion
import type { IndexView } from './check-commit.js';
import { readStream } from './read-stream.js';
import { createRecentEvents } from './recent-events.js';
import { appendToStreams } from './store-append.js';
import { softDelete, tombstone } from './store-deletes.js';
import type { AppendRequest, AppendResult, CommitListener, ReadStreamResult, StoreWriter, StreamStart } from './store-types.js';
import { createStreamLog } from './stream-log.js';
import { metastreamOf } from './stream-metadata.js';

export { DELETED_STREAM, ExpectedVersion, type ExpectedRevision } from './check-commit.js';
export {
  eventSizeOnDisk,
  type AllStart,
  type AppendRequest,
  type AppendResult,
  type ProposedEvent,
  type ReadStreamResult,
  type RecordedEvent,
  type StreamAppendResult,
  type StreamStart,
} from './store-types.js';
export { isMetastream, metastreamOf, originalStreamOf, parseStreamMetadata, type StreamMetadataView } from './stream-metadata.js';

export interface EventStoreOptions {
  /** Capacity of the weak-idempotency cache in events; default: the server's 8 MiB memory bound. */
  readonly idempotencyCacheSize?: number;
}

/**
 * The durable part (log, stream index) survives `restart()`; the recent-event-id cache used for
 * weak idempotency does not (the server keeps it in memory: IndexWriter `_committedEvents`).
 */
export function createEventStore(options: EventStoreOptions) {
  const log = createStreamLog();
  const recentEvents = createRecentEvents(options.idempotencyCacheSize);
  const listeners = new Set<CommitListener>();

  const index: IndexView = {
    lastEventNumber: log.lastEventNumber,
    isSoftDeleted: log.isSoftDeleted,
    eventAt: log.eventAt,
    recentEvent: (eventId) => recentEvents.get(eventId),
    metastreamOf,
  };

  const writer: StoreWriter = {
    index,
    appendEvent(streamName, event) {
      const recorded = log.appendToStream(streamName, event);
      recentEvents.remember(recorded.id, recorded); // a RecordedEvent is an EventInfo: no copy per event
      return recorded;
    },
    writeTombstone: log.writeTombstone,
    lastEvent: (streamName) => log.streamEvents(streamName).at(-1),
    notify(events) {
      if (events.length === 0) return;
      for (const listener of [...listeners]) listener(events);
    },
  };

  return {
    /** Atomic append to one or more streams (a v1 append is the one-stream case). */
    append: (requests: ReadonlyArray<AppendRequest>): AppendResult => appendToStreams(writer, requests),
    softDelete: (streamName: string, expected: bigint) => softDelete(writer, streamName, expected),
    tombstone: (streamName: string, expected: bigint) => tombstone(writer, streamName, expected),
    readStream: (streamName: string, direction: 'forwards' | 'backwards', from: StreamStart, maxCount: bigint): ReadStreamResult =>
      readStream(log, streamName, direction, from, maxCount),
    streamMetadata: log.streamMetadata,
    lastEventNumber: log.lastEventNumber,
    /** The whole log in commit order ($all), including system records. */
    log: log.log,
    logIndexAtOrAfter: log.logIndexAtOrAfter,
    /** Position just past the last record (where the next write will land). */
    headPosition: log.headPosition,
    streamEvents: log.streamEvents,
    streamNames: log.streamNames,
    recordCount: log.recordCount,
    /** Called synchronously after every commit with the records written, in log order. */
    onCommit(listener: CommitListener): () => void {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    /** A process restart forgets what only lived in memory: the weak-idempotency cache. */
    forgetVolatileState(): void {
      recentEvents.clear();
    },
  };
}

export type EventStore = ReturnType<typeof createEventStore>;
