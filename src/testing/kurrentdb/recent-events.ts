// The cache behind weak idempotency: recently committed event ids, in memory only. KurrentDB keeps
// it in IndexWriter `_committedEvents`, a BoundedCache (Services/Storage/ReaderIndex/BoundedCache.cs):
// a FIFO queue that evicts the oldest ids while it is over its limits — no count limit
// (int.MaxValue) but ESConsts.CommittedEventsMemCacheLimit = 8 MiB of estimated entry sizes.
// A restart empties it, which is why an `any` retry after a restart writes a duplicate.

/** What the cache remembers about a written event (IndexWriter `EventInfo`). */
export interface EventInfo {
  readonly streamName: string;
  readonly revision: bigint;
  readonly position: bigint;
}

/** ESConsts.CommittedEventsMemCacheLimit */
const COMMITTED_EVENTS_MEM_CACHE_LIMIT = 8 * 1024 * 1024;

/** IndexWriter's size estimate of one entry: 16 + 4 + IntPtr.Size + MemSizer.SizeOf(streamId). */
function entrySize(streamName: string): number {
  const stringSize = Math.ceil((20 + streamName.length * 2 + 1) / 8) * 8; // MemSizer.SizeOf(string)
  return 16 + 4 + 8 + stringSize;
}

/**
 * @param capacity a limit in events instead of the server's memory bound (handy in tests:
 *   `2` makes eviction easy to show).
 */
export function createRecentEvents(capacity?: number) {
  // FIFO order lives in `queue` (ids, with the info remembered for each, in two parallel arrays:
  // no object per entry), not in the Map: evicting a Map's oldest entries by iterating it from
  // the front skips every entry deleted so far (V8 keeps them as holes until it rebuilds the
  // table), which made each append slower than the last once the cache was full (a third of the
  // in-memory server's CPU at 300,000 events).
  const entries = new Map<string, EventInfo>();
  let queueIds: string[] = [];
  let queueInfos: EventInfo[] = [];
  let head = 0;
  let bytes = 0;

  const overLimit = () => (capacity !== undefined ? entries.size > capacity : bytes > COMMITTED_EVENTS_MEM_CACHE_LIMIT);

  return {
    get: (eventId: string): EventInfo | undefined => entries.get(eventId),

    /** `info` is kept as it is (the store passes the recorded event itself: no copy per event). */
    remember(eventId: string, info: EventInfo): void {
      const previous = entries.get(eventId);
      if (previous) bytes -= entrySize(previous.streamName);
      entries.set(eventId, info);
      queueIds.push(eventId);
      queueInfos.push(info);
      bytes += entrySize(info.streamName);
      while (overLimit() && head < queueIds.length) {
        const oldest = queueIds[head]!;
        const oldestInfo = queueInfos[head]!;
        head += 1;
        const entry = entries.get(oldest);
        // A stale queue entry: the id was remembered again since (it moved to the end).
        if (!entry || entry !== oldestInfo) continue;
        entries.delete(oldest);
        bytes -= entrySize(entry.streamName);
      }
      if (head > 4096 && head * 2 > queueIds.length) {
        queueIds = queueIds.slice(head);
        queueInfos = queueInfos.slice(head);
        head = 0;
      }
    },

    clear(): void {
      entries.clear();
      queueIds = [];
      queueInfos = [];
      head = 0;
      bytes = 0;
    },
  };
}

export type RecentEvents = ReturnType<typeof createRecentEvents>;
