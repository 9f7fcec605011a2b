// The storage and index of the in-memory KurrentDB: one global log ($all) plus a per-stream index,
// and the append rules of the real server. Everything here is synchronous and transport-free;
// the gRPC services translate requests into these calls and results back into protocol messages.
//
// Rules follow KurrentDB's server source (github.com/kurrent-io/KurrentDB, src/KurrentDB.Core):
//   - IndexWriter.CheckCommit            (Services/Storage/ReaderIndex/IndexWriter.cs): check-commit.ts
//   - StorageWriterService               (Services/Storage/StorageWriterService.cs): VerifyCommitChecks,
//                                          soft delete / tombstone (WriteDelete), SoftUndeleteStream
//   - RequestManagerBase                 (Services/RequestManager/Managers/RequestManagerBase.cs):
//                                          ConsistencyChecksFailed -> StreamDeleted vs WrongExpectedVersion
import { randomUUID } from 'node:crypto';
import { checkCommit, DELETED_STREAM, ExpectedVersion, type CommitCheck, type ExpectedRevision, type IndexView } from './check-commit.js';
import { createRecentEvents } from './recent-events.js';

export { DELETED_STREAM, ExpectedVersion, type ExpectedRevision } from './check-commit.js';

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

interface StreamIndex {
  /** Every event ever written, indexed by revision (soft deletes keep revisions going). */
  readonly events: RecordedEvent[];
  tombstone: RecordedEvent | undefined;
}

export interface StreamMetadataView {
  readonly truncateBefore: bigint | undefined;
  readonly maxCount: bigint | undefined;
  /** Seconds. */
  readonly maxAge: bigint | undefined;
}

const NO_METADATA: StreamMetadataView = { truncateBefore: undefined, maxCount: undefined, maxAge: undefined };

export type ReadStreamResult =
  | { readonly kind: 'ok'; readonly events: ReadonlyArray<RecordedEvent>; readonly lastRevision: bigint }
  | { readonly kind: 'not_found' }
  | { readonly kind: 'deleted' };

export type StreamStart = 'start' | 'end' | bigint;
export type AllStart = 'start' | 'end' | bigint;

/** The payload size the server counts against MaxAppendSize (`Event.SizeOnDisk`, Data/Event.cs). */
export function eventSizeOnDisk(event: Pick<ProposedEvent, 'type' | 'data' | 'metadata'>): number {
  return event.data.length + event.metadata.length + event.type.length * 2;
}

const RECORD_HEADER_SIZE = 120n; // rough size of a prepare record's fixed fields and framing
const FIRST_USER_POSITION = 4096n;

export function metastreamOf(streamName: string): string {
  return `$$${streamName}`;
}

export function isMetastream(streamName: string): boolean {
  return streamName.startsWith('$$');
}

export function originalStreamOf(metastreamName: string): string {
  return metastreamName.slice(2);
}

/** `$tb` and `$maxCount` of a `$metadata` JSON document. Numbers are read as text: `$tb` can be 2^63-1. */
export function parseStreamMetadata(data: Uint8Array): StreamMetadataView {
  const text = Buffer.from(data).toString('utf8');
  const integer = (key: string): bigint | undefined => {
    const match = new RegExp(`"\\${key}"\\s*:\\s*(-?\\d+)`).exec(text);
    return match?.[1] === undefined ? undefined : BigInt(match[1]);
  };
  return { truncateBefore: integer('$tb'), maxCount: integer('$maxCount'), maxAge: integer('$maxAge') };
}

type CommitListener = (events: ReadonlyArray<RecordedEvent>) => void;

export interface EventStoreOptions {
  /** Capacity of the weak-idempotency cache in events; default: the server's 8 MiB memory bound. */
  readonly idempotencyCacheSize?: number;
}

/**
 * The durable part (log, stream index) survives `restart()`; the recent-event-id cache used for
 * weak idempotency does not (the server keeps it in memory: IndexWriter `_committedEvents`).
 */
