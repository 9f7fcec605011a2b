// The durable storage of the in-memory KurrentDB: one global log ($all) in commit order, with byte-
// offset-like positions, and a per-stream index of revisions and tombstones. It records what it is
// given; whether a write is allowed is decided by check-commit.ts and the store's append rules.
import { DELETED_STREAM } from './check-commit.js';
import { metastreamOf, NO_METADATA, parseStreamMetadata, type StreamMetadataView } from './stream-metadata.js';
import type { ProposedEvent, RecordedEvent } from './store-types.js';

interface StreamIndex {
  /** Every event ever written, indexed by revision (soft deletes keep revisions going). */
  readonly events: RecordedEvent[];
  tombstone: RecordedEvent | undefined;
}

const RECORD_HEADER_SIZE = 120n; // rough size of a prepare record's fixed fields and framing
const FIRST_USER_POSITION = 4096n;

export function createStreamLog() {
  const log: RecordedEvent[] = [];
  const streams = new Map<string, StreamIndex>();
  // The real log starts with system records (epoch, $settings, ...), so user events never sit at
  // position 0 — which would collide with "from the start" positions of readers and subscribers.
  let nextPosition = FIRST_USER_POSITION;

  function streamOf(streamName: string): StreamIndex {
    let stream = streams.get(streamName);
    if (!stream) {
      stream = { events: [], tombstone: undefined };
      streams.set(streamName, stream);
    }
    return stream;
  }

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
    /** Writes an event at the stream's next revision. */
    appendToStream(streamName: string, event: ProposedEvent): RecordedEvent {
      const stream = streamOf(streamName);
      const recorded = writeRecord(streamName, BigInt(stream.events.length), event);
      stream.events.push(recorded);
      return recorded;
    },
    /** Writes a tombstone record at revision DELETED_STREAM; the stream's events stay in the log. */
    writeTombstone(streamName: string, event: ProposedEvent): RecordedEvent {
      const stream = streamOf(streamName);
      const recorded = writeRecord(streamName, DELETED_STREAM, event);
      stream.tombstone = recorded;
      return recorded;
    },
    /** Last event number: `-1` if the stream has none, `DELETED_STREAM` if tombstoned. */
    lastEventNumber,
    eventAt(streamName: string, revision: bigint): RecordedEvent | undefined {
      if (revision < 0n) return undefined;
      return streams.get(streamName)?.events[Number(revision)];
    },
    isTombstoned: (streamName: string): boolean => streams.get(streamName)?.tombstone !== undefined,
    /** The stream's current metadata (the last event of its metastream). */
    streamMetadata,
    /** IndexWriter.IsSoftDeleted: the stream's metadata has `$tb` = EventNumber.DeletedStream. */
    isSoftDeleted: (streamName: string): boolean => streamMetadata(streamName).truncateBefore === DELETED_STREAM,
    streamEvents: (streamName: string): ReadonlyArray<RecordedEvent> => streams.get(streamName)?.events ?? [],
    streamNames: (): string[] => [...streams.keys()],
    /** The whole log in commit order ($all), including system records. */
    log: (): ReadonlyArray<RecordedEvent> => log,
    logIndexAtOrAfter,
    /** Position just past the last record (where the next write will land). */
    headPosition: (): bigint => nextPosition,
    recordCount: (): number => log.length,
  };
}

export type StreamLog = ReturnType<typeof createStreamLog>;
