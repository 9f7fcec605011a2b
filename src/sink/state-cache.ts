// The stream-state cache's two building blocks: a segmented least-recently-used map and a concurrency limiter.

/**
 * A map in order of use whose least recently used entry leaves in O(1): two generations — what is
 * used moves to the end of the young one; `takeOldest` takes from the old generation through one
 * iterator kept over it, and when the old one is empty the young one becomes old. (A single Map
 * in LRU order — delete the first key on each insert — gets slower with every eviction: V8 keeps
 * deleted entries as holes that a new iterator from the front must skip until the table is
 * rebuilt; a bulk insert of 1,000,000 new streams through a 100,000-entry cache ran at a third of
 * the speed of 150,000. The kept iterator skips each hole once.)
 */
function createSegment<S>() {
  let young = new Map<string, S>();
  let old = new Map<string, S>();
  let oldest = old.keys();
  return {
    /** The entry, without touching its recency. */
    peek: (key: string): S | undefined => young.get(key) ?? old.get(key),
    has: (key: string): boolean => young.has(key) || old.has(key),
    /** Sets `key`, in no generation yet, as the most recently used. */
    insert(key: string, value: S): void {
      young.set(key, value);
    },
    /** Sets `key` as the most recently used. */
    set(key: string, value: S): void {
      old.delete(key);
      young.delete(key);
      young.set(key, value);
    },
    delete: (key: string): boolean => young.delete(key) || old.delete(key),
    /** Removes and returns the least recently used entry. */
    takeOldest(): [string, S] | undefined {
      if (old.size === 0) {
        old = young;
        young = new Map();
        oldest = old.keys();
      }
      // A Map iterator skips entries deleted since it was made; nothing is added to `old`.
      const next = oldest.next();
      if (next.done) return undefined;
      const value = old.get(next.value)!;
      old.delete(next.value);
      return [next.value, value];
    },
    clear(): void {
      young.clear();
      old.clear();
    },
    get size(): number {
      return young.size + old.size;
    },
    *entries(): Generator<[string, S]> {
      yield* old;
      yield* young;
    },
  };
}

/** The share of the cache that streams used more than once may hold (the protected segment). */
export const PROTECTED_SHARE = 0.8;
/**
 * The share of the cache that streams a pass touched once may hold (the passing segment, see
 * `createLru`): 2,000 states at the default 100,000. It was a fifth until 2026-12-07; at a fiftieth
 * a 1,000,000-row snapshot peaks 7–11 MiB lower (bench/results/2026-12-07-passing-share.md).
 */
export const PASSING_SHARE = 0.02;

/**
 * Stream states, `capacity` of them kept once full, in three segments (a segmented LRU): a stream
 * set for the first time enters the probation segment; used again (`get`) while cached, it moves
 * to the protected one, which holds at most `PROTECTED_SHARE` of the capacity and hands its least
 * recently used back to probation when over. Each new stream over the capacity evicts the least
 * recently used of passing, then of probation, then of protected. Every operation is O(1).
 *
 * Why not plain LRU: a bulk statement touches its streams in one pass, and the next one in the
 * same order. Over more streams than the capacity, plain LRU evicts each stream just before the
 * pass comes back to it — after a graceful restart with 100,000 carried states, an update of all
 * 120,000 orders missed on every one of them. Here a pass of streams seen once churns probation
 * only, and the streams used before (carried ones are adopted as used, `setUsed`) stay.
 *
 * The passing segment: a stream set `passing` (a snapshot record's append: one per entity, and no
 * pass comes back to it) holds at most `PASSING_SHARE` of the capacity, evicting its own least
 * recently used beyond that; used again, it is protected like any other. A 1,000,000-row snapshot
 * otherwise filled the whole cache with states it never asks for again: ~200 B of live heap each,
 * held twice over by the old generation's growth (bench/results/2026-12-06-snapshot-cache.md).
 * `passingShare`: that segment's share of the capacity (tests set another).
 */
