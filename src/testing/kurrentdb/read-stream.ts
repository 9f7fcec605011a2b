// A stream read over the log: which events a reader sees, given the stream's deletes and its
// metadata (`$tb`, `$maxCount`, `$maxAge`), a direction, a start revision and a count.
import { DELETED_STREAM } from './check-commit.js';
import { isMetastream, NO_METADATA, type StreamMetadataView } from './stream-metadata.js';
import type { ReadStreamResult, RecordedEvent, StreamStart } from './store-types.js';

/** The part of the log a stream read looks at. */
export interface ReadableLog {
  isTombstoned(streamName: string): boolean;
  streamEvents(streamName: string): ReadonlyArray<RecordedEvent>;
  streamMetadata(streamName: string): StreamMetadataView;
}

/**
 * A stream read: `fromRevision` inclusive; the visible range starts at `$tb`, keeps only the
 * last `$maxCount` events and those younger than `$maxAge`. A soft-deleted or never-written stream is "not found"; a tombstoned
 * one is "deleted".
 */
export function readStream(
  log: ReadableLog,
  streamName: string,
  direction: 'forwards' | 'backwards',
  from: StreamStart,
  maxCount: bigint,
  nowMs: number = Date.now(),
): ReadStreamResult {
  if (log.isTombstoned(streamName)) return { kind: 'deleted' };
  const all = log.streamEvents(streamName);
  if (all.length === 0) return { kind: 'not_found' };
  const meta = isMetastream(streamName) ? NO_METADATA : log.streamMetadata(streamName);
  if (meta.truncateBefore === DELETED_STREAM) return { kind: 'not_found' };

  const lastRevision = BigInt(all.length) - 1n;
  let firstVisible = meta.truncateBefore ?? 0n;
  if (meta.maxCount !== undefined) {
    const byCount = lastRevision - meta.maxCount + 1n;
    if (byCount > firstVisible) firstVisible = byCount;
  }
  // $maxAge: events older than that many seconds are no longer readable.
  const oldestCreated = meta.maxAge === undefined ? undefined : (BigInt(nowMs) - meta.maxAge * 1000n) * 10_000n;
  const events: RecordedEvent[] = [];
  const take = (r: bigint) => {
    const event = all[Number(r)]!;
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
