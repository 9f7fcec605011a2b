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
  const entries = new Map<string, EventInfo>(); // insertion order = FIFO order
  let bytes = 0;

  const overLimit = () => (capacity !== undefined ? entries.size > capacity : bytes > COMMITTED_EVENTS_MEM_CACHE_LIMIT);

  return {
    get: (eventId: string): EventInfo | undefined => entries.get(eventId),

    remember(eventId: string, info: EventInfo): void {
      const previous = entries.get(eventId);
      if (previous) {
        entries.delete(eventId);
        bytes -= entrySize(previous.streamName);
      }
      entries.set(eventId, info);
      bytes += entrySize(info.streamName);
      for (const [oldestId, oldest] of entries) {
        if (!overLimit()) break;
        entries.delete(oldestId);
        bytes -= entrySize(oldest.streamName);
      }
    },

    clear(): void {
      entries.clear();
      bytes = 0;
    },
  };
}

export type RecentEvents = ReturnType<typeof createRecentEvents>;