export function createLru<S>(capacity: number, onEvict: () => void, passingShare: number = PASSING_SHARE) {
  const limit = Math.max(1, capacity);
  const protectedLimit = Math.floor(limit * PROTECTED_SHARE);
  const passingLimit = Math.max(1, Math.floor(limit * passingShare));
  const passing = createSegment<S>();
  const probation = createSegment<S>();
  const kept = createSegment<S>();
  // Every stream in some segment: a stream not cached — each new stream — is one lookup here
  // instead of six (two generations of three segments) on `get` and as many again on `set`.
  const members = new Set<string>();
  const size = (): number => members.size;
  function evicted(taken: [string, S] | undefined): void {
    if (taken === undefined) return;
    members.delete(taken[0]);
    onEvict();
  }
  function evictOne(): void {
    evicted(passing.takeOldest() ?? probation.takeOldest() ?? kept.takeOldest());
  }
  /** Into the protected segment as the most recently used; its overflow goes back to probation. */
  function protect(stream: string, state: S): void {
    kept.set(stream, state);
    while (kept.size > protectedLimit) {
      const demoted = kept.takeOldest();
      if (!demoted) break;
      probation.set(demoted[0], demoted[1]);
    }
  }
  return {
    /** The state of a cached stream, which counts as a use (probation or passing → protected). */
    get(stream: string): S | undefined {
      if (!members.has(stream)) return undefined;
      const state = kept.peek(stream);
      if (state !== undefined) {
        kept.set(stream, state);
        return state;
      }
      const onProbation = probation.peek(stream);
      const tried = onProbation ?? passing.peek(stream);
      if (tried !== undefined) {
        (onProbation !== undefined ? probation : passing).delete(stream);
        protect(stream, tried);
      }
      return tried;
    },
    /** Whether `stream` is cached, without touching its recency. */
    has(stream: string): boolean {
      return members.has(stream);
    },
    /**
     * Sets a stream's state: in the protected segment when it is there (as its most recently used);
     * otherwise in probation, or with `passing` in the passing segment (a stream only in probation
     * moves there: it was read for this same touch).
     */
    set(stream: string, state: S, touch: 'once' | 'passing' = 'once'): void {
      const segment = touch === 'passing' ? passing : probation;
      if (!members.has(stream)) {
        if (size() >= limit) evictOne();
        segment.insert(stream, state);
        members.add(stream);
      } else if (kept.has(stream)) return kept.set(stream, state);
      else {
        // In probation or passing: into `segment` (out of the other one, when it was there).
        if (!segment.has(stream)) (touch === 'passing' ? probation : passing).delete(stream);
        segment.set(stream, state);
      }
      if (touch === 'passing' && passing.size > passingLimit) evicted(passing.takeOldest());
    },
    /** Sets a stream's state as one used before (a carried state): into the protected segment. */
    setUsed(stream: string, state: S): void {
      if (!members.has(stream)) {
        if (size() >= limit) evictOne();
        members.add(stream);
      } else if (!probation.delete(stream)) passing.delete(stream);
      protect(stream, state);
    },
    delete(stream: string): boolean {
      if (!members.delete(stream)) return false;
      return kept.delete(stream) || probation.delete(stream) || passing.delete(stream);
    },
    clear(): void {
      members.clear();
      kept.clear();
      probation.clear();
      passing.clear();
    },
    get size(): number {
      return size();
    },
    /** Every entry, the first to be evicted first: passing, probation, then protected, each least recently used first. */
    *entries(): Generator<[string, S]> {
      yield* passing.entries();
      yield* probation.entries();
      yield* kept.entries();
    },
  };
}

/** At most `limit` of the tasks run at once; waiting `later` tasks (look-ahead reads) start after every other waiting one. */
export function createLimiter(limit: number) {
  let running = 0;
  const waiting: (() => void)[] = [];
  const waitingLater: (() => void)[] = [];
  return async function run<T>(task: () => Promise<T>, later = false): Promise<T> {
    if (running >= limit) await new Promise<void>((resolve) => (later ? waitingLater : waiting).push(resolve));
    running += 1;
    try {
      return await task();
    } finally {
      running -= 1;
      (waiting.shift() ?? waitingLater.shift())?.();
    }
  };
}