export function createEventStore(options: EventStoreOptions) {
  const log: RecordedEvent[] = [];
  const streams = new Map<string, StreamIndex>();
  const recentEvents = createRecentEvents(options.idempotencyCacheSize);
  const listeners = new Set<CommitListener>();
  // The real log starts with system records (epoch, $settings, ...), so user events never sit at
  // position 0 — which would collide with "from the start" positions of readers and subscribers.
  let nextPosition = FIRST_USER_POSITION;

  function lastEventNumber(streamName: string): bigint {
    const stream = streams.get(streamName);
    if (!stream) return -1n;
    if (stream.tombstone) return DELETED_STREAM;
    return BigInt(stream.events.length) - 1n;
  }

  function streamMetadata(streamName: string): StreamMetadataView {
    const meta = streams.get(metastreamOf(streamName))?.events.at(-1);
    return meta ? parseStreamMetadata(meta.data) : NO_METADATA;
  }

  /** IndexWriter.IsSoftDeleted: the stream's metadata has `$tb` = EventNumber.DeletedStream. */
  function isSoftDeleted(streamName: string): boolean {
    return streamMetadata(streamName).truncateBefore === DELETED_STREAM;
  }

  function eventAt(streamName: string, revision: bigint): RecordedEvent | undefined {
    if (revision < 0n) return undefined;
    return streams.get(streamName)?.events[Number(revision)];
  }

  const index: IndexView = {
    lastEventNumber,
    isSoftDeleted,
    eventAt,
    recentEvent: (eventId) => recentEvents.get(eventId),
    metastreamOf,
  };

  function writeRecord(streamName: string, revision: bigint, event: ProposedEvent): RecordedEvent {
    const recorded: RecordedEvent = {
      streamName,
      id: event.id,
      type: event.type,
      contentType: event.contentType,
      data: event.data,
      metadata: event.metadata,
      revision,
      position: nextPosition,
      created: BigInt(Date.now()) * 10_000n,
    };
    nextPosition +=
      RECORD_HEADER_SIZE + BigInt(Buffer.byteLength(streamName) + Buffer.byteLength(event.type) + event.data.length + event.metadata.length);
    log.push(recorded);
    return recorded;
  }

  function appendToIndex(streamName: string, event: ProposedEvent): RecordedEvent {
    let stream = streams.get(streamName);
    if (!stream) {
      stream = { events: [], tombstone: undefined };
      streams.set(streamName, stream);
    }
    const recorded = writeRecord(streamName, BigInt(stream.events.length), event);
    stream.events.push(recorded);
    recentEvents.remember(recorded.id, { streamName, revision: recorded.revision, position: recorded.position });
    return recorded;
  }

  /**
   * StorageWriterService.SoftUndeleteStream: rewrite the stream's metadata with `$tb` = the first
   * revision of the recreated stream, keeping the other settings.
   */
  function softUndelete(streamName: string, recreateFrom: bigint): RecordedEvent | undefined {
    const metastream = metastreamOf(streamName);
    const rawMeta = streams.get(metastream)?.events.at(-1)?.data;
    if (!rawMeta) return undefined;
    let document: Record<string, unknown>;
    try {
      document = JSON.parse(Buffer.from(rawMeta).toString('utf8')) as Record<string, unknown>;
    } catch {
      return undefined; // the server also leaves unparsable metadata alone (ModifyMetadata)
    }
    const json = JSON.stringify({ ...document, $tb: '__TB__' }).replace('"__TB__"', recreateFrom.toString());
    return appendToIndex(metastream, systemEvent('$metadata', Buffer.from(json)));
  }

  function notify(events: ReadonlyArray<RecordedEvent>): void {
    if (events.length === 0) return;
    for (const listener of [...listeners]) listener(events);
  }

  /**
   * Atomic append to one or more streams (a v1 append is the one-stream case).
   * StorageWriterService.VerifyCommitChecks: all streams ok -> write; every stream idempotent ->
   * success with the original result, nothing written; otherwise report the failures.
   */
  function append(requests: ReadonlyArray<AppendRequest>): AppendResult {
    const checks = requests.map((r) => checkCommit(index, r.streamName, r.expectedRevision, r.events.map((e) => e.id)));

    if (checks.every((c) => c.decision === 'ok')) {
      // Decided before the write (StorageWriterService `IsSoftDeletedMeta`): new metadata for a
      // soft-deleted stream undeletes it, whatever the new metadata says.
      const undeletesOriginal = requests.map((r) => isMetastream(r.streamName) && isSoftDeleted(originalStreamOf(r.streamName)));
      const written: RecordedEvent[] = [];
      let lastEvent: RecordedEvent | undefined;
      const results: StreamAppendResult[] = requests.map((request, i) => {
        const check = checks[i]!;
        let current = check.currentRevision;
        for (const event of request.events) {
          lastEvent = appendToIndex(request.streamName, event);
          written.push(lastEvent);
          current = lastEvent.revision;
        }
        return { kind: 'ok', streamName: request.streamName, currentRevision: current, position: undefined };
      });
      // Soft undelete after the write: the stream itself (writes to a soft-deleted stream), or the
      // stream whose metastream we just wrote to. An empty write to one stream undeletes too.
      requests.forEach((request, i) => {
        const check = checks[i]!;
        const wroteEvents = request.events.length > 0 || requests.length === 1;
        if (!wroteEvents) return;
        if (check.isSoftDeleted) {
          const undelete = softUndelete(request.streamName, check.currentRevision + 1n);
          if (undelete) written.push(undelete);
        }
        if (undeletesOriginal[i]) {
          const original = originalStreamOf(request.streamName);
          const undelete = softUndelete(original, lastEventNumber(original) + 1n);
          if (undelete) written.push(undelete);
        }
      });
      notify(written);
      // The write's position is that of its last event (StorageChaser: CommitChased at the
      // TransactionEnd prepare; WriteEvents reports it as both commit and prepare position) —
      // not that of an undelete's $metadata record written after it.
      const position = lastEvent?.position;
      return {
        ok: true,
        streams: results.map((r) => (r.kind === 'ok' ? { ...r, position } : r)),
        position,
      };
    }

    const withEvents = checks.filter((_, i) => requests[i]!.events.length > 0);
    if (withEvents.length > 0 && withEvents.every((c) => c.decision === 'idempotent')) {
      const position = withEvents.reduce<bigint | undefined>(
        (max, c) => (c.idempotentPosition !== undefined && (max === undefined || c.idempotentPosition > max) ? c.idempotentPosition : max),
        undefined,
      );
      return {
        ok: true,
        streams: checks.map((c) => ({
          kind: 'ok',
          streamName: c.streamName,
          currentRevision: c.idempotentRevision ?? c.currentRevision,
          position,
        })),
        position,
      };
    }

    // RequestManagerBase.Handle(ConsistencyChecksFailed): a tombstoned stream, or a soft-deleted one
    // expected to exist, is reported as StreamDeleted; everything else as WrongExpectedVersion.
    const failures = checks.filter((c) => c.decision !== 'ok');
    const streams = failures.map((c): StreamAppendResult => {
        const tombstoned = c.currentRevision === DELETED_STREAM;
        const softDeleted = c.expectedRevision === ExpectedVersion.StreamExists && c.isSoftDeleted;
        return tombstoned || softDeleted
          ? { kind: 'stream_deleted', streamName: c.streamName }
          : { kind: 'wrong_expected_version', streamName: c.streamName, expectedRevision: c.expectedRevision, currentRevision: c.currentRevision };
    });
    return {
      ok: false,
      position: undefined,
      streams,
      failure: streams.some((r) => r.kind === 'stream_deleted') ? 'stream_deleted' : 'wrong_expected_version',
    };
  }

  function systemEvent(type: string, data: Uint8Array): ProposedEvent {
    return { id: randomUUID(), type, contentType: 'application/json', data, metadata: new Uint8Array() };
  }

  type DeleteResult =
    | { readonly kind: 'ok'; readonly position: bigint }
    | Exclude<StreamAppendResult, { kind: 'ok' }>;

  function failureOf(check: CommitCheck): DeleteResult {
    const tombstoned = check.currentRevision === DELETED_STREAM;
    return tombstoned
      ? { kind: 'stream_deleted', streamName: check.streamName }
      : {
          kind: 'wrong_expected_version',
          streamName: check.streamName,
          expectedRevision: check.expectedRevision,
          currentRevision: check.currentRevision,
        };
  }

  /**
   * Soft delete (StorageWriterService WriteDelete, hardDelete = false): checked like a one-event
   * write, then `{"$tb": EventNumber.DeletedStream}` is written to the metastream. A stream that
   * never existed fails the consistency check.
   */
  function softDelete(streamName: string, expected: bigint): DeleteResult {
    const check = checkCommit(index, streamName, expected, [randomUUID()]);
    if (check.decision !== 'ok') return failureOf(check);
    if (lastEventNumber(streamName) < 0n && lastEventNumber(metastreamOf(streamName)) < 0n) {
      return failureOf({ ...check, decision: 'consistency_check_failure', currentRevision: -1n });
    }
    const recorded = appendToIndex(metastreamOf(streamName), systemEvent('$metadata', Buffer.from(`{"$tb":${DELETED_STREAM}}`)));
    notify([recorded]);
    return { kind: 'ok', position: recorded.position };
  }

  /** Tombstone (WriteDelete, hardDelete = true): a `$streamDeleted` record at EventNumber.DeletedStream. */
  function tombstone(streamName: string, expected: bigint): DeleteResult {
    const check = checkCommit(index, streamName, expected, [randomUUID()]);
    if (check.decision !== 'ok') return failureOf(check);
    let stream = streams.get(streamName);
    if (!stream) {
      stream = { events: [], tombstone: undefined };
      streams.set(streamName, stream);
    }
    // LogRecord.DeleteTombstone: flags IsCommitted only — an empty, non-JSON record.
    const tombstoneRecord = { ...systemEvent('$streamDeleted', new Uint8Array()), contentType: 'application/octet-stream' };
    const recorded = writeRecord(streamName, DELETED_STREAM, tombstoneRecord);
    stream.tombstone = recorded;
    notify([recorded]);
    return { kind: 'ok', position: recorded.position };
  }

  /**
   * A stream read: `fromRevision` inclusive; the visible range starts at `$tb`, keeps only the
   * last `$maxCount` events and those younger than `$maxAge`. A soft-deleted or never-written stream is "not found"; a tombstoned
   * one is "deleted".
   */
  function readStream(streamName: string, direction: 'forwards' | 'backwards', from: StreamStart, maxCount: bigint): ReadStreamResult {
    const stream = streams.get(streamName);
    if (stream?.tombstone) return { kind: 'deleted' };
    if (!stream || stream.events.length === 0) return { kind: 'not_found' };
    const meta = isMetastream(streamName) ? NO_METADATA : streamMetadata(streamName);
    if (meta.truncateBefore === DELETED_STREAM) return { kind: 'not_found' };

    const lastRevision = BigInt(stream.events.length) - 1n;
    let firstVisible = meta.truncateBefore ?? 0n;
    if (meta.maxCount !== undefined) {
      const byCount = lastRevision - meta.maxCount + 1n;
      if (byCount > firstVisible) firstVisible = byCount;
    }
    // $maxAge: events older than that many seconds are no longer readable.
    const oldestCreated = meta.maxAge === undefined ? undefined : (BigInt(Date.now()) - meta.maxAge * 1000n) * 10_000n;
    const events: RecordedEvent[] = [];
    const take = (r: bigint) => {
      const event = stream.events[Number(r)]!;
      if (oldestCreated === undefined || event.created >= oldestCreated) events.push(event);
    };
    if (direction === 'forwards') {
      let r = from === 'start' ? 0n : from === 'end' ? lastRevision + 1n : from;
      if (r < firstVisible) r = firstVisible;
      for (; r <= lastRevision && BigInt(events.length) < maxCount; r++) take(r);
    } else {
      let r = from === 'end' ? lastRevision : from === 'start' ? 0n : from > lastRevision ? lastRevision : from;
      for (; r >= firstVisible && BigInt(events.length) < maxCount; r--) take(r);
    }
    return { kind: 'ok', events, lastRevision };
  }

  /** Index in `log` of the first record at or after `position`. */
  function logIndexAtOrAfter(position: bigint): number {
    let low = 0;
    let high = log.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (log[mid]!.position < position) low = mid + 1;
      else high = mid;
    }
    return low;
  }

  return {
    append,
    softDelete,
    tombstone,
    readStream,
    streamMetadata,
    lastEventNumber,
    /** The whole log in commit order ($all), including system records. */
    log: (): ReadonlyArray<RecordedEvent> => log,
    logIndexAtOrAfter,
    /** Position just past the last record (where the next write will land). */
    headPosition: (): bigint => nextPosition,
    streamEvents: (streamName: string): ReadonlyArray<RecordedEvent> => streams.get(streamName)?.events ?? [],
    streamNames: (): string[] => [...streams.keys()],
    recordCount: (): number => log.length,
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
