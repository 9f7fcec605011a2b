// The append rules: may these events be written to this stream at this expected revision? A pure
// function over a read-only view of the index, transcribing KurrentDB's IndexWriter.CheckCommit
// (src/KurrentDB.Core/Services/Storage/ReaderIndex/IndexWriter.cs) rule for rule.
import type { EventInfo } from './recent-events.js';

/** `ExpectedVersion` constants of the server (Data/ExpectedVersion.cs). */
export const ExpectedVersion = {
  Any: -2n,
  NoStream: -1n,
  StreamExists: -4n,
} as const;

/** `EventNumber.DeletedStream` (Data/EventNumber.cs): the revision of a tombstone, and `$tb` of a soft-deleted stream. */
export const DELETED_STREAM = 2n ** 63n - 1n;

/** Expected revision of a write: `-2` any, `-1` no stream, `-4` stream exists, or a revision `>= 0`. */
export type ExpectedRevision = bigint;

export type CommitDecision = 'ok' | 'consistency_check_failure' | 'idempotent' | 'corrupted_idempotency';

export interface CommitCheck {
  readonly decision: CommitDecision;
  readonly streamName: string;
  readonly expectedRevision: bigint;
  /** The stream's last event number; `DELETED_STREAM` when tombstoned, `-1` when it has none. */
  readonly currentRevision: bigint;
  readonly isSoftDeleted: boolean;
  /** For `idempotent`: the revision and position of the last already-written event. */
  readonly idempotentRevision?: bigint;
  readonly idempotentPosition?: bigint;
}

/** What CheckCommit reads. */
export interface IndexView {
  /** Last event number of a stream: `-1` if it has none, `DELETED_STREAM` if tombstoned. */
  lastEventNumber(streamName: string): bigint;
  /** Metadata `$tb` = EventNumber.DeletedStream (IndexWriter.IsSoftDeleted). */
  isSoftDeleted(streamName: string): boolean;
  /** The event at a revision, from the (durable) index. */
  eventAt(streamName: string, revision: bigint): { readonly id: string; readonly position: bigint } | undefined;
  /** The in-memory cache of recently committed events (weak idempotency). */
  recentEvent(eventId: string): EventInfo | undefined;
  metastreamOf(streamName: string): string;
}

/** `eventIds`: the ids of the events to write (empty for a pure consistency check). */
export function checkCommit(index: IndexView, streamName: string, expected: ExpectedRevision, eventIds: ReadonlyArray<string>): CommitCheck {
  const result = (decision: CommitDecision, currentRevision: bigint, extra: Partial<CommitCheck> = {}): CommitCheck => ({
    decision,
    streamName,
    expectedRevision: expected,
    currentRevision,
    isSoftDeleted: false,
    ...extra,
  });

  // The fast path for streams the name index has never seen (CheckCommitForNewStream) is never
  // taken with the default log format v2 (LogV2StreamNameIndex.GetOrReserve: "the stream might
  // exist"), so every stream goes through the rules below; a never-written one is at -1.
  const current = index.lastEventNumber(streamName);
  if (current === DELETED_STREAM) {
    // A tombstoned stream takes no more events, whatever the expected version.
    if (eventIds.length > 0) return result('consistency_check_failure', current);
    return expected === ExpectedVersion.Any || expected === ExpectedVersion.NoStream || expected === DELETED_STREAM
      ? result('ok', current)
      : result('consistency_check_failure', current);
  }

  if (expected === ExpectedVersion.StreamExists) {
    if (index.isSoftDeleted(streamName)) return result('consistency_check_failure', current, { isSoftDeleted: true });
    // A stream with only metadata counts as existing.
    if (current < 0n && index.lastEventNumber(index.metastreamOf(streamName)) < 0n) {
      return result('consistency_check_failure', current);
    }
  }

  // Weak idempotency (Any / StreamExists): the request does not say where the events must be, so
  // only the cache of recently committed event ids is consulted.
  if (expected === ExpectedVersion.Any || expected === ExpectedVersion.StreamExists) {
    let first: EventInfo | undefined;
    let last: EventInfo | undefined;
    for (const id of eventIds) {
      const info = index.recentEvent(id);
      if (info && info.streamName === streamName) {
        first ??= info;
        last = info;
        continue;
      }
      // Some events of the request are written, this one is not: not a retry of one write.
      if (first) return result('corrupted_idempotency', current);
      return result('ok', current, { isSoftDeleted: index.isSoftDeleted(streamName) });
    }
    if (!last) return result('ok', current, { isSoftDeleted: index.isSoftDeleted(streamName) });
    return result('idempotent', current, { idempotentRevision: last.revision, idempotentPosition: last.position });
  }

  // Strong idempotency: the expected revision is before the stream's end (NoStream on an existing
  // stream included). The events must sit exactly at expected+1, expected+2, ... — checked against
  // the cache and, failing that, the index, which survives restarts.
  if (expected < current) {
    let revision = expected;
    let lastPosition: bigint | undefined;
    for (let i = 0; i < eventIds.length; i++) {
      revision += 1n;
      const cached = index.recentEvent(eventIds[i]!);
      const indexed = index.eventAt(streamName, revision);
      if ((cached && cached.streamName === streamName && cached.revision === revision) || indexed?.id === eventIds[i]) {
        lastPosition = indexed?.position ?? cached?.position;
        continue;
      }
      if (i > 0) return result('corrupted_idempotency', current);
      // Appending with NoStream to a soft-deleted stream recreates it.
      if (expected === ExpectedVersion.NoStream && index.isSoftDeleted(streamName)) {
        return result('ok', current, { isSoftDeleted: true });
      }
      return result('consistency_check_failure', current);
    }
    if (eventIds.length === 0) {
      if (expected === ExpectedVersion.NoStream && index.isSoftDeleted(streamName)) {
        return result('ok', current, { isSoftDeleted: true });
      }
      return result('consistency_check_failure', current); // expected an earlier version than it is
    }
    return result('idempotent', current, { idempotentRevision: revision, idempotentPosition: lastPosition });
  }

  // Writing after the end fails; writing exactly at the end is fine.
  if (expected > current) return result('consistency_check_failure', current);
  return result('ok', current, { isSoftDeleted: index.isSoftDeleted(streamName) });
}
