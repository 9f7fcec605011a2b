// The durable storage of the in-memory KurrentDB: one global log ($all) in commit order, with byte-
// offset-like positions, and a per-stream index of revisions and tombstones. It records what it is
// given; whether a write is allowed is decided by check-commit.ts and the store's append rules.
import { DELETED_STREAM } from './check-commit.js';
import { isMetastream, NO_METADATA, originalStreamOf, parseStreamMetadata, type StreamMetadataView } from './stream-metadata.js';
import type { ProposedEvent, RecordedEvent } from './store-types.js';

interface StreamIndex {
  /** Every event ever written, indexed by revision (soft deletes keep revisions going). */
  readonly events: RecordedEvent[];
  tombstone: RecordedEvent | undefined;
  /** For a metastream: its last event's settings, parsed once (`parsedFrom` is the event they came from). */
  parsed?: StreamMetadataView;
  parsedFrom?: RecordedEvent;
}

const RECORD_HEADER_SIZE = 120; // rough size of a prepare record's fixed fields and framing
const FIRST_USER_POSITION = 4096;

export function createStreamLog() {
  const log: RecordedEvent[] = [];
  const streams = new Map<string, StreamIndex>();
  /**
   * Metastreams by the name of the stream they describe: every read and append looks up its
   * stream's metadata, and `$$<name>` would be a new string (hashed anew) each time.
   */
  const metastreams = new Map<string, StreamIndex>();
  // The real log starts with system records (epoch, $settings, ...), so user events never sit at
  // position 0 — which would collide with "from the start" positions of readers and subscribers.
  // A number (exact up to 2^53 bytes of log): one BigInt per record instead of one per addition.
  let nextPosition = FIRST_USER_POSITION;
  /** `created` of the records written in the same millisecond: one BigInt for all of them. */
  let createdMs = -1;
  let created = 0n;

  // The last stream found: a read or an append looks its stream up several times in a row
  // (tombstone, events, revision, ...). Only found streams are remembered (an index is never
  // replaced or removed), so a miss is always asked of the map again.
  let lastName: string | undefined;
  let lastIndex: StreamIndex | undefined;
  function find(streamName: string): StreamIndex | undefined {
    if (streamName === lastName) return lastIndex;
    const stream = streams.get(streamName);
    if (stream) {
      lastName = streamName;
      lastIndex = stream;
    }
    return stream;
  }

  function streamOf(streamName: string): StreamIndex {
    let stream = find(streamName);
    if (!stream) {
      stream = { events: [], tombstone: undefined };
      streams.set(streamName, stream);
      if (isMetastream(streamName)) metastreams.set(originalStreamOf(streamName), stream);
    }
    return stream;
  }

  function writeRecord(streamName: string, revision: bigint, event: ProposedEvent): RecordedEvent {
    const now = Date.now();
    if (now !== createdMs) {
      createdMs = now;
      created = BigInt(now) * 10_000n;
    }
    const recorded: RecordedEvent = {
      streamName,
      id: event.id,
      type: event.type,
      contentType: event.contentType,
      data: event.data,
      metadata: event.metadata,
      revision,
      position: BigInt(nextPosition),
      created,
    };
    nextPosition += RECORD_HEADER_SIZE + Buffer.byteLength(streamName) + Buffer.byteLength(event.type) + event.data.length + event.metadata.length;
    log.push(recorded);
    return recorded;
  }

  function lastEventNumber(streamName: string): bigint {
    const stream = find(streamName);
    if (!stream) return -1n;
    if (stream.tombstone) return DELETED_STREAM;
    return BigInt(stream.events.length) - 1n;
  }

  function streamMetadata(streamName: string): StreamMetadataView {
    const metastream = metastreams.get(streamName);
    const meta = metastream?.events.at(-1);
    if (!metastream || !meta) return NO_METADATA;
    if (metastream.parsedFrom !== meta) {
      metastream.parsed = parseStreamMetadata(meta.data);
      metastream.parsedFrom = meta;
    }
    return metastream.parsed!;
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
      return find(streamName)?.events[Number(revision)];
    },
    isTombstoned: (streamName: string): boolean => find(streamName)?.tombstone !== undefined,
    /** The stream's current metadata (the last event of its metastream). */
    streamMetadata,
    /** IndexWriter.IsSoftDeleted: the stream's metadata has `$tb` = EventNumber.DeletedStream. */
    isSoftDeleted: (streamName: string): boolean => streamMetadata(streamName).truncateBefore === DELETED_STREAM,
    streamEvents: (streamName: string): ReadonlyArray<RecordedEvent> => find(streamName)?.events ?? [],
    streamNames: (): string[] => [...streams.keys()],
    /** The whole log in commit order ($all), including system records. */
    log: (): ReadonlyArray<RecordedEvent> => log,
    logIndexAtOrAfter,
    /** Position just past the last record (where the next write will land). */
    headPosition: (): bigint => BigInt(nextPosition),
    recordCount: (): number => log.length,
  };
}

export type StreamLog = ReturnType<typeof createStreamLog>;
